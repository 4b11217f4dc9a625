// karpy-provisioner: a dynamic volume provisioner for the local proving ground, built on
// sig-storage-lib-external-provisioner (the library external provisioners use). For a
// WaitForFirstConsumer class it creates, for each claim, a PersistentVolume pinned to the zone of
// the node kube-scheduler selected (volume.kubernetes.io/selected-node), as a zonal block-storage
// CSI driver (EBS) would; the PV controller then binds the claim and kube-scheduler binds the pod.
// No storage exists behind the volumes: kwok runs the pods.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const zoneKey = "topology.kubernetes.io/zone"

type zonal struct{ client kubernetes.Interface }

func (z *zonal) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if opts.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim %s has no selected node: only WaitForFirstConsumer classes are served", opts.PVC.Name)
	}
	node, err := z.client.CoreV1().Nodes().Get(ctx, opts.SelectedNodeName, metav1.GetOptions{})
	if err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	zone := node.Labels[zoneKey]
	if zone == "" {
		return nil, controller.ProvisioningReschedule, fmt.Errorf("node %s has no %s label", node.Name, zoneKey)
	}
	if !allowed(opts.StorageClass.AllowedTopologies, zone) {
		return nil, controller.ProvisioningReschedule, fmt.Errorf("zone %s of node %s is not allowed by class %s", zone, node.Name, opts.StorageClass.Name)
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   opts.PVC.Spec.AccessModes,
			VolumeMode:                    opts.PVC.Spec.VolumeMode,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: opts.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: "/tmp/karpy-volumes/" + opts.PVName},
			},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: zoneKey, Operator: v1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}, controller.ProvisioningFinished, nil
}

// allowed: the class's allowedTopologies (ORed terms of zone lists) admit the zone; none = any.
func allowed(terms []v1.TopologySelectorTerm, zone string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, term := range terms {
		ok := true
		for _, expr := range term.MatchLabelExpressions {
			if expr.Key == zoneKey && !slices.Contains(expr.Values, zone) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (z *zonal) Delete(context.Context, *v1.PersistentVolume) error { return nil }

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	name := flag.String("name", "karpy.sh/zonal", "provisioner name (StorageClass.provisioner)")
	flag.Parse()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client := kubernetes.NewForConfigOrDie(config)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	controller.NewProvisionController(ctx, client, *name, &zonal{client}, controller.LeaderElection(false)).Run(ctx)
}
