"""Label selectors, topology spread constraints, pod (anti-)affinity terms and host ports of a Pod.

The vocabulary of kube-scheduler's PodTopologySpread, InterPodAffinity and NodePorts plugins, as
plain frozen data. Two rules from kube-scheduler shape these types: a nil `labelSelector` selects
no pod (`selector is None`), while an empty one selects every pod; and a term's namespaces are its
`namespaces` list plus those its `namespaceSelector` matches, the pod's own namespace when both are
unset, every namespace when the namespaceSelector is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.api.provisioner import Requirement

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True)
class LabelSelector:
    """metav1.LabelSelector; an empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        for expr in self.match_expressions:
            present = expr.key in labels
            value = labels.get(expr.key)
            if expr.operator == "In" and value not in expr.values:
                return False
            if expr.operator == "NotIn" and present and value in expr.values:
                return False
            if expr.operator == "Exists" and not present:
                return False
            if expr.operator == "DoesNotExist" and present:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def with_label_keys(
        self, labels: Mapping[str, str], match: tuple[str, ...], mismatch: tuple[str, ...] = ()
    ) -> LabelSelector:
        """`matchLabelKeys` / `mismatchLabelKeys`: ANDed as `key In/NotIn (the pod's own value)`.

        kube-scheduler skips keys the pod does not carry.
        """
        extra = [Requirement(k, "In", (labels[k],)) for k in match if k in labels]
        extra += [Requirement(k, "NotIn", (labels[k],)) for k in mismatch if k in labels]
        if not extra:
            return self
        return LabelSelector(self.match_labels, (*self.match_expressions, *extra))


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """kube-scheduler: a nil selector selects nothing."""
    return selector is not None and selector.matches(labels)


@dataclass(frozen=True)
class TopologySpread:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    #: None = the constraint counts no pod (kube-scheduler's nil labelSelector).
    selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable != SCHEDULE_ANYWAY


@dataclass(frozen=True)
class PodAffinityTerm:
    topology_key: str
    #: None = matches no pod.
    selector: LabelSelector | None
    namespaces: tuple[str, ...] = ()
    #: None = only `namespaces` (or the pod's own namespace); empty = every namespace.
    namespace_selector: LabelSelector | None = None

    @property
    def needs_namespace_labels(self) -> bool:
        return self.namespace_selector is not None and not self.namespace_selector.empty

    def namespace_selected(
        self, own_namespace: str, namespace: str, namespace_labels: Mapping[str, Mapping[str, str]] | None
    ) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return not self.namespaces and namespace == own_namespace
        if self.namespace_selector.empty:
            return True
        labels = (namespace_labels or {}).get(namespace, {})
        return self.namespace_selector.matches(labels)

    def selects(
        self,
        own_namespace: str,
        namespace: str,
        pod_labels: Mapping[str, str],
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> bool:
        return selects(self.selector, pod_labels) and self.namespace_selected(
            own_namespace, namespace, namespace_labels
        )


@dataclass(frozen=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """kube-scheduler NodePorts: same protocol and port, and host IPs that overlap (0.0.0.0 = all)."""
        if self.protocol != other.protocol or self.port != other.port:
            return False
        wildcard = ("", "0.0.0.0")
        return self.host_ip in wildcard or other.host_ip in wildcard or self.host_ip == other.host_ip
