"""Pod (anti-)affinity and topology spread among the pods of one batch.

Zone-level constraints are resolved before packing by pinning pods to zones (as Karpenter
injects a zone nodeSelector): spread picks the least-used eligible zone, self anti-affinity
gives each pod its own zone, affinity puts a group in one zone. Hostname-level constraints
become per-node caps that the packer checks (`Terms`). Existing cluster pods are not counted:
only the batch is known to the pure core.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from extender.api.pod import HOSTNAME_KEY, ZONE_KEY, LabelSelector, Pod

Eligible = Callable[[Pod], Sequence[str]]


@dataclass(frozen=True)
class Term:
    """A label selector scoped to namespaces: which pods a constraint counts."""

    namespaces: tuple[str, ...]
    selector: LabelSelector

    def selects(self, pod: Pod) -> bool:
        return pod.namespace in self.namespaces and self.selector.matches(pod.labels)


def term_of(pod: Pod, selector: LabelSelector, namespaces: Sequence[str] = ()) -> Term:
    return Term(tuple(sorted(namespaces or (pod.namespace,))), selector)


class Terms:
    """Interns hostname-level terms so the packer deals in small integers."""

    def __init__(self) -> None:
        self.ids: dict[Term, int] = {}

    def id(self, term: Term) -> int:
        return self.ids.setdefault(term, len(self.ids))

    def matching(self, pod: Pod) -> tuple[int, ...]:
        return tuple(i for term, i in self.ids.items() if term.selects(pod))


@dataclass(frozen=True)
class HostConstraints:
    anti: tuple[int, ...] = ()
    affinity: tuple[int, ...] = ()
    #: (term id, max skew): at most max_skew matching pods per node.
    spread: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, pod: Pod, terms: Terms) -> HostConstraints:
        return cls(
            anti=tuple(
                terms.id(term_of(pod, t.selector, t.namespaces))
                for t in pod.pod_anti_affinity
                if t.topology_key == HOSTNAME_KEY
            ),
            affinity=tuple(
                terms.id(term_of(pod, t.selector, t.namespaces))
                for t in pod.pod_affinity
                if t.topology_key == HOSTNAME_KEY
            ),
            spread=tuple(
                (terms.id(term_of(pod, s.selector)), s.max_skew)
                for s in pod.topology_spread
                if s.topology_key == HOSTNAME_KEY
            ),
        )


def pin_zones(pods: Sequence[Pod], eligible: Eligible) -> tuple[dict[str, str], dict[str, str]]:
    """pod key -> zone for zone-constrained pods, and pod key -> reason for pods that cannot be placed."""
    pins: dict[str, str] = {}
    failed: dict[str, str] = {}

    def allowed(pod: Pod) -> list[str]:
        zones = list(eligible(pod))
        return [pins[pod.key]] if pod.key in pins and pins[pod.key] in zones else zones

    # Anti-affinity: a carrier avoids the zones of pods its term selects, and they avoid it.
    for term, carriers in _carriers(pods, lambda p: p.pod_anti_affinity).items():
        selected = [p for p in pods if term.selects(p)]
        used_by_carriers: set[str] = set()
        used_by_selected: set[str] = set()
        carrier_keys = {p.key for p in carriers}
        for pod in {p.key: p for p in [*carriers, *selected]}.values():
            is_carrier, is_selected = pod.key in carrier_keys, term.selects(pod)
            forbidden = (used_by_selected if is_carrier else set()) | (
                used_by_carriers if is_selected else set()
            )
            zones = [z for z in allowed(pod) if z not in forbidden]
            if not zones:
                failed[pod.key] = "pod anti-affinity on topology.kubernetes.io/zone leaves no zone"
                continue
            pins[pod.key] = zones[0]
            if is_carrier:
                used_by_carriers.add(zones[0])
            if is_selected:
                used_by_selected.add(zones[0])
    # Affinity: carriers and the pods they select share one zone.
    for term, carriers in _carriers(pods, lambda p: p.pod_affinity).items():
        group = list({p.key: p for p in [*[p for p in pods if term.selects(p)], *carriers]}.values())
        if not any(term.selects(p) for p in group):
            for pod in carriers:
                failed[pod.key] = "pod affinity on topology.kubernetes.io/zone: no pod in the batch matches"
            continue
        common = set(allowed(group[0]))
        for pod in group[1:]:
            common &= set(allowed(pod))
        if not common:
            for pod in carriers:
                failed[pod.key] = "pod affinity on topology.kubernetes.io/zone: no zone suits the whole group"
            continue
        zone = min(common)
        for pod in group:
            pins[pod.key] = zone
    # Spread: each pod goes to the least-used of its eligible zones (DoNotSchedule and ScheduleAnyway alike).
    groups: dict[tuple[Term, int], list[Pod]] = defaultdict(list)
    for pod in pods:
        for spread in pod.topology_spread:
            if spread.topology_key == ZONE_KEY:
                groups[(term_of(pod, spread.selector), spread.max_skew)].append(pod)
    for (_, _skew), members in groups.items():
        counts: dict[str, int] = defaultdict(int)
        for pod in members:
            zones = allowed(pod)
            if not zones:
                failed[pod.key] = "topology spread on topology.kubernetes.io/zone: no eligible zone"
                continue
            zone = min(zones, key=lambda z: (counts[z], z))
            counts[zone] += 1
            pins[pod.key] = zone
    return pins, failed


def _carriers(pods: Sequence[Pod], terms_of: Callable[[Pod], Sequence]) -> dict[Term, list[Pod]]:
    result: dict[Term, list[Pod]] = defaultdict(list)
    for pod in pods:
        for term in terms_of(pod):
            if term.topology_key == ZONE_KEY:
                result[term_of(pod, term.selector, term.namespaces)].append(pod)
    return result
