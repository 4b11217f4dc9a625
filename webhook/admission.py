"""AdmissionReview v1 on the wire, as pure functions: parse a request body, build a response.

A body that is not an AdmissionReview v1 with a request uid raises BadReview (the app answers HTTP 400);
anything wrong past that point is answered with an AdmissionReview denial that echoes the uid, an
object nested too deeply included (the API server reports a webhook's HTTP 400 as its own 500,
without the field path).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.api.schema_text import summarize

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
#: Deepest JSON nesting accepted. Real objects stay under ~20 levels (a pod's affinity terms are
#: the deepest); the handlers recurse (deepcopy, JSON Patch diff), so a body near Python's recursion
#: limit would fail inside them with a RecursionError and a traceback thousands of lines long.
MAX_DEPTH = 100


class BadReview(ValueError):
    """The body is not a usable AdmissionReview; answered with HTTP 400 and this message."""


@dataclass(frozen=True)
class GroupVersionKind:
    group: str = ""
    version: str = ""
    kind: str = ""

    def __str__(self) -> str:
        return "/".join(p for p in (self.group, self.version) if p) + f" {self.kind}"


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    kind: GroupVersionKind
    operation: str = ""
    namespace: str = ""
    name: str = ""
    sub_resource: str = ""
    object: Any = None
    old_object: Any = None
    dry_run: bool = False
    #: Where the object is nested deeper than MAX_OBJECT_DEPTH ("" = it is not): denied unread.
    too_deep: str = ""


@dataclass(frozen=True)
class Verdict:
    """What a handler decided; `patch` is a JSON Patch (RFC 6902) list, empty for no change."""

    allowed: bool = True
    patch: Sequence[Mapping[str, Any]] = ()
    code: int = 200
    message: str = ""
    warnings: tuple[str, ...] = ()

    @classmethod
    def deny(cls, code: int, message: str) -> Verdict:
        return cls(allowed=False, code=code, message=message)

    @classmethod
    def refuse(cls, problems: Sequence[str]) -> Verdict:
        """Admitted when `problems` is empty; else denied (403) with them, bounded in length
        (schema_text.summarize): the first few field paths and "+N more"."""
        return cls.deny(403, summarize(problems)) if problems else cls()


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_review(body: bytes) -> AdmissionRequest:
    """bytes -> AdmissionRequest; raises BadReview with a one-line reason."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadReview(f"body is not UTF-8: invalid byte at offset {err.start}") from err
    try:
        review = json.loads(text)
    except RecursionError as err:
        raise BadReview("body is not JSON: nested too deeply") from err
    except ValueError as err:
        raise BadReview(f"body is not JSON: {err}") from err
    if not isinstance(review, dict):
        raise BadReview(f"expected a JSON object, got {type(review).__name__}")
    too_deep = depth(review) > MAX_DEPTH
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        raise BadReview(f"expected apiVersion {API_VERSION} kind {KIND}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview request has no uid")
    kind = request.get("kind")
    gvk: dict[str, Any] = kind if isinstance(kind, dict) else {}
    if too_deep:
        # Nothing past the path is read: the handlers recurse.
        where = deepest_path(request.get("object"), MAX_OBJECT_DEPTH) or deepest_path(
            request, MAX_OBJECT_DEPTH
        )
        return AdmissionRequest(uid=uid, kind=GroupVersionKind(), too_deep=where or "request")
    return AdmissionRequest(
        uid=uid,
        kind=GroupVersionKind(_str(gvk.get("group")), _str(gvk.get("version")), _str(gvk.get("kind"))),
        operation=_str(request.get("operation")),
        namespace=_str(request.get("namespace")),
        name=_str(request.get("name")),
        sub_resource=_str(request.get("subResource")),
        object=request.get("object"),
        old_object=request.get("oldObject"),
        dry_run=request.get("dryRun") is True,
    )


#: The object sits three levels down in the review (review, request, object).
MAX_OBJECT_DEPTH = MAX_DEPTH - 3
#: Path segments shown before the rest is elided.
SHOWN_SEGMENTS = 6


def deepest_path(value: Any, limit: int) -> str:
    """The field path ("spec.provider.a.b...") at which `value` nests deeper than `limit`, or ""."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            children: list[tuple[Any, str]] = [(v, str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"[{i}]") for i, v in enumerate(item)]
        else:
            continue
        if len(path) >= limit:
            shown = "".join(p if p.startswith("[") else f".{p}" for p in path[:SHOWN_SEGMENTS]).lstrip(".")
            return shown + (f"... ({len(path)} levels)" if len(path) > SHOWN_SEGMENTS else "")
        stack.extend((child, (*path, name)) for child, name in children)
    return ""


def depth(value: Any) -> int:
    """Nesting depth of decoded JSON, without recursion (a scalar is 0, `{}` and `[]` are 1); stops
    counting past MAX_DEPTH. Level by level, in comprehensions: a 4 MiB review of 100,000 small
    objects is walked in a tenth of a second."""
    level, frontier = 0, [value]
    while level <= MAX_DEPTH:
        containers = [item for item in frontier if isinstance(item, dict | list)]
        if not containers:
            break
        level += 1
        frontier = [
            child for item in containers for child in (item.values() if isinstance(item, dict) else item)
        ]
    return level


def build_response(uid: str, verdict: Verdict) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": verdict.code, "message": verdict.message, "status": "Failure"}
    elif verdict.patch:
        # ensure_ascii keeps lone surrogates from user input encodable.
        raw = json.dumps(list(verdict.patch), separators=(",", ":"), ensure_ascii=True).encode("ascii")
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(raw).decode("ascii")
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def _pointer(path: str, key: str | int) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def json_patch(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """A JSON Patch turning `old` into `new`: maps are diffed key by key, anything else is replaced whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = [{"op": "remove", "path": _pointer(path, k)} for k in old if k not in new]
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": _pointer(path, key), "value": value})
            else:
                ops.extend(json_patch(old[key], value, _pointer(path, key)))
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": path, "value": new}]
