"""Pod defaulting: point a new pod at a Provisioner with `nodeSelector karpenter.sh/provisioner-name`.

Only on CREATE, only for pods that select no Provisioner themselves, and never for DaemonSet,
static/mirror or already-bound pods or pods in excluded namespaces. The chosen name is the
highest-weight Provisioner whose constraints the pod fits, or the default when none exists.

When the Provisioners cannot be listed (API server hiccup), the pod is admitted unchanged with a
warning: the nodeSelector is immutable, so a guess would pin the pod for good (to `default`, which
may not exist, or while a heavier Provisioner fits), whereas an unpinned pod loses nothing, since
karpy's provisioning picks the Provisioner by the same rule when it plans the pod. Denying instead
would stall every rollout in opted-in namespaces for the length of the hiccup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from extender.api import labels
from extender.api.pod import Pod, PodError
from extender.api.provisioner import Provisioner
from extender.scheduling.pool_choice import select_provisioner
from webhook.admission import AdmissionRequest, Verdict, json_patch
from webhook.config import WebhookConfig

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SKIPPED_OWNERS = frozenset({"DaemonSet", "Node"})  # Node-owned = static pod's mirror

Provisioners = Callable[[], Sequence[Provisioner] | None]

UNKNOWN_WARNING = (
    "karpy: provisioners could not be listed, admitted without a provisioner-name "
    "(karpy chooses one when it provisions)"
)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mentions_provisioner(terms: list[Any]) -> bool:
    return any(
        _dict(expr).get("key") in labels.OWNER_LABELS
        for term in terms
        for expr in _list(_dict(term).get("matchExpressions"))
    )


def selects_provisioner(spec: Mapping[str, Any]) -> bool:
    """True when the pod names a Provisioner by nodeSelector or by required/preferred node affinity."""
    if any(key in _dict(spec.get("nodeSelector")) for key in labels.OWNER_LABELS):
        return True
    node_affinity = _dict(_dict(spec.get("affinity")).get("nodeAffinity"))
    required = _list(
        _dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")).get("nodeSelectorTerms")
    )
    preferred = [
        _dict(p).get("preference")
        for p in _list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
    ]
    return _mentions_provisioner(required) or _mentions_provisioner(preferred)


def skip_reason(pod: Mapping[str, Any], namespace: str, config: WebhookConfig) -> str | None:
    metadata, spec = _dict(pod.get("metadata")), _dict(pod.get("spec"))
    if config.skips_namespace(namespace):
        return f"namespace {namespace} is excluded"
    if spec.get("nodeName"):
        return "pod is already bound"
    if MIRROR_ANNOTATION in _dict(metadata.get("annotations")):
        return "mirror pod"
    kinds = (_dict(ref).get("kind") for ref in _list(metadata.get("ownerReferences")))
    if any(isinstance(kind, str) and kind in SKIPPED_OWNERS for kind in kinds):
        return "DaemonSet or static pod"
    if selects_provisioner(spec):
        return "pod already selects a provisioner"
    return None


def choose(
    pod: Mapping[str, Any], namespace: str, known: Sequence[Provisioner] | None, default: str
) -> tuple[str | None, str]:
    """(provisioner name or None, warning); `known` None means the list failed just now."""
    if known is None:
        return None, UNKNOWN_WARNING
    if not known:
        return default, ""
    metadata = dict(_dict(pod.get("metadata")))
    # At admission a controller-made pod has only generateName; the namespace may come from the request.
    metadata.setdefault("namespace", namespace)
    metadata.setdefault("name", metadata.get("generateName") or "<new pod>")
    try:
        parsed = Pod.from_manifest({**pod, "metadata": metadata})
    except PodError as err:
        return None, f"karpy: no provisioner selected: {err}"
    chosen = select_provisioner(parsed, known)
    if chosen is None:
        return None, f"karpy: no provisioner fits this pod (tried {len(known)})"
    return chosen.name, ""


def mutate(request: AdmissionRequest, config: WebhookConfig, provisioners: Provisioners) -> Verdict:
    if request.kind.group or request.kind.kind != "Pod":
        return Verdict.deny(400, f"expected v1 Pod, got {request.kind}")
    if request.operation != "CREATE" or request.sub_resource:
        return Verdict()
    pod = request.object
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return Verdict.deny(400, "request.object is not a Pod")
    namespace = request.namespace or str(_dict(pod.get("metadata")).get("namespace") or "")
    if skip_reason(pod, namespace, config) is not None:
        return Verdict()
    name, warning = choose(pod, namespace, provisioners(), config.default_provisioner)
    if name is None:
        return Verdict(warnings=(warning,))
    spec = pod["spec"]
    # A NodePool's nodes carry `karpenter.sh/nodepool`, a Provisioner's `provisioner-name`.
    key = next((p.owner_label for p in provisioners() or () if p.name == name), labels.PROVISIONER_NAME)
    selected = {**spec, "nodeSelector": {**_dict(spec.get("nodeSelector")), key: name}}
    return Verdict(patch=json_patch(spec, selected, "/spec"))
