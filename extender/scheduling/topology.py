"""Which pods a topology rule counts, and the hostname-level rules the packer checks per node.

A `Term` is a label selector over pods in a set of namespaces: kube-scheduler's counting unit for
topology spread (the pod's own namespace) and pod (anti-)affinity (`namespaces` plus
`namespaceSelector`). Rules on `kubernetes.io/hostname` become per-node caps in the packer: every
new node is a domain of its own, so they need no domain choice. Rules on any other key are
resolved to node requirements before packing (`domains.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from extender.api.affinity import LabelSelector, PodAffinityTerm, selects
from extender.api.labels import HOSTNAME
from extender.api.pod import Pod

NamespaceLabels = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class Term:
    """A label selector scoped to namespaces (None = every namespace): which pods a rule counts."""

    selector: LabelSelector | None
    namespaces: frozenset[str] | None

    def selects(self, pod: Pod) -> bool:
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return selects(self.selector, pod.labels)


@dataclass(frozen=True)
class AllOf:
    """Pods matching every one of the terms: kube-scheduler's required pod affinity counts a pod
    for its terms only when it matches all of them (InterPodAffinity, podMatchesAllAffinityTerms)."""

    terms: tuple[Term, ...]

    def selects(self, pod: Pod) -> bool:
        return all(t.selects(pod) for t in self.terms)


def spread_term(pod: Pod, selector: LabelSelector | None) -> Term:
    return Term(selector, frozenset({pod.namespace}))


def affinity_term(pod: Pod, term: PodAffinityTerm, namespace_labels: NamespaceLabels | None) -> Term:
    """kube-scheduler: `namespaces` plus namespaces matching `namespaceSelector`; neither = the pod's own;
    an empty namespaceSelector = all namespaces."""
    if term.namespace_selector is not None and term.namespace_selector.empty:
        return Term(term.selector, None)
    names = set(term.namespaces)
    if term.namespace_selector is not None:
        names |= {
            ns for ns, labels in (namespace_labels or {}).items() if term.namespace_selector.matches(labels)
        }
    elif not names:
        names = {pod.namespace}
    return Term(term.selector, frozenset(names))


def needs_namespace_labels(pod: Pod) -> bool:
    terms = (
        *pod.pod_affinity,
        *pod.pod_anti_affinity,
        *(w.term for w in pod.preferred_pod_affinity),
        *(w.term for w in pod.preferred_pod_anti_affinity),
    )
    return any(t.needs_namespace_labels for t in terms)


class Terms:
    """Interns hostname-level terms so the packer deals in small integers."""

    def __init__(self) -> None:
        self.ids: dict[Term | AllOf, int] = {}

    def id(self, term: Term | AllOf) -> int:
        return self.ids.setdefault(term, len(self.ids))

    def matching(self, pod: Pod) -> tuple[int, ...]:
        return tuple(i for term, i in self.ids.items() if term.selects(pod))


@dataclass(frozen=True)
class HostConstraints:
    """A pod's rules on kubernetes.io/hostname as term ids.

    `anti`/`affinity`/`spread` are required (and preferences not yet relaxed, which the packer
    treats as required until a pod cannot be placed); `soft` lists the preferred ones among them.
    Only required anti-affinity repels other pods (kube-scheduler's symmetry covers required terms).
    """

    anti: tuple[int, ...] = ()
    affinity: tuple[int, ...] = ()
    #: (term id, max skew): at most max_skew matching pods per node (the minimum over nodes is 0,
    #: as a new node is always a possible domain).
    spread: tuple[tuple[int, int], ...] = ()
    #: Required anti-affinity terms: other pods matching them may not join this pod's node.
    repels: tuple[int, ...] = ()
    soft: bool = False

    @classmethod
    def of(
        cls, pod: Pod, terms: Terms, namespace_labels: NamespaceLabels | None, *, soft: bool = True
    ) -> HostConstraints:
        def ids(items: Iterable[PodAffinityTerm]) -> tuple[int, ...]:
            return tuple(
                terms.id(affinity_term(pod, t, namespace_labels)) for t in items if t.topology_key == HOSTNAME
            )

        hard_anti = ids(pod.pod_anti_affinity)
        prefs = (
            (
                ids(w.term for w in pod.preferred_pod_anti_affinity),
                ids(w.term for w in pod.preferred_pod_affinity),
            )
            if soft
            else ((), ())
        )
        spread = tuple(
            (terms.id(spread_term(pod, s.selector)), s.max_skew)
            for s in pod.topology_spread
            if s.topology_key == HOSTNAME and (s.hard or soft)
        )
        has_soft = bool(prefs[0] or prefs[1]) or any(
            s.topology_key == HOSTNAME and not s.hard for s in pod.topology_spread
        )
        return cls(
            anti=hard_anti + prefs[0],
            affinity=_required_affinity(pod, terms, namespace_labels) + prefs[1],
            spread=spread,
            repels=hard_anti,
            soft=has_soft and soft,
        )


def _required_affinity(pod: Pod, terms: Terms, namespace_labels: NamespaceLabels | None) -> tuple[int, ...]:
    """The id of the pods a new node must already hold for the pod's required affinity on the
    hostname: those matching every required term (each term on its own key is the domain planner's)."""
    if not any(t.topology_key == HOSTNAME for t in pod.pod_affinity):
        return ()
    every = tuple(affinity_term(pod, t, namespace_labels) for t in pod.pod_affinity)
    return (terms.id(every[0] if len(every) == 1 else AllOf(every)),)
