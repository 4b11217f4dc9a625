"""Pure consolidation decisions: which nodes to delete, or replace by cheaper nodes.

Karpenter's methods, in its order: empty nodes (deleted together), multi-node (delete several
nodes whose pods fit on the rest plus at most one cheaper new node; the largest such prefix of the
candidates, found by binary search), single-node (delete one node, or replace it by one cheaper
node). Then what Karpenter's order leaves when the budget is small: deletions further down the
candidates, and merges of the next least-used nodes. Then karpy's own method, for what Karpenter's
moves cannot reach: re-plan a few nodes (their pods onto the rest plus any number of new nodes,
e.g. one node into two cheaper ones). Every move is simulated with the provisioning
solver (`solve` with the remaining nodes as `existing_nodes`), so a decision never counts on a
placement provisioning would not make, and a move that evicts pods must be worth them (`worth`:
the pool's savings threshold, Balanced's score).
Each action carries its $/h before and after; `plan` applies actions to the view one after the
other, within every Provisioner's disruption budget, to list everything karpy would do.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.resources import Resources
from extender.lifecycle import budgets
from extender.lifecycle.consolidation import worth
from extender.lifecycle.consolidation.eligibility import Blocker, candidates, free_slots, movable
from extender.lifecycle.consolidation.view import ClusterView, NodeState, Settings
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.plan import ExistingNode, Plan, PlannedNode
from extender.scheduling.solver import solve

DEFAULTS = Settings()


class Method(Enum):
    EMPTY = "empty"
    MULTI = "multi-node"
    SINGLE = "single-node"
    REPLAN = "re-plan"


@dataclass(frozen=True)
class Action:
    method: Method
    nodes: tuple[NodeState, ...]
    #: The new nodes (none for a deletion; Karpenter's methods launch at most one).
    replacements: tuple[PlannedNode, ...] = ()
    #: Existing node -> pods the simulation moved onto it.
    moved: dict[str, tuple[Pod, ...]] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def price_before(self) -> float:
        return sum(n.price for n in self.nodes)

    @property
    def price_after(self) -> float:
        return sum(n.price for n in self.replacements)

    @property
    def saving(self) -> float:
        return self.price_before - self.price_after

    @property
    def pods(self) -> tuple[Pod, ...]:
        return tuple(p for n in self.nodes for p in movable(n))

    def same_as(self, other: Action) -> bool:
        """The decision survived validation: the same nodes, replaced by the same kinds of node."""

        def target(action: Action) -> list[str]:
            return sorted(n.instance_type.name for n in action.replacements)

        return set(self.names) == set(other.names) and target(self) == target(other)

    def describe(self) -> str:
        """Karpenter's voice, with the saving (the log line and the Event message), e.g.
        "Consolidating 3 node(s) into 1 c6a.2xlarge, $0.612/h → $0.306/h [a b c]"."""
        prices = f"${self.price_before:.3f}/h → ${self.price_after:.3f}/h"
        names = " ".join(self.names)
        if not self.replacements:
            what = "empty " if self.method is Method.EMPTY else ""
            return f"Consolidating {len(self.nodes)} {what}node(s) by deletion, {prices} [{names}]"
        targets = [
            n.instance_type.name + (" (spot)" if n.capacity_type == wk.CAPACITY_TYPE_SPOT else "")
            for n in self.replacements
        ]
        into = f"1 {targets[0]}" if len(targets) == 1 else f"{len(targets)} node(s): {', '.join(targets)}"
        return f"Consolidating {len(self.nodes)} node(s) into {into}, {prices} [{names}]"


def decide(
    view: ClusterView,
    settings: Settings = DEFAULTS,
    eligible: Sequence[NodeState] | None = None,
    judged: dict[str, Blocker | None] | None = None,
) -> Action | None:
    """The first action found, within the disruption budgets; None if none: empty nodes, then
    Karpenter's methods, then karpy's re-plans. `eligible`: the pass's candidates, when it has
    them (`eligibility.assess`). `judged`, when given, gets each node whose single-node move this
    pass simulated: why that move is not worth its evictions (`worth`), or None (no solve more)."""
    pool = candidates(view, settings) if eligible is None else eligible
    if not pool:
        return None
    # Karpenter's budgets by reason: deleting empty nodes is "Empty", every other move "Underutilized".
    empty = _within_budget([n for n in pool if not movable(n)], free_slots(view, budgets.EMPTY))
    if empty:
        return Action(Method.EMPTY, tuple(empty))
    slots = free_slots(view, budgets.UNDERUTILIZED)
    if (action := _karpenter_methods(view, pool, slots, settings, judged)) is not None:
        return action
    # Where Karpenter's moves find nothing, re-plans; of those, the one saving the most $/h per
    # node disrupted (a budget slot, a drain and evicted pods each). Weighing Karpenter's moves
    # against re-plans the same way was dearer over the benchmark's day (default budget: $73.53,
    # re-plans only after Karpenter's moves: $73.13): a re-plan launches and holds the Provisioner
    # while the merges it displaced wait.
    replans = _replans(view, pool, slots, settings)
    return max(replans, key=lambda a: (a.saving / len(a.nodes), -len(a.replacements)), default=None)


def decide_karpenter(view: ClusterView, settings: Settings = DEFAULTS) -> Action | None:
    """Karpenter's moves only, for comparison (benchmarks.consolidation): empty nodes, multi-node
    over the candidates its budget covers, then single-node delete or replace over the same; none
    of karpy's extensions (deletions further down, merge windows, re-plans). Candidates keep karpy's
    order (Karpenter orders by disruption cost)."""
    pool = candidates(view, settings)
    empty = _within_budget([n for n in pool if not movable(n)], free_slots(view, budgets.EMPTY))
    if empty:
        return Action(Method.EMPTY, tuple(empty))
    busy = _within_budget(pool, free_slots(view, budgets.UNDERUTILIZED))[: settings.max_multi_node_candidates]
    if len(busy) >= 2 and (action := _multi_node(view, busy, settings)) is not None:
        return action
    return next((a for n in busy if (a := _simulate(view, (n,), Method.SINGLE, settings)) is not None), None)


def _karpenter_methods(
    view: ClusterView,
    pool: Sequence[NodeState],
    slots: dict[str, int],
    settings: Settings,
    judged: dict[str, Blocker | None] | None,
) -> Action | None:
    """The first action Karpenter's methods (multi-node, then single-node) find, as karpy orders
    and extends them."""
    busy = _within_budget(pool, slots)[: settings.max_multi_node_candidates]
    if len(busy) >= 2 and (action := _multi_node(view, busy, settings, whole_first=True)) is not None:
        return action
    # Single-node replaces only the budget-many least-used candidates. Karpenter's tries every one
    # with a slot left; here that replaced snug nodes by snugger ones for cents, each launch holding
    # the worker, a slot and the Provisioner (a node is launching) while merges waited:
    # benchmarks.consolidation at the default budget, +19.7 % over the bound instead of +13.0 %.
    for node in busy:
        if (action := _single(view, node, settings, judged)) is not None:
            return action
    # Past them, what costs no launch: a node whose pods fit on the rest (Karpenter's single-node
    # would find it too), then merges of the next least-used nodes (+13.0 % -> +11.4 % above).
    chosen = {n.name for n in busy}
    for node in (n for n in pool if n.name not in chosen and slots.get(n.provisioner, 0) > 0):
        if (action := _single(view, node, settings, judged, replace=False)) is not None:
            return action
    for start in range(1, settings.merge_windows + 1):
        window = _within_budget(pool[start:], slots)[: settings.max_multi_node_candidates]
        if len(window) < 2 or len(window) < len(busy):
            break
        if (action := _multi_node(view, window, settings, whole_first=True)) is not None:
            return action
    return None


def plan(view: ClusterView, settings: Settings = DEFAULTS, limit: int = 100) -> list[Action]:
    """Every action karpy would take one after another (each applied before the next is sought)."""
    actions: list[Action] = []
    while len(actions) < limit and (action := decide(view, settings)) is not None:
        actions.append(action)
        view = apply(view, action)
    return actions


def _replans(
    view: ClusterView, pool: Sequence[NodeState], slots: dict[str, int], settings: Settings
) -> list[Action]:
    """Re-plan a set of nodes: their pods onto the other nodes plus any number of new nodes (the
    solver with its local search), e.g. one node into two cheaper ones, or two into two. Sets are
    drawn from the least-used candidates, smallest first, within the budget and a simulation cap."""
    # Not only the budget-many least-used: with a slot or two, those alone were tried, and the
    # cluster sat for most of the day where no move of theirs saved anything while a busier
    # node's would (benchmarks.consolidation, seeds 1-5: +10.0 % over the bound -> +8.2 %).
    firsts = [n for n in pool if slots.get(n.provisioner, 0) > 0][: settings.replan_candidates]
    found: list[Action] = []
    simulations = 0
    for size in range(1, settings.replan_max_nodes + 1):
        for subset in itertools.combinations(firsts, size):
            if len(_within_budget(subset, slots)) < size:
                continue
            if simulations >= settings.replan_max_simulations:
                return found
            simulations += 1
            if (action := _replan(view, subset, settings)) is not None:
                found.append(action)
    return found


def _replan(view: ClusterView, nodes: tuple[NodeState, ...], settings: Settings) -> Action | None:
    """The re-plan of `nodes` if it is worth its evictions (`worth`); None otherwise."""
    result = simulate_removal(view, nodes)
    if result.unschedulable:
        return None
    before = sum(n.price for n in nodes)
    if worth.refusal(view, nodes, before - sum(n.price for n in result.nodes)) is not None:
        return None
    new = result.nodes
    if all(n.capacity_type == wk.CAPACITY_TYPE_SPOT for n in nodes) and any(
        n.capacity_type == wk.CAPACITY_TYPE_SPOT for n in new
    ):
        # Karpenter's spot-to-spot flexibility rule is for one new node; for several karpy
        # does not chase spot pools at all.
        if len(new) != 1 or (one := _cheaper(new[0], nodes, settings)) is None:
            return None
        new = (one,)
    moved = {name: pods for name, pods in result.existing.items() if pods}
    return Action(Method.REPLAN, nodes, tuple(new), moved)


def _within_budget(nodes: Sequence[NodeState], slots: dict[str, int]) -> list[NodeState]:
    """The longest run of `nodes`, in order, that every Provisioner's free slots cover."""
    left = dict(slots)
    chosen = []
    for node in nodes:
        if left.get(node.provisioner, 0) > 0:
            left[node.provisioner] -= 1
            chosen.append(node)
    return chosen


def _multi_node(
    view: ClusterView, pool: Sequence[NodeState], settings: Settings, *, whole_first: bool = False
) -> Action | None:
    """Karpenter's firstNConsolidationOption: binary search for the largest valid prefix (>= 2).
    `whole_first` (karpy): the whole pool is tried first. Where a prefix is valid whenever a longer
    one is, the search ends there anyway, after about log2(len) solves instead of one
    (benchmarks.consolidation's 1,000-node cluster: 7 solves per decision for its first 6 actions)."""
    lo, hi = 2, len(pool)
    if whole_first and hi >= lo:
        if (whole := _simulate(view, tuple(pool), Method.MULTI, settings)) is not None:
            return whole
        hi -= 1
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        action = _simulate(view, tuple(pool[:mid]), Method.MULTI, settings)
        if action is not None:
            best, lo = action, mid + 1
        else:
            hi = mid - 1
    return best


def simulate_removal(
    view: ClusterView, gone: Sequence[NodeState], *, search_budget: int | None = None
) -> Plan:
    """Where the pods of `gone` would go if those nodes disappeared (the solver, as provisioning
    would plan them: existing karpy nodes first, then new nodes)."""
    leaving = {n.name for n in gone}
    pods = [p for n in gone for p in movable(n)]
    if pods and view.bins_only and not any(_ruled(p) for p in pods):
        existing = _with_room(view, leaving, pods)
    else:
        existing = [n.node for n in view.nodes if n.node.name not in leaving]
    return solve(
        pods,
        view.provisioners,
        view.instance_types,
        daemonsets=view.daemonsets,
        existing_nodes=existing,
        unavailable=view.unavailable,
        with_bound=False,
        namespaces=view.namespaces,
        search_budget=search_budget,
    )


def _ruled(pod: Pod) -> bool:
    """The pod has a rule that counts other pods or nodes (spread, inter-pod affinity, host
    ports) or a volume: existing nodes matter to it beyond their room."""
    return bool(
        pod.counts_pods
        or pod.preferred_pod_affinity
        or pod.preferred_pod_anti_affinity
        or pod.host_ports
        or pod.volume_terms
        or pod.claims
        or pod.csi_claims
    )


def _with_room(view: ClusterView, leaving: set[str], pods: Sequence[Pod]) -> list[ExistingNode]:
    """The nodes staying (not in `leaving`) that could take one of `pods`. When neither they nor
    any running pod has a rule counting pods (`_ruled`, `ClusterView.bins_only`), an existing node
    is a bin only: a cordoned one, or one without the smallest pod's cpu or memory free, takes no
    pod and changes no placement, and the solver need not load it. After a few merges most nodes of
    a large cluster are full (benchmarks.consolidation's 1,000-node cluster: 144 of 531 nodes with
    room at its 7th action, 4 of 481 at its 10th), and loading every node was most of each solve."""
    # Less the packer's tolerance (fill.room_for), so a node the solver would fill is never left out.
    cpu, memory = min(p.requests.cpu for p in pods) - 1e-9, min(p.requests.memory for p in pods) - 1e-9
    return [
        node
        for node, free_cpu, free_memory in view.rooms
        if free_cpu >= cpu and free_memory >= memory and node.name not in leaving
    ]


def single_node_move(view: ClusterView, node: NodeState, settings: Settings = DEFAULTS) -> Action | None:
    """Karpenter's single-node move for `node` alone (delete it, or replace it by one cheaper node)
    whether or not it is a candidate or worth it (`karpy explain node` judges it apart)."""
    return _simulate(view, (node,), Method.SINGLE, settings, gated=False)


def _single(
    view: ClusterView,
    node: NodeState,
    settings: Settings,
    judged: dict[str, Blocker | None] | None,
    *,
    replace: bool = True,
) -> Action | None:
    """The single-node move of `node` if worth its evictions, as `_simulate` gated finds it; the
    judgement goes to `judged` (the node's verdict names a saving below the threshold)."""
    action = _simulate(view, (node,), Method.SINGLE, settings, replace=replace, gated=False)
    refused = _refused(view, action) if action is not None else None
    if judged is not None:
        judged[node.name] = refused
    return None if refused is not None else action


def _simulate(
    view: ClusterView,
    nodes: tuple[NodeState, ...],
    method: Method,
    settings: Settings,
    *,
    replace: bool = True,
    gated: bool = True,
) -> Action | None:
    """The action removing `nodes`, or None; `replace=False`: a deletion or nothing; `gated`: only
    if worth its evictions (`worth`)."""
    # A replacement is one node (Karpenter's rule). The local search can only split the greedy's
    # one node (priced already at the cheapest type that holds it) or find no node where the greedy
    # found none: ask for the greedy alone, in one solve (benchmarks.consolidation, 12 h: 1029
    # simulations, the same outcome in all, 109 fewer second solves).
    result = simulate_removal(view, nodes, search_budget=0)
    if result.unschedulable or len(result.nodes) > (1 if replace else 0):
        return None
    moved = {name: pods for name, pods in result.existing.items() if pods}
    replacements: tuple[PlannedNode, ...] = ()
    if result.nodes:
        if (replacement := _cheaper(result.nodes[0], nodes, settings)) is None:
            return None
        replacements = (replacement,)
    action = Action(method, nodes, replacements, moved)
    return None if gated and _refused(view, action) is not None else action


def _refused(view: ClusterView, action: Action) -> Blocker | None:
    """Why `action` is not worth its evictions (`worth`); None when it is or evicts nothing."""
    return worth.blocker(view, action.nodes, action.saving) if action.pods else None


def offering_price(it: InstanceType, capacity_type: str, zones: Sequence[str]) -> float | None:
    prices = [
        o.price for o in it.offerings if o.available and o.capacity_type == capacity_type and o.zone in zones
    ]
    return min(prices) if prices else None


def _cheaper(new: PlannedNode, nodes: Sequence[NodeState], settings: Settings) -> PlannedNode | None:
    """The replacement restricted to options cheaper than what it replaces; None if it saves nothing.

    Spot-to-spot (every node spot, replacement spot) for a single node also needs at least
    `min_spot_to_spot_options` cheaper spot types (Karpenter's computeSpotToSpotConsolidation), so
    consolidation does not chase the cheapest, most interrupted pool; multi-node needs no more.
    """
    before = sum(n.price for n in nodes)
    if new.price >= before:
        return None
    all_spot = all(n.capacity_type == wk.CAPACITY_TYPE_SPOT for n in nodes)
    if not (all_spot and new.capacity_type == wk.CAPACITY_TYPE_SPOT):
        return new
    cheaper = tuple(
        t
        for t in new.options
        if (price := offering_price(t, wk.CAPACITY_TYPE_SPOT, new.zones)) is not None and price < before
    )
    if len(nodes) == 1 and len(cheaper) < settings.min_spot_to_spot_options:
        return None
    return dataclasses.replace(new, options=cheaper, capacity_types=(wk.CAPACITY_TYPE_SPOT,))


def apply(view: ClusterView, action: Action) -> ClusterView:
    """The view after `action`: its nodes disrupting and emptied, moved pods on their new nodes,
    the replacement a fresh (too young to consolidate) node."""
    gone = set(action.names)
    nodes = []
    for state in view.nodes:
        if state.name in gone:
            nodes.append(
                dataclasses.replace(
                    state,
                    disrupting=True,
                    node=dataclasses.replace(
                        state.node, pods=(), requested=Resources(), pod_count=0, schedulable=False
                    ),
                )
            )
        elif (arrived := action.moved.get(state.name)) is not None:
            nodes.append(dataclasses.replace(state, node=_with_pods(state.node, arrived)))
        else:
            nodes.append(state)
    for planned in action.replacements:
        nodes.append(replacement_state(planned, view.daemonsets, f"replacement-{len(nodes)}"))
    return dataclasses.replace(view, nodes=tuple(nodes))


def _with_pods(node: ExistingNode, pods: Sequence[Pod]) -> ExistingNode:
    requested = node.requested
    for pod in pods:
        requested = requested + pod.requests
    return dataclasses.replace(
        node, pods=(*node.pods, *pods), requested=requested, pod_count=node.pod_count + len(pods)
    )


def replacement_state(
    planned: PlannedNode, daemonsets: Sequence[Pod], name: str, age_seconds: float = 0.0
) -> NodeState:
    """A launched PlannedNode as a NodeState (its daemons' requests counted, as they land on it)."""
    it = planned.instance_type
    base = ExistingNode(
        name=name,
        provisioner=planned.provisioner,
        instance_type=it.name,
        labels={**planned.node_labels(), wk.HOSTNAME: name},
        taints=planned.taints,
        allocatable=it.allocatable,
        requested=Resources(),
        pod_count=0,
    )
    node = _with_pods(base, [*daemonsets, *planned.pods])
    return NodeState(
        node=node, price=planned.price, capacity_type=planned.capacity_type, age_seconds=age_seconds
    )
