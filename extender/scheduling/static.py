"""The node a static NodePool launches for each replica it is short of: no pods, only the pool.

Karpenter's static provisioning controller (kubernetes-sigs/karpenter pkg/controllers/static/
provisioning, `GetStaticNodeClaimsToProvision`) builds each NodeClaim from the NodePool's template
alone, with every instance type its requirements allow, and the cloud provider launches the
cheapest offering. Here: the pool's compatible types (its requirements, kubelet settings and
DaemonSet overhead, offerings EC2 refused lately left out), cheapest first, as one PlannedNode
without pods. Accelerator types count too: a static pool asks for nodes, not for a pod's devices.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.resources import CPU, MEMORY, PODS, Resources
from extender.scheduling.candidates import MAX_OPTIONS, CandidateCache, ProvisionerView
from extender.scheduling.instancetypes import InstanceType, OfferingKey
from extender.scheduling.plan import PlannedNode

DIMENSIONS = (CPU, MEMORY, PODS)


def static_node(
    pool: Provisioner,
    instance_types: Sequence[InstanceType],
    *,
    daemonsets: Sequence[Pod] = (),
    unavailable: Collection[OfferingKey] = frozenset(),
    max_options: int = MAX_OPTIONS,
) -> PlannedNode | None:
    """The launch of one of `pool`'s nodes, or None when no instance type its requirements allow
    has an offering left."""
    view = ProvisionerView.build(pool, instance_types, daemonsets, DIMENSIONS)
    cache = CandidateCache(unavailable, max_options)
    reqs = view.requirements
    found = {
        c.entry.type.name: c
        for kinds in view.accelerator_kinds
        for c in cache.lookup(view, reqs, kinds).candidates
    }
    # Priced types before estimated ones, as the solver ranks them (candidates.py).
    ranked = sorted(found.values(), key=lambda c: (c.estimated, c.offering.price, c.entry.type.name))
    options = ranked[:max_options]
    if not options:
        return None
    cheapest = options[0].offering
    offerings = [o for c in options for o in c.entry.type.offerings if o.available]
    zones = sorted({o.zone for o in offerings if reqs.allows(wk.ZONE, o.zone)})
    kinds = sorted({o.capacity_type for o in offerings if reqs.allows(wk.CAPACITY_TYPE, o.capacity_type)})
    return PlannedNode(
        provisioner=pool.name,
        options=tuple(c.entry.type for c in options),
        zones=tuple(zones),
        capacity_types=tuple(kinds),
        zone=cheapest.zone,
        capacity_type=cheapest.capacity_type,
        price=cheapest.price,
        pods=(),
        labels={**pool.labels, pool.owner_label: pool.name, **reqs.single_values()},
        taints=tuple(pool.taints),
        requests=Resources(),
    )
