"""Plan: the pure solver over what `gather` read, less the offerings the cloud refused lately.

A batch packs onto karpy's live and in-flight nodes first. Replacements for a node about to be
drained go on new nodes only: every existing node then counts for topology alone, without the
pods that are leaving.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.cluster.inventory import Inventory
from extender.provisioning.gather import Context
from extender.provisioning.unplannable import Unplannable
from extender.scheduling.explain import World
from extender.scheduling.instancetypes import OfferingKey
from extender.scheduling.plan import ExistingNode, Plan
from extender.scheduling.solver import solve


def plan(
    pods: Sequence[Pod],
    ctx: Context,
    inv: Inventory,
    unavailable: Collection[OfferingKey],
    *,
    onto_existing: bool,
    unplannable: Unplannable | None = None,
) -> Plan:
    """`unplannable`: pools the solver raises on are left out (unplannable.py)."""
    existing = inv.existing if onto_existing else topology_only(inv.existing, {p.key for p in pods})

    def run(provisioners: list[Provisioner]) -> Plan:
        return solve(
            list(pods),
            provisioners,
            ctx.catalog,
            daemonsets=ctx.daemonsets,
            existing_nodes=existing,
            unavailable=frozenset(unavailable),
            usage=inv.usage,
            # The bound is for `karpy plan` and the benchmarks; a batch is pending pods waiting.
            with_bound=False,
            namespaces=inv.namespaces,
        )

    pools = list(ctx.provisioners.values())
    return run(pools) if unplannable is None else unplannable.solve(pools, run)


def world(
    ctx: Context, inv: Inventory, unavailable: Collection[OfferingKey], pools: Sequence[Provisioner]
) -> World:
    """What a batch planned against, for explaining the pods it could not place (explain.py)."""
    return World(
        pools,
        ctx.catalog,
        daemonsets=ctx.daemonsets,
        existing_nodes=inv.existing,
        usage=inv.usage,
        namespaces=inv.namespaces,
        unavailable=frozenset(unavailable),
    )


def topology_only(nodes: Sequence[ExistingNode], leaving: set[str]) -> list[ExistingNode]:
    """Every node only counts for topology, without the leaving pods (they are about to be evicted)."""
    return [
        dataclasses.replace(n, schedulable=False, pods=tuple(p for p in n.pods if p.key not in leaving))
        for n in nodes
    ]
