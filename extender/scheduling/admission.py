"""kube-scheduler's Filter verdict for binding one pod onto one concrete node, checked right before binding.

`check(pod, node, cluster, namespaces)` replays the Filter plugins of kube-scheduler that karpy's
plan relies on, in kube-scheduler's order, against every node of the cluster with its pods:

- TaintToleration: every NoSchedule/NoExecute taint of the node is tolerated.
- NodeAffinity: nodeSelector ∧ one of the ORed required terms (an empty term matches no node).
- NodePorts: no host port of the pod conflicts with one of a pod on the node.
- NodeResourcesFit: requests of the node's pods + the pod's ≤ allocatable for every resource the pod
  requests (a resource the node does not list has 0), pods + 1 ≤ allocatable pods.
- PodTopologySpread (DoNotSchedule constraints): skew = matching pods in the node's domain (+1 when
  the pod matches its own selector) - the minimum over the eligible domains (0 while fewer than
  minDomains), ≤ maxSkew.
- InterPodAffinity: required affinity, required anti-affinity, and the required anti-affinity of the
  pods already running (symmetry).

Deprecated node label keys (`failure-domain.beta.kubernetes.io/zone`, ...) are also seen under their
GA names, since the pod's keys were normalised at parse. The pod itself is never counted when it is
already listed on a node (matched by `pod.key`). A pod with rules karpy does not model
(`pod.unmodelled`) is refused: karpy cannot vouch for them.

Pure: plain data in, a reason string (naming the rule) or None out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from extender.api import labels as wk
from extender.api.affinity import HONOR, LabelSelector, PodAffinityTerm, TopologySpread, selects
from extender.api.pod import Pod
from extender.api.resources import CPU, PODS, Resources
from extender.scheduling import shared_claims
from extender.scheduling.constraints import affinity_terms, describe_taint, pod_terms
from extender.scheduling.plan import ExistingNode
from extender.scheduling.requirements import Requirements

NamespaceLabels = Mapping[str, Mapping[str, str]]
_EPSILON = 1e-9


def check(
    pod: Pod,
    node: ExistingNode,
    cluster: Sequence[ExistingNode],
    namespaces: NamespaceLabels | None = None,
) -> str | None:
    """Why kube-scheduler would refuse `pod` on `node` given every node of `cluster`, or None.

    `namespaces` maps namespace name -> labels (namespaceSelector of pod (anti-)affinity terms);
    None = unknown: an affinity term needing them refuses, an anti-affinity term is assumed to
    select every namespace (the cautious reading for both).
    """
    if pod.unmodelled:
        return f"pod {pod.key} has rules karpy does not model: {'; '.join(pod.unmodelled)}"
    if pod.deferred:
        return f"kube-scheduler binds pod {pod.key}, karpy does not evaluate {'; '.join(pod.deferred)}"
    view = _Cluster(pod, node, cluster)
    return (
        _taints(pod, node)
        or _node_selection(pod, node, view.target, _node_affinity(pod, volumes=True))
        or _host_ports(pod, node)
        or _resources(pod, node)
        or _volume_limits(pod, node)
        # nodeAffinityPolicy honours the pod's own node affinity, not its volumes' topology.
        or _topology_spread(pod, node, view, _node_affinity(pod, volumes=False))
        or _inter_pod_affinity(pod, node, view, namespaces)
    )


class _Cluster:
    """The cluster as kube-scheduler's snapshot sees it: `node` in place of its namesake, label views,
    and each node's pods without the pod being checked."""

    def __init__(self, pod: Pod, node: ExistingNode, cluster: Sequence[ExistingNode]) -> None:
        nodes = [node if n.name == node.name else n for n in cluster]
        if not any(n.name == node.name for n in cluster):
            nodes.append(node)
        name, namespace = pod.name, pod.namespace
        #: (node, labels incl. GA aliases, its pods other than `pod`)
        self.nodes = [
            (
                n,
                wk.with_ga_keys(n.labels),
                tuple(p for p in n.pods if p.name != name or p.namespace != namespace),
            )
            for n in nodes
        ]
        #: The labels of the node being checked.
        self.target = next(labels for n, labels, _ in self.nodes if n.name == node.name)


# --- TaintToleration ---------------------------------------------------------------------------


def _taints(pod: Pod, node: ExistingNode) -> str | None:
    taint = pod.tolerates(node.taints)
    if taint is None:
        return None
    return f"node {node.name} has taint {describe_taint(taint)} that the pod does not tolerate"


# --- NodeAffinity -------------------------------------------------------------------------------


def _node_affinity(pod: Pod, *, volumes: bool) -> tuple[Requirements, ...]:
    """The ORed terms (with the volumes' for placement); an empty required term matches no node."""
    if pod.required_terms and not all(pod.required_terms):
        kept = tuple(t for t in pod.required_terms if t)
        if not kept:
            return ()
        pod = replace(pod, required_terms=kept)
    return tuple(pod_terms(pod) if volumes else affinity_terms(pod))


def _matches(affinity: tuple[Requirements, ...], labels: Mapping[str, str]) -> bool:
    return any(term.matches(labels) for term in affinity)


def _node_selection(
    pod: Pod, node: ExistingNode, labels: Mapping[str, str], affinity: tuple[Requirements, ...]
) -> str | None:
    if _matches(affinity, labels):
        return None
    for key, value in sorted(pod.node_selector.items()):
        key = wk.normalize_key(key)
        if labels.get(key) != value:
            return f"node selector {key}={value} does not match node {node.name}"
    return f"node {node.name} matches none of the pod's required node affinity terms"


# --- NodePorts ----------------------------------------------------------------------------------


def _host_ports(pod: Pod, node: ExistingNode) -> str | None:
    if not pod.host_ports:
        return None
    for other in node.pods:
        if other.key == pod.key:
            continue
        for mine in pod.host_ports:
            if any(mine.conflicts(theirs) for theirs in other.host_ports):
                where = f"{mine.host_ip}:" if mine.host_ip not in ("", "0.0.0.0") else ""
                return (
                    f"host port {mine.protocol}/{where}{mine.port} is in use on node {node.name} "
                    f"by pod {other.key}"
                )
    return None


# --- NodeResourcesFit ---------------------------------------------------------------------------


def _resources(pod: Pod, node: ExistingNode) -> str | None:
    others = [p for p in node.pods if p.key != pod.key]
    if node.pods:
        used = Resources()
        for other in others:
            used = used + other.requests
    else:
        # No pod list: the node's own totals (the pod cannot be told apart in them).
        used = node.requested
    # pod_count may also count pods karpy could not parse (they are not in `pods`).
    count = max(len(others), node.pod_count - (len(node.pods) - len(others)))
    allowed = node.allocatable.amounts.get(PODS)
    if allowed is not None and count + 1 > allowed + _EPSILON:
        return f"too many pods on node {node.name}: {count} running, {allowed:g} allowed"
    for name, amount in sorted(pod.requests.amounts.items()):
        if name == PODS or amount <= 0:
            continue
        free = node.allocatable.get(name) - used.get(name)
        if amount > free + _EPSILON:
            return (
                f"insufficient {name} on node {node.name}: the pod requests {_amount(name, amount)}, "
                f"{_amount(name, max(free, 0.0))} free"
            )
    return None


def _amount(name: str, value: float) -> str:
    if name == CPU:
        return f"{round(value * 1000)}m"
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return f"{value / 2**20:.0f}Mi"
    return f"{value:g}"


# --- PodTopologySpread --------------------------------------------------------------------------


def _topology_spread(
    pod: Pod, node: ExistingNode, view: _Cluster, affinity: tuple[Requirements, ...]
) -> str | None:
    hard = [c for c in pod.topology_spread if c.hard]
    if not hard:
        return None
    target = view.target
    for c in hard:
        if c.topology_key not in target:
            return f"topology spread on {c.topology_key}: node {node.name} has no {c.topology_key} label"
    counts = _spread_counts(pod, hard, view, affinity)
    for c, domains in zip(hard, counts, strict=True):
        value = target[c.topology_key]
        minimum = min(domains.values()) if domains else 0
        if len(domains) < (c.min_domains or 1):
            minimum = 0
        own = 1 if selects(c.selector, pod.labels) else 0
        skew = domains.get(value, 0) + own - minimum
        if skew > c.max_skew:
            return f"topology spread on {c.topology_key}: skew {skew} > maxSkew {c.max_skew} in {value}"
    return None


def _spread_counts(
    pod: Pod, hard: list[TopologySpread], view: _Cluster, affinity: tuple[Requirements, ...]
) -> list[dict[str, int]]:
    """Per constraint: eligible domain -> pods of the pod's namespace its selector matches.

    kube-scheduler's PreFilter: a node counts only if it carries every constraint's key; then, per
    constraint, only if it passes the pod's node affinity (nodeAffinityPolicy Honor) and tolerates
    its NoSchedule/NoExecute taints (nodeTaintsPolicy Honor).
    """
    counts: list[dict[str, int]] = [{} for _ in hard]
    predicates = {c.selector: _label_predicate(c.selector) for c in hard if c.selector is not None}
    for other, labels, pods in view.nodes:
        if any(c.topology_key not in labels for c in hard):
            continue
        affine: bool | None = None
        tolerated: bool | None = None
        matched: dict[LabelSelector | None, int] = {}
        for i, c in enumerate(hard):
            if c.node_affinity_policy == HONOR:
                if affine is None:
                    affine = _matches(affinity, labels)
                if not affine:
                    continue
            if c.node_taints_policy == HONOR:
                if tolerated is None:
                    tolerated = pod.tolerates(other.taints) is None
                if not tolerated:
                    continue
            value = labels[c.topology_key]
            if c.selector not in matched:
                # Constraints sharing a selector (zone + hostname, typically) count the node once.
                predicate = None if c.selector is None else predicates.get(c.selector)
                matched[c.selector] = (
                    0
                    if predicate is None
                    else sum(1 for p in pods if p.namespace == pod.namespace and predicate(p.labels))
                )
            counts[i][value] = counts[i].get(value, 0) + matched[c.selector]
    return counts


# --- InterPodAffinity ---------------------------------------------------------------------------


def _label_predicate(selector: LabelSelector) -> Callable[[Mapping[str, str]], bool]:
    """`selector.matches`, with the common single matchLabels pair inlined (checks run per pod)."""
    if not selector.match_expressions and len(selector.match_labels) == 1:
        ((key, value),) = selector.match_labels
        return lambda labels: labels.get(key) == value
    return selector.matches


def _term_selects(
    term: PodAffinityTerm,
    owner_namespace: str,
    other: Pod,
    namespaces: NamespaceLabels | None,
) -> bool:
    """Whether `term` (of a pod in `owner_namespace`) selects `other`; unknown namespace labels = yes."""
    if not selects(term.selector, other.labels):
        return False
    if namespaces is None and term.needs_namespace_labels:
        return True
    return term.namespace_selected(owner_namespace, other.namespace, namespaces)


class _TermMatcher:
    """`_term_selects` for one term of the incoming pod, tried against every pod of the cluster."""

    def __init__(self, term: PodAffinityTerm, owner_namespace: str, namespaces: NamespaceLabels | None):
        self.term = term
        self.owner_namespace = owner_namespace
        self.namespaces = namespaces
        self.labels = _label_predicate(term.selector) if term.selector is not None else None
        self.by_namespace: dict[str, bool] = {}

    def __call__(self, other: Pod) -> bool:
        if self.labels is None or not self.labels(other.labels):
            return False
        selected = self.by_namespace.get(other.namespace)
        if selected is None:
            selected = _term_selects(self.term, self.owner_namespace, other, self.namespaces)
            self.by_namespace[other.namespace] = selected
        return selected


def _inter_pod_affinity(
    pod: Pod, node: ExistingNode, view: _Cluster, namespaces: NamespaceLabels | None
) -> str | None:
    target = view.target
    return (
        _pod_affinity(pod, node, target, view, namespaces)
        or _pod_anti_affinity(pod, target, view, namespaces)
        or _existing_anti_affinity(pod, target, view, namespaces)
    )


def _pod_affinity(
    pod: Pod,
    node: ExistingNode,
    target: Mapping[str, str],
    view: _Cluster,
    namespaces: NamespaceLabels | None,
) -> str | None:
    terms = pod.pod_affinity
    if not terms:
        return None
    if namespaces is None:
        for term in terms:
            if term.needs_namespace_labels:
                return (
                    f"pod affinity on {term.topology_key}: its namespaceSelector needs namespace "
                    "labels, which are unknown"
                )
    for term in terms:
        if term.topology_key not in target:
            return f"pod affinity on {term.topology_key}: node {node.name} has no {term.topology_key} label"
    # A pod counts when it matches every term (kube-scheduler's podMatchesAllAffinityTerms).
    matchers = [_TermMatcher(t, pod.namespace, namespaces) for t in terms]
    domains: set[tuple[str, str]] = set()
    for _, labels, pods in view.nodes:
        for p in pods:
            if all(match(p) for match in matchers):
                domains.update(
                    (t.topology_key, labels[t.topology_key]) for t in terms if t.topology_key in labels
                )
    for term in terms:
        value = target[term.topology_key]
        if (term.topology_key, value) in domains:
            continue
        # The first pod of a group that selects itself may go anywhere the keys exist.
        if not domains and all(match(pod) for match in matchers):
            return None
        return f"pod affinity on {term.topology_key}: no matching pod in {value}"
    return None


def _pod_anti_affinity(
    pod: Pod, target: Mapping[str, str], view: _Cluster, namespaces: NamespaceLabels | None
) -> str | None:
    terms = [(t, _TermMatcher(t, pod.namespace, namespaces)) for t in pod.pod_anti_affinity]
    terms = [(t, match) for t, match in terms if t.topology_key in target]
    if not terms:
        return None
    for _, labels, pods in view.nodes:
        for term, match in terms:
            if labels.get(term.topology_key) != target[term.topology_key]:
                continue
            for p in pods:
                if match(p):
                    return (
                        f"pod anti-affinity on {term.topology_key}: pod {p.key} runs in "
                        f"{target[term.topology_key]}"
                    )
    return None


def _existing_anti_affinity(
    pod: Pod, target: Mapping[str, str], view: _Cluster, namespaces: NamespaceLabels | None
) -> str | None:
    """Symmetry: a running pod's required anti-affinity term selecting `pod` forbids its domain."""
    for _, labels, pods in view.nodes:
        for p in pods:
            for term in p.pod_anti_affinity:
                value = labels.get(term.topology_key)
                if value is None or target.get(term.topology_key) != value:
                    continue
                if _term_selects(term, p.namespace, pod, namespaces):
                    return f"pod anti-affinity of pod {p.key} on {term.topology_key} excludes {value}"
    return None


def _volume_limits(pod: Pod, node: ExistingNode) -> str | None:
    """kube-scheduler NodeVolumeLimits: the node's CSINode limit per driver, counting its pods' unique
    volumes (a claim a pod there already holds takes no more room)."""
    if not pod.csi_claims:
        return None
    there = shared_claims.held(node.pods)
    new = Counter(
        driver for driver, name in pod.csi_claims if shared_claims.key(pod.namespace, name) not in there
    )
    for driver, count in sorted(new.items()):
        room = node.volume_room(driver)
        if count > room:
            return f"node(s) exceed max volume count: {driver} has room for {max(room, 0)}, pod needs {count}"
    return None
