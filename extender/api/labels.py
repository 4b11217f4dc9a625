"""Well-known label, taint, annotation and finalizer keys (karpenter.sh/v1alpha5 vocabulary)."""

from collections.abc import Mapping

GROUP = "karpenter.sh"
API_VERSION = "karpenter.sh/v1alpha5"

ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
# Karpenter <= 0.5 used this key; accepted everywhere and rewritten to CAPACITY_TYPE.
CAPACITY_TYPE_ALIAS = "node.k8s.aws/capacity-type"
PROVISIONER_NAME = "karpenter.sh/provisioner-name"
#: The v1 owner label: a NodePool's nodes carry it where a Provisioner's carry PROVISIONER_NAME.
NODEPOOL = "karpenter.sh/nodepool"
#: Either names the object a node belongs to (names are unique across both kinds).
OWNER_LABELS = (PROVISIONER_NAME, NODEPOOL)

WELL_KNOWN_LABELS = frozenset({ZONE, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, PROVISIONER_NAME, NODEPOOL})

# Karpenter's AWS provider labels (`pkg/apis/v1/labels.go`): what an instance type is, derived from
# DescribeInstanceTypes (scheduling/instancelabels.py). A type lacking a figure (no GPU, no NVMe)
# lacks the label: DoesNotExist holds for it.
AWS_LABEL_DOMAIN = "karpenter.k8s.aws"
INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
INSTANCE_CAPABILITY_FLEX = "karpenter.k8s.aws/instance-capability-flex"
INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
INSTANCE_CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"
INSTANCE_CPU_CLOCK = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
INSTANCE_EBS_BANDWIDTH = "karpenter.k8s.aws/instance-ebs-bandwidth"
INSTANCE_NETWORK_BANDWIDTH = "karpenter.k8s.aws/instance-network-bandwidth"
INSTANCE_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
INSTANCE_ENCRYPTION_IN_TRANSIT = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
INSTANCE_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"
INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
INSTANCE_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = "karpenter.k8s.aws/instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
INSTANCE_TYPE_LABELS = frozenset(
    {
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_SIZE,
        INSTANCE_CAPABILITY_FLEX,
        INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_CPU_CLOCK,
        INSTANCE_MEMORY,
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_HYPERVISOR,
        INSTANCE_ENCRYPTION_IN_TRANSIT,
        INSTANCE_LOCAL_NVME,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
    }
)
RESTRICTED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", AWS_LABEL_DOMAIN)
RESTRICTED_LABELS = frozenset({HOSTNAME})

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
#: Karpenter v1.3+: a node launched into an on-demand capacity reservation or capacity block.
CAPACITY_TYPE_RESERVED = "reserved"
#: Set only on reserved nodes (Karpenter AWS `pkg/apis/v1/labels.go`): which reservation, its type
#: (`default` or `capacity-block`) and whether EC2 may reclaim it.
CAPACITY_RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
CAPACITY_RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
CAPACITY_RESERVATION_INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"
RESERVATION_LABELS = (CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_RESERVATION_INTERRUPTIBLE)

NOT_READY_TAINT_KEY = "karpenter.sh/not-ready"
TERMINATION_FINALIZER = "karpenter.sh/termination"
EMPTINESS_TIMESTAMP_ANNOTATION = "karpenter.sh/emptiness-timestamp"
#: Stamped on a node at launch: the hash of its Provisioner's node-shaping fields (v0.30 drift).
PROVISIONER_HASH_ANNOTATION = "karpenter.sh/provisioner-hash"
PROVISIONER_HASH_VERSION_ANNOTATION = "karpenter.sh/provisioner-hash-version"
#: Set on a node found drifted (Karpenter v0.21's `karpenter.sh/voluntary-disruption: drifted`).
VOLUNTARY_DISRUPTION_ANNOTATION = "karpenter.sh/voluntary-disruption"
DO_NOT_EVICT_ANNOTATION = "karpenter.sh/do-not-evict"
DO_NOT_CONSOLIDATE_ANNOTATION = "karpenter.sh/do-not-consolidate"
PROVISIONING_NAMESPACE_LABEL = "karpenter.sh/provisioning"
# Set on every Node karpy creates; kwok in the local cluster manages exactly these nodes.
MANAGED_BY_LABEL = "karpy.sh/managed"
LAUNCH_ID_TAG = "karpy.sh/launch-id"
#: Stamped on a node at launch: its NodePool's startupTaints ("key=value:Effect,key:Effect"), so the
#: solver and the bind read them off the node itself, as Karpenter reads them off its NodeClaim.
STARTUP_TAINTS_ANNOTATION = "karpy.sh/startup-taints"
#: Put on a node while karpy removes it (consolidation, emptiness, drift, expiry, interruption), so
#: kube-scheduler's TaintToleration keeps new pods off it without asking the extender: Karpenter
#: v1's `karpenter.sh/disrupted:NoSchedule`. Karpy's own solver reads it as a removal mark.
DISRUPTED_TAINT_KEY = "karpy.sh/disrupted"
#: The extended resource a pod requests (any amount) to be sent to karpy's extender: the one the
#: shipped scheduler config declares in managedResources (ignoredByScheduler), so every other pod
#: is scheduled without a call to karpy.
GUARDED_RESOURCE = "karpy.sh/guarded"
#: A kubelet's mirror of a static pod (from a manifest file on the node).
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
#: When a node's drain must end, whatever its terminationGracePeriod: set by node repair before it
#: deletes the node (Karpenter's `karpenter.sh/nodeclaim-termination-timestamp`, on the Node here, as a
#: v1alpha5 node has no NodeClaim).
TERMINATION_TIMESTAMP_ANNOTATION = "karpy.sh/termination-timestamp"
#: The taint a cordoned node carries (spec.unschedulable).
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


REGION = "topology.kubernetes.io/region"
#: Deprecated keys still written on pods and Provisioners -> the key kubelet/karpy label nodes with.
DEPRECATED_LABELS = {
    CAPACITY_TYPE_ALIAS: CAPACITY_TYPE,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
}


def with_ga_keys(labels: Mapping[str, str]) -> Mapping[str, str]:
    """Node labels with deprecated keys also under their GA names (the GA label wins if both are set)."""
    extra = {ga: labels[old] for old, ga in DEPRECATED_LABELS.items() if old in labels and ga not in labels}
    return {**labels, **extra} if extra else labels


def normalize_key(key: str) -> str:
    """Map deprecated label keys to their current name."""
    return DEPRECATED_LABELS.get(key, key)


def owner_of(labels: Mapping[str, str]) -> str | None:
    """The Provisioner or NodePool a node (or a pod's nodeSelector) names, if any."""
    return labels.get(PROVISIONER_NAME) or labels.get(NODEPOOL)
