"""The status karpy writes on v1 objects, as Karpenter v1 reports it (status subresource).

EC2NodeClass: `subnets`, `securityGroups`, `amis`, `instanceProfile` (what its selectors find now,
from the cloud provider) and the conditions `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`,
`InstanceProfileReady` folded into `Ready`; NodePool: `resources` and `nodes` (the capacity and
count of its live and in-flight nodes, as `status.resources` of a Provisioner) and the conditions
`NodeClassReady` and `Ready`. One pass writes every object; the controller runs it periodically.
A NodePool's `NodeRegistrationHealthy` is written apart, when provisioning backs the pool's
launches off or lifts that (`set_condition`), and the pass keeps it. An object that does not load,
whatever it raises, is `Ready=False` with reason `ValidationFailed` and the (shortened) error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from marshmallow import ValidationError

from extender.api import ec2nodeclass, nodepool
from extender.api.ec2nodeclass import load_ec2nodeclass
from extender.api.nodeclass import NodeClass
from extender.api.nodepool import parse_nodepool
from extender.api.quantity import format_cpu, format_memory
from extender.api.resources import Resources
from extender.cluster import inventory
from extender.cluster import nodes as kube_nodes
from extender.cluster import pool_resources as kube_provisioners
from extender.cluster.errors import ClusterError, translated
from extender.cluster.quarantine import short
from extender.settings import Settings

log = logging.getLogger("karpy.v1status")

#: What resolves an EC2NodeClass's selectors (AWSCloudProvider.node_class_status): its status
#: fields, and under UNRESOLVED why a selector found nothing (status key -> message).
Resolve = Callable[[NodeClass], dict[str, Any]]
UNRESOLVED = "unresolved"
#: The status pass's period, as Karpenter's node class status controller requeues.
PERIOD_SECONDS = 60.0


def condition(kind: str, ok: bool, reason: str, message: str, now: str, generation: int) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason if not ok else kind,
        "message": "" if ok else message,
        "lastTransitionTime": now,
        "observedGeneration": generation,
    }


#: Conditions written apart from the status pass (provisioning's launch backoff): kept by it.
REGISTRATION_HEALTHY = "NodeRegistrationHealthy"
KEPT = frozenset({REGISTRATION_HEALTHY})


def _keep_times(old: list[Any], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A condition whose status did not change keeps its lastTransitionTime; those written apart
    (KEPT) are carried over as they are."""
    before = {c.get("type"): c for c in old if isinstance(c, dict)}
    for cond in new:
        prior = before.get(cond["type"])
        if prior and prior.get("status") == cond["status"] and prior.get("lastTransitionTime"):
            cond["lastTransitionTime"] = prior["lastTransitionTime"]
    written = {cond["type"] for cond in new}
    return new + [c for t, c in before.items() if t in KEPT and t not in written]


def _conditions(obj: Mapping[str, Any]) -> list[Any]:
    """The object's current conditions; none when its status is not what the API writes."""
    status = obj.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return found if isinstance(found, list) else []


def _failure(err: Exception) -> str:
    return short(kube_provisioners.error_text(err) if isinstance(err, ValidationError) else f"{err}")


def node_class_status(
    obj: Mapping[str, Any], resolve: Resolve, settings: Settings, now: str
) -> tuple[dict[str, Any], bool]:
    """(status, ready) of one EC2NodeClass manifest."""
    generation = _generation(obj)
    try:
        loaded = load_ec2nodeclass(
            obj, cluster_name=settings.cluster_name, cluster_endpoint=settings.cluster_endpoint
        )
    except Exception as err:  # one object's boundary: reported on it, the others go on
        return {
            "conditions": [condition("Ready", False, "ValidationFailed", _failure(err), now, generation)]
        }, False
    try:
        found = dict(resolve(loaded.node_class))
    except Exception as err:  # the cloud's CloudError (cluster may not import cloud): reported, not raised
        return {
            "conditions": [condition("Ready", False, "ResolutionFailed", str(err), now, generation)]
        }, False
    why = found.pop(UNRESOLVED, None) or {}
    # Karpenter AWS's conditions, reasons and messages (pkg/controllers/nodeclass: subnet.go,
    # securitygroup.go, ami.go), followed by the resolver's own words when it has them.
    parts = [
        ("SubnetsReady", "subnets", "SubnetsNotFound", "SubnetSelector did not match any Subnets"),
        (
            "SecurityGroupsReady",
            "securityGroups",
            "SecurityGroupsNotFound",
            "SecurityGroupSelector did not match any SecurityGroups",
        ),
        ("AMIsReady", "amis", "AMINotFound", "AMISelector did not match any AMIs"),
        ("InstanceProfileReady", "instanceProfile", "InstanceProfileNotFound", "no instance profile"),
    ]
    conditions = [
        condition(kind, bool(found.get(key)), reason, _detailed(message, why.get(key)), now, generation)
        for kind, key, reason, message in parts
    ]
    failing = [c for c in conditions if c["status"] != "True"]
    ready = not failing
    summary = "; ".join(c["message"] for c in failing)
    conditions.append(condition("Ready", ready, "NotReady", summary, now, generation))
    return {**found, "conditions": conditions}, ready


def _detailed(message: str, detail: str | None) -> str:
    return f"{message}: {detail}" if detail else message


def nodepool_status(
    obj: Mapping[str, Any], ready_classes: Mapping[str, bool], used: Resources, nodes: int, now: str
) -> dict[str, Any]:
    """The status of one NodePool manifest: its nodes' resources and whether it can launch."""
    generation = _generation(obj)
    try:
        pool = parse_nodepool(dict(obj))
    except Exception as err:  # one object's boundary
        conditions = [condition("Ready", False, "ValidationFailed", _failure(err), now, generation)]
    else:
        ref = pool.provider_ref
        found = ready_classes.get(ref)
        message = f"EC2NodeClass {ref} not found" if found is None else f"EC2NodeClass {ref} is not ready"
        conditions = [
            condition("NodeClassReady", bool(found), "NodeClassNotReady", message, now, generation),
            condition("Ready", bool(found), "NodeClassNotReady", message, now, generation),
        ]
    resources = {"cpu": format_cpu(used.cpu), "memory": format_memory(int(used.memory // 1024) * 1024)}
    resources["nodes"] = str(nodes)
    if used.get("pods"):
        resources["pods"] = str(int(used.get("pods")))
    return {"resources": resources, "nodes": nodes, "conditions": conditions}


def _generation(obj: Mapping[str, Any]) -> int:
    meta = obj.get("metadata")
    value = meta.get("generation") if isinstance(meta, Mapping) else None
    return value if isinstance(value, int) else 0


def set_condition(kube: client.ApiClient, name: str, ok: bool, reason: str, message: str) -> None:
    """Write the NodePool's NodeRegistrationHealthy (read, replace that one condition, merge-patch
    the status), best effort: the next change writes it again."""
    group, version = nodepool.API_VERSION.split("/")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        api = client.CustomObjectsApi(kube)
        with translated(f"reading nodepool {name}"):
            obj = api.get_cluster_custom_object(group, version, nodepool.PLURAL, name)
        old = [c for c in _conditions(obj) if isinstance(c, dict)]
        cond = condition(REGISTRATION_HEALTHY, ok, reason, short(message), now, _generation(obj))
        prior = next((c for c in old if c.get("type") == REGISTRATION_HEALTHY), None)
        if prior and prior.get("status") == cond["status"] and prior.get("lastTransitionTime"):
            cond["lastTransitionTime"] = prior["lastTransitionTime"]
        conditions = [c for c in old if c.get("type") != REGISTRATION_HEALTHY] + [cond]
        _patch(kube, group, version, nodepool.PLURAL, name, {"conditions": conditions})
    except ClusterError as err:
        log.debug("Failed to update %s of nodepool %s, %s", REGISTRATION_HEALTHY, name, err)


def _patch(
    kube: client.ApiClient, group: str, version: str, plural: str, name: str, status: dict[str, Any]
) -> None:
    with translated(f"patching status of {plural} {name}"):
        client.CustomObjectsApi(kube).patch_cluster_custom_object_status(
            group, version, plural, name, {"status": status}, _content_type="application/merge-patch+json"
        )


def refresh(kube: client.ApiClient, resolve: Resolve, settings: Settings) -> None:
    """Write the status of every EC2NodeClass and NodePool once."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    group, version = ec2nodeclass.API_VERSION.split("/")
    ready: dict[str, bool] = {}
    for obj in kube_provisioners.list_custom(kube, group, version, ec2nodeclass.PLURAL):
        name = (obj.get("metadata") or {}).get("name", "")
        status, ready[name] = node_class_status(obj, resolve, settings, now)
        status["conditions"] = _keep_times(_conditions(obj), status["conditions"])
        try:
            _patch(kube, group, version, ec2nodeclass.PLURAL, name, status)
        except ClusterError as err:  # status is informational; the next pass writes it
            log.debug("Failed to update status of ec2nodeclass %s, %s", name, err)
    group, version = nodepool.API_VERSION.split("/")
    pools = kube_provisioners.list_custom(kube, group, version, nodepool.PLURAL)
    if not pools:
        return
    nodes = kube_nodes.list_nodes(kube, karpy_only=True)
    usage = inventory.usage(nodes)
    counts: dict[str, int] = {}
    for node in nodes:
        if node.provisioner:
            counts[node.provisioner] = counts.get(node.provisioner, 0) + 1
    for obj in pools:
        name = (obj.get("metadata") or {}).get("name", "")
        status = nodepool_status(obj, ready, usage.get(name) or Resources(), counts.get(name, 0), now)
        status["conditions"] = _keep_times(_conditions(obj), status["conditions"])
        try:
            _patch(kube, group, version, nodepool.PLURAL, name, status)
        except ClusterError as err:
            log.debug("Failed to update status of nodepool %s, %s", name, err)
