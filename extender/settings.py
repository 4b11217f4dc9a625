"""One Settings object of grouped dataclasses, loaded once from flags and KARPY_* env vars.

Only `from_env` reads os.environ; everything else receives `settings=` explicitly.
Each group is owned by one package; add fields to your own group only.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class AWSSettings:
    region: str = "us-west-2"
    #: boto3 endpoint_url for EC2/SSM/SQS/EventBridge (moto on loopback in the local cluster); "" = AWS.
    endpoint_url: str = ""
    #: Where AWS's public SSM parameters live: each AMI family's parameters are read below it
    #: (extender/cloud/aws/amifamily.py). Tests mirror it elsewhere: moto refuses writes under /aws/service.
    ssm_root: str = "/aws/service"
    #: SQS queue (name or URL) fed by the EventBridge interruption rules; "" disables interruption handling.
    interruption_queue: str = ""
    #: Optional price file ({"onDemand": {...}, "spot": {...}}) consulted before the estimate.
    price_file: str = ""
    #: Whether to call the AWS Pricing API at all (moto has none).
    pricing_api: bool = True
    #: Kubernetes major.minor whose EKS-optimized AMIs nodes boot (the SSM path segment, e.g. "1.37").
    #: "" = the controller passes the API server's version to the cloud provider.
    kubernetes_version: str = ""
    #: Instance profile for Provisioners whose provider block names none (Karpenter 0.5.6's global default).
    default_instance_profile: str = ""
    #: Karpenter's RESERVED_ENIS: ENIs of each node's default network card the VPC CNI does not use
    #: for pods (custom networking, security groups per pod); left out of every node's maxPods.
    reserved_enis: int = 0
    #: The VPC CNI runs with ENABLE_PREFIX_DELEGATION=true: Nitro nodes get the prefix-delegated
    #: maxPods (extender/scheduling/poddensity.py).
    prefix_delegation: bool = False
    #: A JSON or YAML file declaring capacity reservations (docs/capacity-reservations.md), read
    #: only when EC2 answers DescribeCapacityReservations with "not implemented" (moto); "" = none.
    capacity_reservations: str = ""


@dataclass
class BatchingSettings:
    #: Seconds without a new pod that close a batch.
    idle_seconds: float = 1.0
    #: Seconds after the first pod that close a batch regardless.
    max_seconds: float = 10.0
    #: Pods that close a batch regardless.
    max_pods: int = 2000


@dataclass
class ExtenderSettings:
    bind: str = "127.0.0.1:8088"
    #: Serves only /metrics (so scraping it never reaches /filter); "" or the same as `bind` = none.
    metrics_bind: str = "127.0.0.1:8089"
    #: Request bodies above this are refused (413). With nodeCacheCapable (karpy's manifests) a
    #: /filter body is the pod plus node names, ~150 KB at 5,000 nodes; without it kube-scheduler
    #: sends every Node object (~5 KB each), so raise this for large clusters in that mode.
    max_body_bytes: int = 16 * 1024 * 1024
    #: Seconds a client has, from its first byte, to send a whole request (kube-scheduler's
    #: extender httpTimeout is 5s by default; it sends a request in milliseconds).
    request_read_seconds: float = 5.0
    #: PEM certificate and key: serve `bind` over HTTPS (kube-scheduler's `enableHTTPS` with the
    #: issuing CA in `tlsConfig`). Both or neither; the metrics port stays plain HTTP. Files are
    #: read for every new connection, so a rotated Secret is served without a restart.
    tls_cert_file: str = ""
    tls_key_file: str = ""


@dataclass
class LifecycleSettings:
    #: A node that is not Ready this long after creation is terminated.
    registration_ttl_seconds: float = 900.0
    #: At most this many nodes disrupted (expiry) at a time.
    max_disrupting: int = 1
    #: Instances tagged for the cluster with no Node after this long are terminated.
    gc_grace_seconds: float = 120.0
    #: What to do on a rebalance recommendation: "event" (Event + metric) or "replace".
    rebalance_action: str = "event"
    #: Every karpy node is reconciled at least this often, besides watch events and due times.
    resync_seconds: float = 300.0
    #: How often instances and Nodes are compared for garbage (not more often than needed for the grace).
    gc_interval_seconds: float = 30.0
    #: How often the nodes in capacity reservations are checked for a block about to end
    #: (lifecycle/reservation_expiry.py; Karpenter's expiration controller runs every minute).
    reservation_check_seconds: float = 60.0
    #: SQS long-poll wait (max 20) and visibility timeout for interruption messages.
    sqs_wait_seconds: int = 20
    sqs_visibility_seconds: int = 30
    #: Cap on how long an expired node waits for its replacement nodes to become Ready before draining.
    replacement_wait_seconds: float = 300.0
    #: A pod still terminating this long after its deletionTimestamp no longer holds the drain.
    stuck_pod_seconds: float = 60.0
    #: How often consolidation looks for a cheaper shape (Provisioners with consolidation enabled).
    consolidation_interval_seconds: float = 10.0
    #: Karpenter's commandValidationDelay: a decision is recomputed after this long before acting.
    consolidation_validation_seconds: float = 15.0
    #: Nodes younger than this are never consolidated.
    consolidation_min_node_age_seconds: float = 60.0
    #: Replace nodes that stay unhealthy past their repair policy's toleration (lifecycle/repair.py;
    #: Karpenter's NodeRepair feature gate, off by default there too).
    node_repair: bool = False


@dataclass
class LeaderElectionSettings:
    enabled: bool = True
    namespace: str = "karpy"
    lease_name: str = "karpy-controller"
    # Shorter than client-go's 15/10/2 so a killed leader is replaced (and provisioning resumes)
    # within 15 s: a follower waits lease_duration after it last saw the record change, + one retry.
    lease_duration_seconds: float = 10.0
    #: Must stay below lease_duration: the old leader stops before a follower may take over.
    renew_deadline_seconds: float = 7.0
    retry_period_seconds: float = 1.0
    #: This replica's pod (downward API); when set, the leader labels it so the extender Service
    #: routes kube-scheduler to the replica holding the guard's state (extender/cluster/leaderlabel.py).
    pod_name: str = ""


@dataclass
class Settings:
    cluster_name: str = "karpy"
    cluster_endpoint: str = ""
    #: Base64 PEM of the cluster CA that nodes trust (EKS DescribeCluster certificateAuthority.data).
    cluster_ca_bundle: str = ""
    #: The cluster's service CIDR; nodeadm (AL2023) requires it in every NodeConfig.
    cluster_cidr: str = ""
    #: kubelet clusterDNS for Provisioners whose kubeletConfiguration names none ("" = the AMI's own).
    cluster_dns: str = ""
    kubeconfig: str = ""
    namespace: str = "karpy"
    log_level: str = "INFO"
    #: How long the room of a pod kube-scheduler binds (claims bound on the chosen node, rules
    #: karpy does not evaluate) stays held on the node planned for it; then an Event, and released.
    scheduler_bind_deadline_seconds: float = 300.0
    aws: AWSSettings = field(default_factory=AWSSettings)
    batching: BatchingSettings = field(default_factory=BatchingSettings)
    extender: ExtenderSettings = field(default_factory=ExtenderSettings)
    lifecycle: LifecycleSettings = field(default_factory=LifecycleSettings)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)


def _coerce(raw: str, current: object) -> object:
    if isinstance(current, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"not a boolean: {raw!r}")
    if isinstance(current, int):
        return int(raw)
    if isinstance(current, float):
        return float(raw)
    return raw


def from_env(env: Mapping[str, str] | None = None, prefix: str = "KARPY_") -> Settings:
    """Settings from KARPY_<GROUP>_<FIELD> env vars, e.g. KARPY_AWS_ENDPOINT_URL."""
    env = os.environ if env is None else env
    settings = Settings()
    for top in dataclasses.fields(settings):
        value = getattr(settings, top.name)
        if dataclasses.is_dataclass(value):
            for sub in dataclasses.fields(value):
                key = f"{prefix}{top.name}_{sub.name}".upper()
                if key in env:
                    setattr(value, sub.name, _coerce(env[key], getattr(value, sub.name)))
        else:
            key = f"{prefix}{top.name}".upper()
            if key in env:
                setattr(settings, top.name, _coerce(env[key], value))
    return settings
