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

WELL_KNOWN_LABELS = frozenset({ZONE, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, PROVISIONER_NAME})
RESTRICTED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh")
RESTRICTED_LABELS = frozenset({HOSTNAME})

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"

NOT_READY_TAINT_KEY = "karpenter.sh/not-ready"
TERMINATION_FINALIZER = "karpenter.sh/termination"
EMPTINESS_TIMESTAMP_ANNOTATION = "karpenter.sh/emptiness-timestamp"
DO_NOT_EVICT_ANNOTATION = "karpenter.sh/do-not-evict"
DO_NOT_CONSOLIDATE_ANNOTATION = "karpenter.sh/do-not-consolidate"
PROVISIONING_NAMESPACE_LABEL = "karpenter.sh/provisioning"
# Set on every Node karpy creates; kwok in the local cluster manages exactly these nodes.
MANAGED_BY_LABEL = "karpy.sh/managed"
LAUNCH_ID_TAG = "karpy.sh/launch-id"
#: A kubelet's mirror of a static pod (from a manifest file on the node).
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
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
