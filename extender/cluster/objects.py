"""Keys of API JSON read before (or instead of) parsing it into the api's Node and Pod models: the
watch's bookkeeping and the extender's hot path."""

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def name(obj: Obj) -> str:
    return str(_meta(obj).get("name", ""))


def pod_key(pod: Obj) -> str:
    """`namespace/name`, without parsing the pod (kube-scheduler's filter calls, pending-pod events)."""
    return f"{_meta(pod).get('namespace', '')}/{name(pod)}"


def resource_version(obj: Obj) -> str:
    return str(_meta(obj).get("resourceVersion") or "")
