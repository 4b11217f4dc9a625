"""Crash recovery at leadership start: adopt launches that have an instance but no Node yet.

A controller killed between CreateFleet and the Node create leaves an instance tagged with its
`karpy.sh/launch-id` and no Node, while its pods are still pending. Launching again for those pods
would duplicate capacity; instead the instance gets its Node now (the same object provisioning
would have written), so the next batch packs the pending pods onto it as an existing node. An
instance that cannot be adopted (its Provisioner or instance type is gone) is left to GC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from extender.api import labels
from extender.api.resources import Resources
from extender.cloud.types import Instance
from extender.cluster.nodes import create_node, list_karpy_nodes
from extender.cluster.provisioners import list_provisioners
from extender.lifecycle import objects
from extender.lifecycle.context import Context


def in_flight(nodes: Sequence[Mapping[str, Any]], instances: Sequence[Instance]) -> list[Instance]:
    """Pure: live instances carrying a launch id that no Node points at."""
    with_nodes = {objects.instance_id(objects.provider_id(n)) for n in nodes}
    return [i for i in instances if i.tags.get(labels.LAUNCH_ID_TAG) and i.id not in with_nodes]


def recover(ctx: Context) -> list[Instance]:
    """Adopt in-flight launches; returns the instances found without a Node."""
    found = in_flight(list_karpy_nodes(ctx.kube), ctx.cloud.list())
    if not found:
        return []
    ctx.log.info("Found %d instance(s) without a node from interrupted launches: %s",
                 len(found), [i.id for i in found])
    adopt = getattr(ctx.provisioning, "adopt_instances", None)
    if adopt is not None:
        adopt(found)
    else:
        _adopt(ctx, found)
    return found


def _adopt(ctx: Context, instances: Sequence[Instance]) -> None:
    # Stopgap until provisioning exposes adopt_instances: build the Node with provisioning's own
    # node_for, from a one-option plan of the type EC2 launched.
    from extender.provisioning.launcher import node_for
    from extender.scheduling.plan import PlannedNode

    provisioners = {p.name: p for p in list_provisioners(ctx.kube, cluster_name=ctx.settings.cluster_name)}
    for instance in instances:
        prov = provisioners.get(instance.tags.get(labels.PROVISIONER_NAME, ""))
        itype = None
        if prov is not None:
            itype = next((t for t in ctx.cloud.get_instance_types(prov) if t.name == instance.instance_type),
                         None)
        if prov is None or itype is None:
            ctx.log.info("Leaving instance %s to garbage collection, its provisioner or type is gone",
                         instance.id)
            continue
        planned = PlannedNode(provisioner=prov.name, options=(itype,), zones=(instance.zone,),
                              capacity_types=(instance.capacity_type,), zone=instance.zone,
                              capacity_type=instance.capacity_type, price=0.0, pods=(), labels={},
                              taints=prov.taints, requests=Resources())
        manifest = node_for(instance, planned, prov)
        create_node(ctx.kube, manifest)
        ctx.log.info("Adopted instance %s of an interrupted launch as node %s", instance.id,
                     manifest["metadata"]["name"])
