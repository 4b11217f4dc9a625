"""Pure predicates over Node and Pod API JSON (camelCase dicts), shared by provisioning and lifecycle."""

# No `from __future__ import annotations` here: this module defines an `annotations()` helper.
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from extender.api import labels
from extender.cluster.nodes import instance_id as instance_id  # shared with provisioning's adoption

Obj = Mapping[str, Any]

CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def name(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def pod_key(pod: Obj) -> str:
    return f"{meta(pod).get('namespace', '')}/{name(pod)}"


def annotations(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def node_labels(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def created(obj: Obj) -> datetime | None:
    return parse_time(meta(obj).get("creationTimestamp"))


def deleting(obj: Obj) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def finalizers(obj: Obj) -> list[str]:
    return list(meta(obj).get("finalizers") or [])


# --- nodes -------------------------------------------------------------------------------------------


def provisioner_name(node: Obj) -> str | None:
    return node_labels(node).get(labels.PROVISIONER_NAME)


def is_karpy_node(node: Obj) -> bool:
    """Karpenter 0.5 manages exactly the nodes labelled with a provisioner name."""
    return provisioner_name(node) is not None


def provider_id(node: Obj) -> str:
    return str((node.get("spec") or {}).get("providerID") or "")


def ready_condition(node: Obj) -> Mapping[str, Any] | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def is_ready(node: Obj) -> bool:
    cond = ready_condition(node)
    return cond is not None and cond.get("status") == "True"


def taints(node: Obj) -> list[Mapping[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def has_taint(node: Obj, key: str) -> bool:
    return any(t.get("key") == key for t in taints(node))


def is_cordoned(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


# --- pods --------------------------------------------------------------------------------------------


def owner_kinds(pod: Obj) -> set[str]:
    return {str(ref.get("kind")) for ref in meta(pod).get("ownerReferences") or []}


def is_daemonset_pod(pod: Obj) -> bool:
    return "DaemonSet" in owner_kinds(pod)


def is_static_pod(pod: Obj) -> bool:
    return "Node" in owner_kinds(pod) or MIRROR_POD_ANNOTATION in annotations(pod)


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_node_bound_workload(pod: Obj) -> bool:
    """Pods that live and die with the node: never evicted, never keep a node from being empty."""
    return is_daemonset_pod(pod) or is_static_pod(pod)


def is_critical(pod: Obj) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def do_not_evict(pod: Obj) -> bool:
    return annotations(pod).get(labels.DO_NOT_EVICT_ANNOTATION) == "true"


def tolerates_unschedulable(pod: Obj) -> bool:
    """A pod that tolerates the cordon taint would be rescheduled right back: Karpenter leaves it."""
    for tol in (pod.get("spec") or {}).get("tolerations") or []:
        if tol.get("operator") == "Exists" and not tol.get("key"):
            return True
        if tol.get("key") == UNSCHEDULABLE_TAINT_KEY and tol.get("effect") in (None, "", "NoSchedule"):
            return True
    return False


def workload_pods(pods: Iterable[Obj]) -> list[Obj]:
    """The pods that make a node non-empty: live, and neither DaemonSet nor static."""
    return [p for p in pods if not is_terminal(p) and not is_node_bound_workload(p)]


def go_duration(seconds: float) -> str:
    """Go's time.Duration text for whole seconds (30s, 5m0s, 1h0m0s), as Karpenter's log lines print it."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
