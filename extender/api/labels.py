"""Well-known label, taint, annotation and finalizer keys (karpenter.sh/v1alpha5 vocabulary)."""

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
PROVISIONING_NAMESPACE_LABEL = "karpenter.sh/provisioning"
# Set on every Node karpy creates; kwok in the local cluster manages exactly these nodes.
MANAGED_BY_LABEL = "karpy.sh/managed"
LAUNCH_ID_TAG = "karpy.sh/launch-id"


def normalize_key(key: str) -> str:
    """Map deprecated label keys to their current name."""
    return CAPACITY_TYPE if key == CAPACITY_TYPE_ALIAS else key
