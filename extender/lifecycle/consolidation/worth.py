"""Whether a consolidation move is worth the pods it evicts: the pools' savings threshold, and
`consolidationPolicy: Balanced`'s score.

Every move that evicts pods (delete, replace, multi-node, re-plan) must save at least each source
pool's `karpy.sh/consolidation-min-savings` (default $0.02/h and 5 % of the removed nodes' price).
Deleting empty nodes evicts nothing and is not gated (Karpenter's emptiness is not scored either).

Balanced is Karpenter's (kubernetes-sigs/karpenter designs/balanced-consolidation.md and
pkg/controllers/disruption/balanced.go, v1.14): a move's score is the share of its pool's cost it
saves over the share of its pool's disruption cost it causes; it is approved when the score is at
least 1/k. A pod's disruption cost is `EvictionCost` (1 + pod-deletion-cost / 2^27, clamped to
[-10, 10], negatives counted as 0); a node's is 1 plus its pods'. A move spanning pools is scored
per Balanced source pool, with the savings split by the pools' share of the removed price; every
one must approve.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from extender.api.pod import Pod
from extender.lifecycle.consolidation.eligibility import Blocker, movable
from extender.lifecycle.consolidation.view import ClusterView, NodeState

#: The annotation Kubernetes' ReplicaSet controller ranks scale-down victims by; Karpenter's
#: EvictionCost reads it too.
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def eviction_cost(pod: Pod) -> float:
    """Karpenter's `disruption.EvictionCost` (pkg/utils/disruption): 1, plus the pod's deletion
    cost / 2^27, clamped to [-10, 10]; an unparsable deletion cost is ignored, as Karpenter logs and
    skips it. (Karpenter adds spec.priority / 2^25; karpy's Pod does not carry the numeric priority.)"""
    cost = 1.0
    if (text := pod.annotations.get(POD_DELETION_COST)) is not None:
        try:
            value = float(text)
        except ValueError:
            value = 0.0
        if math.isfinite(value):
            cost += value / 2**27
    return min(10.0, max(-10.0, cost))


def node_disruption_cost(node: NodeState) -> float:
    """balanced.go: a per-node base of 1 plus max(0, EvictionCost) of each pod it would evict."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in movable(node))


@dataclass(frozen=True)
class Score:
    pool: str
    savings_fraction: float
    disruption_fraction: float
    k: int

    @property
    def value(self) -> float:
        if self.disruption_fraction <= 0:
            return math.inf
        return self.savings_fraction / self.disruption_fraction

    @property
    def approved(self) -> bool:
        return self.savings_fraction > 0 and self.value >= 1 / self.k

    def __str__(self) -> str:
        verb = ">=" if self.approved else "<"
        return (
            f"score {self.value:.2f} {verb} threshold {1 / self.k:.2f} (consolidationThreshold: {self.k},"
            f" savings {self.savings_fraction * 100:.1f}%, disruption {self.disruption_fraction * 100:.1f}%)"
        )


def balanced_scores(view: ClusterView, nodes: Sequence[NodeState], saving: float) -> list[Score]:
    """The score of a move removing `nodes` and saving `saving` $/h, for each Balanced source pool.
    Pool totals are over the pool's nodes not already leaving (balanced.go computes them over all
    candidates before filtering)."""
    by_pool: dict[str, list[NodeState]] = defaultdict(list)
    for node in nodes:
        by_pool[node.provisioner].append(node)
    removed = sum(n.price for n in nodes)
    scores = []
    for name, members in by_pool.items():
        prov = view.provisioner(name)
        if prov is None or prov.consolidation_threshold is None:
            continue
        own = [n for n in view.nodes if n.karpy and n.provisioner == name and not n.disrupting]
        total_cost = sum(n.price for n in own)
        total_disruption = sum(node_disruption_cost(n) for n in own)
        share = saving
        if len(by_pool) > 1 and removed > 0:
            share = saving * sum(n.price for n in members) / removed
        disruption = sum(node_disruption_cost(n) for n in members)
        scores.append(
            Score(
                pool=name,
                savings_fraction=share / total_cost if total_cost > 0 else 0.0,
                disruption_fraction=disruption / total_disruption if total_disruption > 0 else 0.0,
                k=prov.consolidation_threshold,
            )
        )
    return scores


#: Blocker reasons of a move not worth its evictions (the verdict names them, verdict.py).
BELOW_THRESHOLD = "SavingBelowThreshold"
BALANCED_SCORE = "BalancedScoreTooLow"


def refusal(view: ClusterView, nodes: Sequence[NodeState], saving: float) -> str | None:
    """Why a move removing `nodes` (which evicts pods) and saving `saving` $/h is not worth it; None
    when it is."""
    found = blocker(view, nodes, saving)
    return None if found is None else found.message


def blocker(view: ClusterView, nodes: Sequence[NodeState], saving: float) -> Blocker | None:
    """`refusal` with its reason: the savings threshold first, then Balanced's score."""
    before = sum(n.price for n in nodes)
    for name in sorted({n.provisioner for n in nodes}):
        prov = view.provisioner(name)
        if prov is None:
            continue
        threshold = prov.consolidation_min_savings
        if saving < threshold.required(before) - 1e-12:
            return Blocker(
                BELOW_THRESHOLD,
                f"saving ${saving:.3f}/h is below {prov.noun} {name}'s consolidation-min-savings"
                f" ({threshold}: ${threshold.required(before):.3f}/h here)",
            )
    for score in balanced_scores(view, nodes, saving):
        if not score.approved:
            return Blocker(BALANCED_SCORE, f"Balanced {score.pool}: {score}")
    return None
