"""Karpenter v1's NodeClaim (`karpenter.sh/v1`) as karpy records it: one per node launched for a
NodePool, built from the NodePool (a Provisioner of kind "NodePool"), the Node karpy wrote for the
launched instance and the pods' requests; and its status conditions, moved as the node comes up.

Pure: times come in as arguments. `extender/cluster/nodeclaims.py` writes what this builds. The
Node stays karpy's primary object (Karpenter 0.5's design); the NodeClaim is the v1 record of it,
and the Node has no owner reference to it. The claim carries Karpenter's `karpenter.sh/termination`
finalizer: deleting it terminates its node (`lifecycle/nodeclaim_deletion.py`), as in Karpenter v1.

Conditions follow metav1.Condition (type, status, reason, message, lastTransitionTime,
observedGeneration) with meta.SetStatusCondition's rule: lastTransitionTime moves only when the
status does. `Ready` is derived from Launched, Registered and Initialized as Karpenter's
operatorpkg ConditionSet derives its root (`awslabs/operatorpkg status/condition_set.go`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from extender.api import labels as wk
from extender.api.meta import format_time, parse_time_or_none
from extender.api.node import Node
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.nodeclass import API_GROUP as NODE_CLASS_GROUP
from extender.api.provisioner import Provisioner, Requirement, Taint
from extender.api.resources import Resources, resource_list

GROUP, VERSION = "karpenter.sh", "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "NodeClaim"
NODEPOOL_KIND = "NodePool"
NODEPOOL_LABEL = wk.NODEPOOL
NODE_CLASS_KIND = "EC2NodeClass"

LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
READY = "Ready"
DRIFTED = "Drifted"
CONSOLIDATABLE = "Consolidatable"
#: The conditions `Ready` is made of (Karpenter v1 `pkg/apis/v1/nodeclaim_status.go`).
LIFECYCLE = (LAUNCHED, REGISTERED, INITIALIZED)

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"

#: Taints that only say a node is still coming up: Karpenter's KnownEphemeralTaints
#: (`pkg/scheduling/taints.go`) and karpy's own not-ready taint, which readiness lifts.
EPHEMERAL_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        wk.NOT_READY_TAINT_KEY,
    }
)
#: The Ready reason kubelet has not posted yet (the node lifecycle controller's placeholder).
NEVER_UPDATED = "NodeStatusNeverUpdated"


def claim_name(nodepool: str, instance_id: str) -> str:
    """`<nodepool>-<instance id without i->`: derived, not drawn, so a retried launch, an adopted
    instance and the node's termination all find the same claim without listing."""
    return f"{nodepool}-{instance_id.removeprefix('i-')}".lower()


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int = 0

    def manifest(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
            "observedGeneration": self.observed_generation,
        }

    @classmethod
    def from_manifest(cls, raw: Any) -> Condition:
        raw = _mapping(raw)
        generation = raw.get("observedGeneration")
        return cls(
            type=str(raw.get("type") or ""),
            status=str(raw.get("status") or UNKNOWN),
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            last_transition_time=str(raw.get("lastTransitionTime") or ""),
            observed_generation=generation if type(generation) is int else 0,
        )


Conditions = tuple[Condition, ...]


def _mapping(value: Any) -> Mapping[str, Any]:
    """A field read back from the API server, as a map ({} for anything else): claims are read by
    every worker, and a hand-made claim holding the wrong shape must not stop one."""
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def conditions_of(claim: Mapping[str, Any]) -> Conditions:
    conditions = _items(_mapping(_mapping(claim).get("status")).get("conditions"))
    return tuple(Condition.from_manifest(c) for c in conditions)


def get(conditions: Iterable[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: str,
    reason: str = "",
    message: str = "",
    *,
    now: datetime,
    generation: int = 1,
) -> Conditions:
    """`conditions` with `type_` set (reason defaults to the type: metav1 requires one) and Ready
    recomputed; sorted by type, as operatorpkg stores them."""
    return _with_ready(
        _put(conditions, Condition(type_, status, reason or type_, message), now, generation), now, generation
    )


def clear_condition(
    conditions: Sequence[Condition], type_: str, *, now: datetime, generation: int = 1
) -> Conditions:
    """`conditions` without `type_` (for Drifted and Consolidatable, which exist only while they hold)."""
    return _with_ready(tuple(c for c in conditions if c.type != type_), now, generation)


def _put(conditions: Sequence[Condition], new: Condition, now: datetime, generation: int) -> Conditions:
    old = get(conditions, new.type)
    moved = old is None or old.status != new.status
    new = replace(
        new,
        last_transition_time=format_time(now) if moved or old is None else old.last_transition_time,
        observed_generation=generation,
    )
    if old is not None and replace(old, observed_generation=generation) == new:
        return tuple(conditions)
    return tuple(sorted((*(c for c in conditions if c.type != new.type), new), key=lambda c: c.type))


def _with_ready(conditions: Conditions, now: datetime, generation: int) -> Conditions:
    """Ready = True when every lifecycle condition is; else the most recent False one, else the most
    recent Unknown one (operatorpkg's findUnrootDependent), else awaiting reconciliation."""
    parts = [c for c in conditions if c.type in LIFECYCLE]
    if len(parts) == len(LIFECYCLE) and all(c.status == TRUE for c in parts):
        root = Condition(READY, TRUE, READY)
    else:
        latest = sorted(parts, key=lambda c: c.last_transition_time, reverse=True)
        blocking = next((c for c in latest if c.status == FALSE), None) or next(
            (c for c in latest if c.status == UNKNOWN), None
        )
        root = (
            Condition(READY, blocking.status, blocking.reason, blocking.message)
            if blocking
            else Condition(READY, UNKNOWN, "AwaitingReconciliation", "object is awaiting reconciliation")
        )
    return _put(conditions, root, now, generation)


# -- lifecycle -------------------------------------------------------------------------------------


def _joined(node: Node) -> bool:
    """Kubelet has posted the node's status (karpy writes the Node object itself before it boots)."""
    cond = node.ready_condition
    return cond is not None and cond.reason not in ("", NEVER_UPDATED)


def _format_taint(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


def _initialized(node: Node, startup_taints: Sequence[Taint], requests: Resources) -> tuple[str, str, str]:
    """Karpenter's initialization checks, in its order
    (`kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/initialization.go`)."""
    if not node.ready:
        return UNKNOWN, "NodeNotReady", "Node status is NotReady"
    startup = next((t for t in node.taints if any(_same_taint(t, s) for s in startup_taints)), None)
    if startup is not None:
        return UNKNOWN, "StartupTaintsExist", f'StartupTaint "{_format_taint(startup)}" still exists'
    ephemeral = next((t for t in node.taints if t.key in EPHEMERAL_TAINTS), None)
    if ephemeral is not None:
        return (
            UNKNOWN,
            "KnownEphemeralTaintsExist",
            f'KnownEphemeralTaint "{_format_taint(ephemeral)}" still exists',
        )
    missing = next((name for name in sorted(requests.names()) if node.allocatable.get(name) <= 0), None)
    if missing is not None:
        return UNKNOWN, "ResourceNotRegistered", f'Resource "{missing}" was requested but not registered'
    return TRUE, INITIALIZED, ""


def _same_taint(a: Taint, b: Taint) -> bool:
    """corev1.Taint.MatchTaint: key and effect."""
    return a.key == b.key and a.effect == b.effect


def lifecycle(
    conditions: Sequence[Condition],
    node: Node | None,
    *,
    startup_taints: Sequence[Taint] = (),
    requests: Resources | None = None,
    now: datetime,
    generation: int = 1,
) -> Conditions:
    """Registered and Initialized as `node` (None: not found) shows them now. Each is looked at only
    until it is True, as Karpenter's registration and initialization reconcilers do."""
    result = tuple(conditions)
    registered = get(result, REGISTERED)
    if registered is None or registered.status != TRUE:
        if node is None:
            result = set_condition(
                result,
                REGISTERED,
                UNKNOWN,
                "NodeNotFound",
                "Node not registered with cluster",
                now=now,
                generation=generation,
            )
        elif not _joined(node):
            result = set_condition(
                result,
                REGISTERED,
                UNKNOWN,
                "NodeNotJoined",
                "Kubelet has not joined the node yet",
                now=now,
                generation=generation,
            )
        else:
            result = set_condition(result, REGISTERED, TRUE, now=now, generation=generation)
    initialized = get(result, INITIALIZED)
    if initialized is None or initialized.status != TRUE:
        registered = get(result, REGISTERED)
        if node is None or registered is None or registered.status != TRUE:
            status, reason, message = UNKNOWN, "NotRegistered", "Node not registered with cluster"
        else:
            status, reason, message = _initialized(node, startup_taints, requests or Resources())
        result = set_condition(result, INITIALIZED, status, reason, message, now=now, generation=generation)
    return result


def launched(*, now: datetime) -> Conditions:
    """The conditions right after CreateFleet returned the instance."""
    return set_condition((), LAUNCHED, TRUE, now=now)


# -- the object ------------------------------------------------------------------------------------


def duration(seconds: int | None) -> str:
    """A Go duration as the NodeClaim's pattern takes it (`720h`, `1h30m`, `45s`); None = `Never`."""
    if seconds is None:
        return "Never"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)
    return text or "0s"


#: `kubernetes.io` keys the NodeClaim CRD lets requirements use (its CEL rules on `requirements[].key`).
_KUBERNETES_IO_KEYS = frozenset(
    {
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.beta.kubernetes.io/zone",
        wk.ZONE,
        wk.REGION,
        wk.INSTANCE_TYPE,
        wk.ARCH,
        wk.OS,
        "node.kubernetes.io/windows-build",
    }
)


def allowed_key(key: str) -> bool:
    """The NodeClaim CRD's restrictions on requirement keys (karpenter `pkg/apis/crds/
    karpenter.sh_nodeclaims.yaml`): restricted domains refused, the well-known keys let through."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    if key == wk.HOSTNAME:
        return False
    if domain.endswith("kubernetes.io") and not (
        key in _KUBERNETES_IO_KEYS
        or domain.endswith(("node.kubernetes.io", "node-restriction.kubernetes.io"))
    ):
        return False
    if domain.endswith("k8s.io") and not domain.endswith("kops.k8s.io"):
        return False
    return not domain.endswith("karpenter.sh") or key in (wk.CAPACITY_TYPE, NODEPOOL_LABEL)


#: What a launch always resolves, whatever the NodePool asked for.
RESOLVED_KEYS = (NODEPOOL_LABEL, wk.INSTANCE_TYPE, wk.ZONE, wk.CAPACITY_TYPE, wk.ARCH, wk.OS)


def requirements(provisioner: Provisioner, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The NodePool's requirements with every key the node's labels settle narrowed to `In [value]`,
    plus the keys every launch settles (NodePool, instance type, zone, capacity type, arch, os)."""
    labels = wk.with_ga_keys(labels)
    resolved: dict[str, Requirement] = {}
    for req in (*provisioner.requirements, *(Requirement(k, "Exists") for k in RESOLVED_KEYS)):
        key = wk.normalize_key(req.key)
        if key in resolved or not allowed_key(key):
            continue
        value = labels.get(key)
        resolved[key] = Requirement(key, "In", (value,)) if value else replace(req, key=key)
    return [
        {
            "key": r.key,
            "operator": r.operator,
            **({"values": list(r.values)} if r.values else {}),
            **({"minValues": r.min_values} if r.min_values is not None else {}),
        }
        for r in resolved.values()
        if r.operator != "Exists" or r.key not in RESOLVED_KEYS  # a key the launch should settle but did not
    ]


def _taint(taint: Taint) -> dict[str, str]:
    return {"key": taint.key, "effect": taint.effect, **({"value": taint.value} if taint.value else {})}


def manifest(
    provisioner: Provisioner, node: Node, instance_id: str, *, requests: Resources
) -> dict[str, Any]:
    """The NodeClaim of `node`, launched for NodePool `provisioner` (metadata and spec; the API server
    ignores `status` on create, so `launch_status` is written after it)."""
    labels = {k: v for k, v in node.labels.items() if k not in (wk.HOSTNAME, wk.PROVISIONER_NAME)}
    labels[NODEPOOL_LABEL] = provisioner.name
    metadata: dict[str, Any] = {
        "name": claim_name(provisioner.name, instance_id),
        "labels": labels,
        "finalizers": [wk.TERMINATION_FINALIZER],
    }
    if provisioner.annotations:  # Karpenter's NodeClaim carries the template's annotations
        metadata["annotations"] = dict(provisioner.annotations)
    if provisioner.uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": API_VERSION,
                "kind": NODEPOOL_KIND,
                "name": provisioner.name,
                "uid": provisioner.uid,
                "blockOwnerDeletion": True,
            }
        ]
    startup = provisioner.startup_taints
    spec: dict[str, Any] = {
        "nodeClassRef": {
            "group": NODE_CLASS_GROUP,
            "kind": NODE_CLASS_KIND,
            "name": provisioner.provider_ref,
        },
        "requirements": requirements(provisioner, labels),
        # Node resources only: the plan also counts pseudo-resources (CSI attach slots per driver).
        "resources": {
            "requests": resource_list(
                Resources({k: v for k, v in requests.amounts.items() if node.capacity.get(k)})
            )
        },
        "taints": [
            _taint(t)
            for t in node.taints
            if t.key not in EPHEMERAL_TAINTS and not any(_same_taint(t, s) for s in startup)
        ],
        "startupTaints": [_taint(t) for t in startup],
        "expireAfter": duration(provisioner.ttl_seconds_until_expired),
    }
    if provisioner.termination_grace_period is not None:
        spec["terminationGracePeriod"] = duration(provisioner.termination_grace_period)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def launch_status(node: Node, conditions: Sequence[Condition]) -> dict[str, Any]:
    """`status` of the claim of `node`: what the launch resolved, and `conditions`."""
    return {
        "providerID": node.provider_id,
        "nodeName": node.name,
        "imageID": node.annotations.get(AMI_ID_ANNOTATION, ""),
        "capacity": resource_list(node.capacity),
        "allocatable": resource_list(node.allocatable),
        "conditions": [c.manifest() for c in conditions],
    }


def spec_taints(claim: Mapping[str, Any], field: str) -> tuple[Taint, ...]:
    """`spec.taints` or `spec.startupTaints` of a claim read back."""
    return tuple(
        Taint(key=str(t.get("key", "")), effect=str(t.get("effect", "")), value=str(t.get("value") or ""))
        for t in map(_mapping, _items(_mapping(_mapping(claim).get("spec")).get(field)))
    )


@dataclass(frozen=True)
class Record:
    """What garbage collection and the claim's termination read of a claim: whose node and instance
    it records, its age, whether it is being deleted and whether karpy's finalizer holds it."""

    name: str
    provider_id: str = ""
    node_name: str = ""
    created: datetime | None = None
    deleting: bool = False
    finalized: bool = False  # carries `karpenter.sh/termination`

    @classmethod
    def from_manifest(cls, claim: Mapping[str, Any]) -> Record:
        meta = _mapping(_mapping(claim).get("metadata"))
        status = _mapping(_mapping(claim).get("status"))
        return cls(
            name=str(meta.get("name") or ""),
            provider_id=str(status.get("providerID") or ""),
            node_name=str(status.get("nodeName") or ""),
            created=parse_time_or_none(meta.get("creationTimestamp")),
            deleting=bool(meta.get("deletionTimestamp")),
            finalized=wk.TERMINATION_FINALIZER in _items(meta.get("finalizers")),
        )
