"""Which nodes consolidation may touch at all, and why not: every rule says its reason.

Ported from Karpenter's consolidation candidate filtering (pkg/controllers/disruption: `candidates`,
`podsPreventEviction`, the "should not consolidate ..." cases of its suite): do-not-consolidate
nodes, do-not-disrupt nodes and pods (protection.py; do-not-evict pods too), pods whose PDB allows
no eviction, pods without a controller, nodes younger than a minimum age or whose last pod event is
more recent than the NodePool's `consolidateAfter`, and whole Provisioners while pods are pending for
them or a launch is in flight. Each blocker carries a reason (a CamelCase word, for the NodeClaim's
`Consolidatable` condition and the Node's Event) and its message with the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from extender.api import labels as wk
from extender.api.disruption import DO_NOT_DISRUPT
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.lifecycle import budgets, protection
from extender.lifecycle.consolidation.view import ClusterView, NodeState, PdbAllowance, Settings
from extender.scheduling.pool_choice import select_provisioner


@dataclass(frozen=True)
class Blocker:
    """Why consolidation may not take a node: `reason` names the rule (stable across passes, so a
    change of blockers is a change of reasons), `message` says it with its numbers."""

    reason: str
    message: str


def movable(node: NodeState) -> tuple[Pod, ...]:
    """The pods that must find room elsewhere if the node goes (node-bound ones neither move nor block)."""
    return node.movable


def consolidate_after(prov: Provisioner) -> float | None:
    """Seconds a node must have gone without a pod event before consolidation may take it; None =
    never. A NodePool's `consolidateAfter: Never` (None) disables consolidation; a v1alpha5
    Provisioner loads with 0 (it has no such field and waits for nothing)."""
    return None if prov.consolidate_after is None else float(prov.consolidate_after)


def pod_blocker(pod: Pod, pdbs: Sequence[PdbAllowance]) -> Blocker | None:
    if (reason := protection.pod_blocker(pod)) is not None:
        return Blocker("DoNotDisruptPod", reason)
    if not pod.owner_kind:
        return Blocker("PodWithoutController", f"pod {pod.key} has no controller, it would not come back")
    for pdb in pdbs:
        if pdb.disruptions_allowed <= 0 and pdb.covers(pod):
            allowed = pdb.disruptions_allowed
            return Blocker(
                "PodDisruptionBudget",
                f"pdb {pod.namespace}/{pdb.name} prevents pod evictions (it allows {allowed} disruptions)",
            )
    return None


def node_blocker(node: NodeState, view: ClusterView, settings: Settings) -> str | None:
    """Why `node` cannot be consolidated now (the first reason); None when it is a candidate."""
    first = next(node_blockers(node, view, settings), None)
    return None if first is None else first.message


def node_blockers(node: NodeState, view: ClusterView, settings: Settings) -> Iterator[Blocker]:
    """Every reason `node` cannot be consolidated now, with its numbers (`karpy explain node`);
    the first alone decides candidacy, so a pass stops there."""
    provisioner = view.provisioner(node.provisioner)
    if not node.karpy or provisioner is None:
        yield Blocker("NotKarpyNode", "not a karpy node")
        return
    if not provisioner.consolidation:
        yield Blocker(
            "ConsolidationDisabled", f"consolidation is not enabled for {provisioner.noun} {provisioner.name}"
        )
    if node.disrupting:
        yield Blocker("Disrupting", "already being disrupted")
    if not node.ready:
        yield Blocker("NotReady", "not ready")
    if node.do_not_disrupt:
        yield Blocker("DoNotDisrupt", f"node has {DO_NOT_DISRUPT} annotation")
    if node.do_not_consolidate:
        yield Blocker("DoNotConsolidate", f"node has {wk.DO_NOT_CONSOLIDATE_ANNOTATION} annotation")
    if node.age_seconds < settings.min_node_age_seconds:
        least, age = settings.min_node_age_seconds, node.age_seconds
        yield Blocker(
            # Whole seconds rounded apart, so a node 2.6 s old of 3 is not "3s old, younger than 3s".
            "NodeTooYoung",
            f"node is {math.floor(age)}s old, younger than {least:g}s ({math.ceil(least - age)}s left)",
        )
    wait = consolidate_after(provisioner)
    if wait is None:
        yield Blocker(
            "ConsolidateAfterNever", f"consolidateAfter is Never for {provisioner.noun} {provisioner.name}"
        )
    elif wait > 0 and node.idle_seconds is None:
        yield Blocker("ConsolidateAfter", f"no pod event seen on it yet, consolidateAfter is {wait:g}s")
    elif wait > 0 and node.idle_seconds is not None and node.idle_seconds < wait:
        yield Blocker(
            "ConsolidateAfter",
            f"its last pod event was {node.idle_seconds:.0f}s ago, more recent than consolidateAfter"
            f" ({wait:g}s, {wait - node.idle_seconds:.0f}s left)",
        )
    for pod in movable(node):
        if (blocker := pod_blocker(pod, view.pdbs)) is not None:
            yield blocker


def provisioner_blockers(name: str, view: ClusterView, settings: Settings) -> Iterator[Blocker]:
    """Every reason the Provisioner `name` is held back as a whole, with its numbers."""
    if view.batch_in_flight:
        yield Blocker("ProvisioningInFlight", "a provisioning batch is in flight")
    own = [n for n in view.nodes if n.karpy and n.provisioner == name and not n.disrupting]
    launching = [n.name for n in own if not n.ready and n.age_seconds < settings.launch_grace_seconds]
    if launching:
        yield Blocker(
            "NodesLaunching", f"{len(launching)} node(s) still launching ({', '.join(launching[:3])})"
        )
    waiting = [
        pod.key
        for pod in view.pending
        if (chosen := select_provisioner(pod, view.provisioners)) is not None and chosen.name == name
    ]
    if waiting:
        more = f" +{len(waiting) - 3} more" if len(waiting) > 3 else ""
        yield Blocker("PodsPending", f"{len(waiting)} pod(s) pending for it ({', '.join(waiting[:3])}{more})")


def blockers(node: NodeState, view: ClusterView, settings: Settings) -> tuple[Blocker, ...]:
    """Every blocker of one node: its own, its Provisioner's, and its disruption budget's."""
    held, budget = _node_blockers(view, settings, [node])[node.name]
    return (*held, *budget)


@dataclass(frozen=True)
class Assessment:
    """One pass's eligibility, computed once and shared by the decision, the budget log and the
    verdicts (each of them used to filter every node and pod again: 20-50 ms at 1,000 nodes)."""

    #: Node name -> every blocker, for the nodes in play: karpy nodes of pools that consolidate,
    #: not already on their way out (the nodes a verdict is written for).
    blockers: Mapping[str, tuple[Blocker, ...]]
    #: The nodes in play that neither they nor their Provisioner hold back (a budget may still):
    #: most wasteful first (`candidates`).
    candidates: tuple[NodeState, ...]


def assess(view: ClusterView, settings: Settings) -> Assessment:
    """The blockers of every node in play and the candidates among them. A node out of play has a
    blocker that needs no counting (NotKarpyNode, ConsolidationDisabled, Disrupting), so its pods
    are not checked."""
    in_play = [n for n in view.nodes if _in_play(n, view)]
    found = _node_blockers(view, settings, in_play)
    eligible = [n for n in in_play if not found[n.name][0]]
    return Assessment(
        blockers={name: (*held, *budget) for name, (held, budget) in found.items()},
        candidates=tuple(sorted(eligible, key=_waste)),
    )


def _in_play(node: NodeState, view: ClusterView) -> bool:
    prov = view.provisioner(node.provisioner)
    return node.karpy and not node.disrupting and prov is not None and prov.consolidation


def _node_blockers(
    view: ClusterView, settings: Settings, nodes: Iterable[NodeState]
) -> dict[str, tuple[tuple[Blocker, ...], tuple[Blocker, ...]]]:
    """Node name -> (its own and its Provisioner's blockers, its disruption budget's: none or one),
    each Provisioner's and budget's computed once."""
    held: dict[str, list[Blocker]] = {}
    slots: dict[str, dict[str, int]] = {}
    closed: dict[tuple[str, str], Blocker] = {}
    result = {}
    for node in nodes:
        found = [*node_blockers(node, view, settings)]
        budget: tuple[Blocker, ...] = ()
        if node.karpy and view.provisioner(node.provisioner) is not None:
            if node.provisioner not in held:
                held[node.provisioner] = [*provisioner_blockers(node.provisioner, view, settings)]
            found += held[node.provisioner]
            reason = budgets.UNDERUTILIZED if movable(node) else budgets.EMPTY
            if reason not in slots:
                slots[reason] = free_slots(view, reason)
            if slots[reason].get(node.provisioner, 0) <= 0:
                key = (node.provisioner, reason)
                if key not in closed:
                    closed[key] = _budget_blocker(node.provisioner, reason, view)
                budget = (closed[key],)
        result[node.name] = (tuple(found), budget)
    return result


def _budget_blocker(name: str, reason: str, view: ClusterView) -> Blocker:
    prov = view.provisioner(name)
    own = [n for n in view.nodes if n.karpy and n.provisioner == name]
    leaving = sum(1 for n in own if n.disrupting)
    active = ", ".join(
        f"nodes {b.nodes}" + (f" during {b.schedule!r} for {b.duration}s" if b.schedule is not None else "")
        for b in (prov.budgets if prov is not None else ())
        if budgets.applies(b, reason)
    )
    return Blocker(
        "DisruptionBudget",
        f"the disruption budget allows no more {reason} disruptions now ({active or '?'} of {len(own)}"
        f" node(s); {leaving} already being disrupted)",
    )


def free_slots(view: ClusterView, reason: str = budgets.UNDERUTILIZED) -> dict[str, int]:
    """Provisioner -> nodes its disruption budgets for `reason` still let go at the view's time
    (disrupting nodes count as taken, whatever their reason)."""
    result = {}
    for provisioner in view.provisioners:
        own = [n for n in view.nodes if n.karpy and n.provisioner == provisioner.name]
        disrupting = sum(1 for n in own if n.disrupting)
        result[provisioner.name] = budgets.free_by_reason(provisioner, reason, len(own), disrupting, view.now)
    return result


def utilisation(node: NodeState) -> float:
    """The larger of the node's cpu and memory requested / allocatable."""
    alloc, used = node.node.allocatable, node.node.requested
    return max(
        used.cpu / alloc.cpu if alloc.cpu else 0.0, used.memory / alloc.memory if alloc.memory else 0.0
    )


def candidates(view: ClusterView, settings: Settings) -> list[NodeState]:
    """Eligible nodes, most wasteful first: least utilised, then fewest pods to move, then priciest.

    Karpenter orders by disruption cost (pods to evict) alone; karpy puts waste first because
    multi-node consolidation tries prefixes of this order, and the least-used nodes are the ones
    whose pods merge into a cheaper shape (benchmarks/consolidation.py: 3.7 % cheaper over a day
    at the default budget). Every move is still simulated, so the order only steers the search.
    A pass computes them once (`assess`); this is for one-off callers.
    """
    return list(assess(view, settings).candidates)


def _waste(node: NodeState) -> tuple[float, int, float, str]:
    return (round(utilisation(node), 2), len(movable(node)), -node.price, node.name)
