"""An independent kube-scheduler rule checker for solver plans (issue 11: scheduling fidelity).

It shares no rule code with the solver: it reads the raw pod JSON (what `Pod.from_manifest` is fed),
the nodes' labels, taints, allocatable and pods, and the plan's placements, and re-derives every
rule from kube-scheduler's Filter plugins (pkg/scheduler/framework/plugins/): NodeResourcesFit,
NodePorts, TaintToleration, NodeAffinity, PodTopologySpread, InterPodAffinity. From the solver it
only reads plain data (Plan, PlannedNode, InstanceType, Provisioner fields).

Each pod is checked in the state at its bind, in the plan's bind order (`Plan.bind_phases`; every
pod of a phase binds before any pod of a later one, pods absent from it are phase 0): every pod the
plan places (on new nodes and on existing nodes via `plan.existing`) must pass each filter as if it
were the last pod of its phase scheduled, with the running pods, the pods of earlier phases and the
other pods of its phase in place; pods of later phases are not there yet. As in kube-scheduler
(podtopologyspread/filtering.go, interpodaffinity/filtering.go), a pod meets its own spread and
(anti-)affinity and the required anti-affinity of the pods already there, never their spread.

A planned node's labels are certain for `PlannedNode.labels`, the Provisioner's labels and name,
and `kubernetes.io/hostname` (unique per node). The keys that depend on the launch choice take
their values from a "world": one (option, available offering) pair with the offering's zone in
`node.zones` and capacity type in `node.capacity_types`. A rule must hold in every world of its
node; a rule that relates several nodes (spread, inter-pod affinity) must hold for every
combination of their worlds, which `_worst_skew` and `_breakable` decide without enumerating them.

`violations(...)` returns one line per broken rule; `unjustified_unschedulable(...)` one line per
pod reported unschedulable although an instance type of an applicable Provisioner holds it alone;
`stricter_than_scheduler(...)` one line per pod reported unschedulable although kube-scheduler
would bind it, last, to a node of the plan or the cluster.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.unit.scheduling.builders import raw_types

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOSTNAME = "kubernetes.io/hostname"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
PROVISIONER_NAME = "karpenter.sh/provisioner-name"
#: Keys a planned node's launch choice decides (zone, capacity type and the option's own labels).
VARYING = (ZONE, CAPACITY_TYPE, INSTANCE_TYPE, ARCH, OS)
DEPRECATED = {
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "node.k8s.aws/capacity-type": CAPACITY_TYPE,
}
GPU_NAMES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "habana.ai/gaudi",
)
WILDCARD_IPS = ("", "0.0.0.0", "::")
EPS = 1e-6


def _key(key: str) -> str:
    return DEPRECATED.get(key, key)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Field of a dict or attribute of an object (existing nodes may be either)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


# -- quantities -----------------------------------------------------------------------------------

_SUFFIX = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def quantity(raw: Any) -> float:
    if isinstance(raw, int | float):
        return float(raw)
    match = _QUANTITY.match(str(raw).strip())
    if not match:
        raise ValueError(f"bad quantity {raw!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def resource_list(raw: Mapping[str, Any] | None) -> dict[str, float]:
    return {str(k): quantity(v) for k, v in (raw or {}).items()}


def _add(total: dict[str, float], more: Mapping[str, float]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0.0) + amount


def _max(total: dict[str, float], other: Mapping[str, float]) -> None:
    for name, amount in other.items():
        total[name] = max(total.get(name, 0.0), amount)


def container_requests(container: Mapping[str, Any]) -> dict[str, float]:
    """requests, defaulted per resource to the limit (API server defaulting)."""
    resources = container.get("resources") or {}
    return {**resource_list(resources.get("limits")), **resource_list(resources.get("requests"))}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """k8s.io/component-helpers resource.PodRequests: app containers plus restartable init containers
    (sidecars), at least each init container plus the sidecars started before it, plus overhead."""
    total: dict[str, float] = {}
    for container in spec.get("containers") or ():
        _add(total, container_requests(container))
    sidecars: dict[str, float] = {}
    init_max: dict[str, float] = {}
    for container in spec.get("initContainers") or ():
        own = container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _max(init_max, sidecars)
        else:
            step = dict(own)
            _add(step, sidecars)
            _max(init_max, step)
    _max(total, init_max)
    _add(total, resource_list(spec.get("overhead")))
    return {k: v for k, v in total.items() if v}


# -- selectors and terms --------------------------------------------------------------------------

Expr = tuple[str, str, tuple[str, ...]]


def _expr(raw: Mapping[str, Any], normalize: bool) -> Expr:
    key = str(raw.get("key", ""))
    return (
        _key(key) if normalize else key,
        str(raw.get("operator", "")),
        tuple(map(str, raw.get("values") or ())),
    )


def label_expr_matches(expr: Expr, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorRequirement (pod labels): In, NotIn, Exists, DoesNotExist."""
    key, op, values = expr
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    raise ValueError(f"unknown label selector operator {op!r}")


def node_expr_matches(expr: Expr, labels: Mapping[str, str]) -> bool:
    """v1.NodeSelectorRequirement: the label operators plus Gt/Lt on integer values."""
    key, op, values = expr
    if op in ("Gt", "Lt"):
        if key not in labels:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return label_expr_matches(expr, labels)


@dataclass(frozen=True)
class Selector:
    """A parsed metav1.LabelSelector; a nil selector is represented by None (selects nothing)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    exprs: tuple[Expr, ...] = ()

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> Selector | None:
        if raw is None:
            return None
        return cls(
            tuple(sorted((str(k), str(v)) for k, v in (raw.get("matchLabels") or {}).items())),
            tuple(_expr(e, normalize=False) for e in raw.get("matchExpressions") or ()),
        )

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            label_expr_matches(e, labels) for e in self.exprs
        )

    def plus(self, exprs: Iterable[Expr]) -> Selector:
        return Selector(self.match_labels, self.exprs + tuple(exprs))


def _selects(selector: Selector | None, labels: Mapping[str, str]) -> bool:
    return selector is not None and selector.matches(labels)


@dataclass(frozen=True)
class Term:
    """A required pod (anti-)affinity term of the pod that carries it."""

    topology_key: str
    selector: Selector | None
    namespaces: frozenset[str]
    namespace_selector: Selector | None

    def selects(self, pod: CPod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        in_scope = pod.namespace in self.namespaces or _selects(
            self.namespace_selector, namespace_labels.get(pod.namespace, {})
        )
        return in_scope and _selects(self.selector, pod.labels)


@dataclass(frozen=True)
class Spread:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: Selector | None
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: tuple[str, str, str]) -> bool:
        key, value, effect = taint
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == value


@dataclass(eq=False)
class CPod:
    """The checker's own parse of a pod's API JSON."""

    raw: Mapping[str, Any]
    namespace: str
    name: str
    labels: dict[str, str]
    requests: dict[str, float]
    ports: tuple[tuple[str, str, int], ...]
    node_selector: dict[str, str]
    #: Required node-affinity terms (ORed, each a tuple of ANDed expressions); None when absent.
    required: tuple[tuple[Expr, ...], ...] | None
    match_fields: bool
    tolerations: tuple[Toleration, ...]
    spreads: tuple[Spread, ...]
    affinity: tuple[Term, ...]
    anti: tuple[Term, ...]
    owner_kind: str
    label_items: tuple[tuple[str, str], ...] = ()
    #: Rules karpy declares it does not model (PVC volumes, matchFields, resourceClaims).
    unmodelled: tuple[str, ...] = ()
    #: namespace/claim of its persistent and generic ephemeral volumes.
    claims: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def affinity_signature(self) -> tuple:
        return (tuple(sorted(self.node_selector.items())), self.required)

    def node_keys(self) -> frozenset[str]:
        keys = set(self.node_selector)
        for term in self.required or ():
            keys.update(e[0] for e in term)
        return frozenset(keys)

    def matches_node(self, labels: Mapping[str, str], node_name: str = "") -> bool:
        """NodeAffinity Filter: nodeSelector AND (any required term, each term ANDed)."""
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if self.required is None:
            return True
        return any(term and all(node_expr_matches(e, labels) for e in term) for term in self.required)

    def untolerated(self, taints: Iterable[tuple[str, str, str]]) -> tuple[str, str, str] | None:
        for taint in taints:
            if taint[2] in ("NoSchedule", "NoExecute") and not any(
                t.tolerates(taint) for t in self.tolerations
            ):
                return taint
        return None

    @classmethod
    def parse(cls, raw: Mapping[str, Any], resolved: Mapping[str, str] | None = None) -> CPod:
        """`resolved`: namespace/claim -> CSI driver of the claims whose volumes are known (no
        topology of their own); a pod with any other claim is one karpy does not model."""
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        namespace = str(meta.get("namespace") or "default")
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        affinity = spec.get("affinity") or {}
        node_affinity = affinity.get("nodeAffinity") or {}
        required_raw = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        required = None
        match_fields = False
        if required_raw is not None:
            terms = []
            for term in required_raw.get("nodeSelectorTerms") or ():
                match_fields = match_fields or bool(term.get("matchFields"))
                terms.append(tuple(_expr(e, normalize=True) for e in term.get("matchExpressions") or ()))
            required = tuple(terms)
        ports = []
        containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
        for container in [*containers, *(spec.get("containers") or ())]:
            for port in container.get("ports") or ():
                if int(port.get("hostPort") or 0) > 0:
                    ports.append(
                        (
                            str(port.get("protocol") or "TCP"),
                            str(port.get("hostIP") or ""),
                            int(port["hostPort"]),
                        )
                    )
        owners = meta.get("ownerReferences") or []
        owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
        return cls(
            raw=raw,
            namespace=namespace,
            name=str(meta.get("name")),
            labels=labels,
            requests=pod_requests(spec),
            ports=tuple(ports),
            node_selector={_key(str(k)): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            required=required,
            match_fields=match_fields,
            tolerations=tuple(
                Toleration(
                    str(t.get("key") or ""),
                    str(t.get("operator") or "Equal"),
                    str(t.get("value") or ""),
                    str(t.get("effect") or ""),
                )
                for t in spec.get("tolerations") or ()
            ),
            spreads=tuple(_spread(s, labels) for s in spec.get("topologySpreadConstraints") or ()),
            affinity=_terms(affinity.get("podAffinity"), namespace, labels),
            anti=_terms(affinity.get("podAntiAffinity"), namespace, labels),
            owner_kind=str(owner.get("kind") or ""),
            label_items=tuple(sorted(labels.items())),
            unmodelled=_unmodelled(spec, match_fields, namespace, resolved or {}),
            claims=tuple(f"{namespace}/{c}" for c in _claim_names(spec, str(meta.get("name")))),
        )


def _claim_names(spec: Mapping[str, Any], pod_name: str) -> list[str]:
    names = []
    for volume in spec.get("volumes") or ():
        if volume.get("persistentVolumeClaim"):
            names.append(str(volume["persistentVolumeClaim"].get("claimName")))
        elif (volume.get("ephemeral") or {}).get("volumeClaimTemplate"):
            names.append(f"{pod_name}-{volume.get('name')}")
    return names


def _unmodelled(
    spec: Mapping[str, Any], match_fields: bool, namespace: str, resolved: Mapping[str, str]
) -> tuple[str, ...]:
    reasons = []
    for volume in spec.get("volumes") or ():
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim and f"{namespace}/{claim}" in resolved:
            continue
        if volume.get("persistentVolumeClaim") or (volume.get("ephemeral") or {}).get("volumeClaimTemplate"):
            reasons.append(f"volume {volume.get('name')} claims a PersistentVolume")
    if match_fields:
        reasons.append("node affinity matchFields")
    if spec.get("resourceClaims"):
        reasons.append("resourceClaims")
    return tuple(reasons)


def _spread(raw: Mapping[str, Any], labels: Mapping[str, str]) -> Spread:
    selector = Selector.parse(raw.get("labelSelector"))
    # matchLabelKeys: the pod's own values ANDed in; keys the pod lacks are ignored (common.go).
    keys = [k for k in raw.get("matchLabelKeys") or () if k in labels]
    if selector is not None and keys:
        selector = selector.plus((k, "In", (labels[k],)) for k in keys)
    return Spread(
        max_skew=int(raw.get("maxSkew", 1)),
        topology_key=_key(str(raw.get("topologyKey", ""))),
        when_unsatisfiable=str(raw.get("whenUnsatisfiable") or "DoNotSchedule"),
        selector=selector,
        min_domains=int(raw.get("minDomains") or 1),
        node_affinity_policy=str(raw.get("nodeAffinityPolicy") or "Honor"),
        node_taints_policy=str(raw.get("nodeTaintsPolicy") or "Ignore"),
    )


def _terms(raw: Mapping[str, Any] | None, namespace: str, labels: Mapping[str, str]) -> tuple[Term, ...]:
    result = []
    for item in (raw or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or ():
        selector = Selector.parse(item.get("labelSelector"))
        if selector is not None:
            extra = [(k, "In", (labels[k],)) for k in item.get("matchLabelKeys") or () if k in labels]
            extra += [(k, "NotIn", (labels[k],)) for k in item.get("mismatchLabelKeys") or () if k in labels]
            selector = selector.plus(extra)
        namespaces = frozenset(map(str, item.get("namespaces") or ()))
        namespace_selector = Selector.parse(item.get("namespaceSelector"))
        if not namespaces and namespace_selector is None:
            namespaces = frozenset({namespace})
        result.append(Term(_key(str(item.get("topologyKey", ""))), selector, namespaces, namespace_selector))
    return tuple(result)


def _ports_conflict(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    if a[0] != b[0] or a[2] != b[2]:
        return False
    return a[1] == b[1] or a[1] in WILDCARD_IPS or b[1] in WILDCARD_IPS


def _taints(raw: Iterable[Any]) -> tuple[tuple[str, str, str], ...]:
    return tuple(
        (str(_get(t, "key", "")), str(_get(t, "value", "") or ""), str(_get(t, "effect", "")))
        for t in raw or ()
    )


def _node_labels(raw: Mapping[str, str]) -> dict[str, str]:
    """Node labels with the GA key added for every deprecated key (kubelets set both)."""
    labels = {str(k): str(v) for k, v in raw.items()}
    for key, value in list(labels.items()):
        labels.setdefault(_key(key), value)
    return labels


# -- nodes ----------------------------------------------------------------------------------------


@dataclass(eq=False)
class CNode:
    name: str
    #: Every label set the node may carry (one for an existing node).
    worlds: list[dict[str, str]]
    taints: tuple[tuple[str, str, str], ...]
    pods: list[CPod]
    schedulable: bool = True
    planned: Any = None
    #: (what, allocatable) pairs that must each hold the node's pods.
    capacities: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    new_pods: list[CPod] = field(default_factory=list)
    #: CSI driver -> volumes the node can attach (an existing node's CSINode); none = unlimited.
    attach_limits: dict[str, int] = field(default_factory=dict)
    _projections: dict[frozenset[str], list[dict[str, str]]] = field(default_factory=dict)
    _values: dict[str, tuple[frozenset[str], bool]] = field(default_factory=dict)

    def projected(self, keys: frozenset[str]) -> list[dict[str, str]]:
        """The distinct restrictions of the worlds to `keys` (absent keys left out)."""
        if keys not in self._projections:
            seen: dict[tuple, dict[str, str]] = {}
            for world in self.worlds:
                small = {k: world[k] for k in keys if k in world}
                seen.setdefault(tuple(sorted(small.items())), small)
            self._projections[keys] = list(seen.values())
        return self._projections[keys]

    def values(self, key: str) -> tuple[frozenset[str], bool]:
        """The values `key` may take on this node, and whether it may be absent."""
        if key not in self._values:
            found = {w[key] for w in self.worlds if key in w}
            self._values[key] = (frozenset(found), any(key not in w for w in self.worlds))
        return self._values[key]


def _world_text(world: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={world[k]}" for k in VARYING if k in world)


# -- the checker ----------------------------------------------------------------------------------


class _Cluster:
    def __init__(
        self,
        new_pods: Sequence[Mapping[str, Any]],
        existing_nodes: Sequence[Any],
        plan: Any,
        provisioners: Sequence[Any],
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        daemonsets: Sequence[Mapping[str, Any]] = (),
        unavailable: Iterable[tuple[str, str, str]] = (),
        claims: Mapping[str, str] | None = None,
    ) -> None:
        self.out: list[str] = []
        #: namespace/claim -> CSI driver of the claims the scenario resolved.
        self.claims = dict(claims or {})
        self.namespace_labels = {k: dict(v) for k, v in (namespaces or {}).items()}
        self.unavailable = frozenset(unavailable)
        self.provisioners = {p.name: p for p in provisioners}
        self.daemons = [CPod.parse(d) for d in daemonsets]
        self.new = {}
        for raw in new_pods:
            pod = CPod.parse(raw, self.claims)
            if pod.key in self.new:
                self.out.append(f"input: pod {pod.key} listed twice")
            self.new[pod.key] = pod
        self.nodes: list[CNode] = []
        self.by_name: dict[str, CNode] = {}
        #: pod key -> bind phase of the plan's pods (running pods are there before any).
        self.phases: dict[str, int] = dict(getattr(plan, "bind_phases", None) or {})
        self._add_existing(existing_nodes)
        self._add_plan(plan)
        self._term_memo: dict[tuple, bool] = {}
        self._state_memo: dict[tuple, frozenset] = {}
        self._count_memo: dict[tuple, int] = {}
        self._carriers: list[tuple[CNode, CPod, Term]] | None = None

    # -- building the final state

    def _add_existing(self, existing_nodes: Sequence[Any]) -> None:
        for raw in existing_nodes:
            name = str(_get(raw, "name"))
            labels = _node_labels(_get(raw, "labels") or {})
            labels.setdefault(HOSTNAME, name)
            node = CNode(
                name=name,
                worlds=[labels],
                taints=_taints(_get(raw, "taints") or ()),
                pods=[CPod.parse(p, self.claims) for p in _get(raw, "pods") or ()],
                schedulable=bool(_get(raw, "schedulable", True)),
                capacities=[("allocatable", resource_list(_get(raw, "allocatable")))],
                attach_limits=dict(_get(raw, "attach_limits") or {}),
            )
            self.nodes.append(node)
            self.by_name[name] = node

    def _place(self, pod: Any, node: CNode, seen: dict[str, str], where: str) -> None:
        key = pod.key
        if key in seen:
            self.out.append(f"accounting: pod {key} placed on {seen[key]} and {where}")
            return
        seen[key] = where
        mine = self.new.get(key)
        if mine is None:
            self.out.append(f"accounting: pod {key} on {where} is not one of the new pods")
            return
        node.pods.append(mine)
        node.new_pods.append(mine)

    def _add_plan(self, plan: Any) -> None:
        seen: dict[str, str] = {}
        for name, pods in (plan.existing or {}).items():
            node = self.by_name.get(name)
            if node is None:
                self.out.append(f"existing: plan places pods on unknown node {name}")
                continue
            if not node.schedulable:
                self.out.append(f"existing: plan places {len(pods)} pod(s) on unschedulable node {name}")
            for pod in pods:
                self._place(pod, node, seen, name)
        for index, planned in enumerate(plan.nodes):
            node = self._planned_node(index, planned)
            self.nodes.append(node)
            for pod in planned.pods:
                self._place(pod, node, seen, node.name)
        for item in plan.unschedulable:
            key = item.pod.key
            if key in seen:
                self.out.append(f"accounting: pod {key} placed on {seen[key]} and reported unschedulable")
            seen[key] = "unschedulable"
        for key in self.new:
            if key not in seen:
                self.out.append(f"accounting: pod {key} neither placed nor reported unschedulable")

    def _planned_node(self, index: int, planned: Any) -> CNode:
        name = f"planned-{index}"
        while name in self.by_name:
            name += "x"
        provisioner = self.provisioners.get(planned.provisioner)
        if provisioner is None:
            self.out.append(f"{name}: unknown provisioner {planned.provisioner}")
        certain = {_key(k): str(v) for k, v in (planned.labels or {}).items()}
        if provisioner is not None:
            for key, value in provisioner.labels.items():
                if certain.get(_key(key), value) != value:
                    self.out.append(f"{name}: label {key}={certain[_key(key)]} but provisioner says {value}")
                certain[_key(key)] = value
            if certain.get(PROVISIONER_NAME, provisioner.name) != provisioner.name:
                self.out.append(f"{name}: labelled for provisioner {certain[PROVISIONER_NAME]}")
            certain[PROVISIONER_NAME] = provisioner.name
        certain[HOSTNAME] = name
        worlds = []
        clashes: set[str] = set()
        for option in planned.options:
            found = False
            for offering in option.offerings:
                if (
                    not offering.available
                    or offering.zone not in planned.zones
                    or offering.capacity_type not in planned.capacity_types
                    or (option.name, offering.zone, offering.capacity_type) in self.unavailable
                ):
                    continue
                found = True
                varying = {
                    ZONE: offering.zone,
                    CAPACITY_TYPE: offering.capacity_type,
                    INSTANCE_TYPE: option.name,
                    ARCH: option.arch,
                    OS: option.os,
                }
                for key, value in varying.items():
                    if key in certain and certain[key] != value and key not in clashes:
                        clashes.add(key)
                        self.out.append(
                            f"{name}: label {key}={certain[key]} yet option {option.name}"
                            f" may launch with {value}"
                        )
                worlds.append({**certain, **varying})
            if not found:
                self.out.append(
                    f"{name}: option {option.name} has no available offering in zones {list(planned.zones)}"
                    f" x capacity types {list(planned.capacity_types)}"
                )
        if not planned.options:
            self.out.append(f"{name}: no instance type options")
        if not worlds:
            worlds = [dict(certain)]
        taints = set(_taints(planned.taints))
        if provisioner is not None:
            taints |= set(_taints(provisioner.taints))
        capacities = [(f"option {o.name}", dict(o.allocatable.amounts)) for o in planned.options]
        node = CNode(name=name, worlds=worlds, taints=tuple(sorted(taints)), pods=[], planned=planned)
        node.capacities = capacities
        self.by_name[name] = node
        return node

    # -- memoised matching

    def term_selects(self, term: Term, pod: CPod) -> bool:
        key = (term, pod.namespace, pod.label_items)
        if key not in self._term_memo:
            self._term_memo[key] = term.selects(pod, self.namespace_labels)
        return self._term_memo[key]

    def phase(self, pod: CPod) -> int:
        """The bind phase of a pod of the plan; -1 for a running pod."""
        return self.phases.get(pod.key, 0) if self.new.get(pod.key) is pod else -1

    def bound(self, node: CNode, upto: int) -> list[CPod]:
        """The node's pods bound by the end of phase `upto`."""
        return [p for p in node.pods if self.phase(p) <= upto]

    def count(self, node: CNode, selector: Selector | None, namespace: str, upto: int) -> int:
        key = (id(node), selector, namespace, upto)
        if key not in self._count_memo:
            self._count_memo[key] = sum(
                1 for p in self.bound(node, upto) if p.namespace == namespace and _selects(selector, p.labels)
            )
        return self._count_memo[key]

    # -- node-level rules

    def check_nodes(self) -> None:
        for node in self.nodes:
            if not node.new_pods:
                continue
            self._check_resources(node)
            self._check_ports(node)
            self._check_volumes(node)
            if node.planned is not None:
                self._check_provisioner(node)

    def _check_resources(self, node: CNode) -> None:
        used: dict[str, float] = {}
        for pod in node.pods:
            _add(used, pod.requests)
        count = len(node.pods)
        for what, allocatable in node.capacities:
            need = dict(used)
            pods = count
            if node.planned is not None and self.daemons:
                for daemon in self._landing_daemons(node, what.removeprefix("option ")):
                    _add(need, daemon.requests)
                    pods += 1
            over = [
                f"{name} {amount:g} > {allocatable.get(name, 0.0):g}"
                for name, amount in sorted(need.items())
                if amount > allocatable.get(name, 0.0) * (1 + 1e-9) + EPS
            ]
            if "pods" in allocatable and pods > allocatable["pods"] + EPS:
                over.append(f"pods {pods} > {allocatable['pods']:g}")
            if over:
                self.out.append(f"resources: {node.name} {what}: " + "; ".join(over))

    def _check_volumes(self, node: CNode) -> None:
        """kube-scheduler NodeVolumeLimits: a node's distinct volumes of a driver within its limit
        (an existing node's CSINode; for a new node, every option's EBS CSI limit)."""
        volumes: dict[str, set[str]] = defaultdict(set)
        for pod in node.pods:
            for claim in pod.claims:
                if driver := self.claims.get(claim):
                    volumes[driver].add(claim)
        for driver, held in sorted(volumes.items()):
            if node.planned is None:
                limits = [("CSINode", node.attach_limits[driver])] if driver in node.attach_limits else []
            elif driver == EBS_CSI:
                limits = [
                    (what, ebs_attach_limit(what.removeprefix("option "))) for what, _ in node.capacities
                ]
            else:
                limits = []
            for what, limit in limits:
                if len(held) > limit:
                    self.out.append(
                        f"volumes: {node.name} {what}: {len(held)} {driver} volumes > limit {limit}"
                    )

    def _landing_daemons(self, node: CNode, option: str) -> list[CPod]:
        worlds = [w for w in node.worlds if w.get(INSTANCE_TYPE) == option] or node.worlds
        return [
            d
            for d in self.daemons
            if d.untolerated(node.taints) is None and any(d.matches_node(w) for w in worlds)
        ]

    def _check_ports(self, node: CNode) -> None:
        new = {id(p) for p in node.new_pods}
        pods = [p for p in node.pods if p.ports]
        for i, a in enumerate(pods):
            for b in pods[i + 1 :]:
                if id(a) not in new and id(b) not in new:
                    continue
                for pa in a.ports:
                    if any(_ports_conflict(pa, pb) for pb in b.ports):
                        self.out.append(
                            f"host ports: {a.key} and {b.key} both use {pa[0]}/{pa[2]} on {node.name}"
                        )
        if node.planned is None or not self.daemons:
            return
        # The DaemonSet pods that will run on a new node hold their host ports there too.
        for what, _ in node.capacities:
            for daemon in self._landing_daemons(node, what.removeprefix("option ")):
                for pod in pods:
                    for pa in pod.ports:
                        if any(_ports_conflict(pa, pd) for pd in daemon.ports):
                            self.out.append(
                                f"host ports: {pod.key} and DaemonSet pod {daemon.key} both use"
                                f" {pa[0]}/{pa[2]} on {node.name} {what}"
                            )

    def _check_provisioner(self, node: CNode) -> None:
        provisioner = self.provisioners.get(node.planned.provisioner)
        if provisioner is None:
            return
        for req in provisioner.requirements:
            expr = (_key(req.key), req.operator, tuple(req.values))
            for world in node.projected(frozenset({expr[0]})):
                if not node_expr_matches(expr, world):
                    value = world.get(expr[0], "<absent>")
                    self.out.append(
                        f"provisioner: {node.name} may have {expr[0]}={value}, outside provisioner"
                        f" {provisioner.name} requirement {req.operator} {list(req.values)}"
                    )
                    break

    # -- pod-level rules

    def check_pods(self) -> None:
        for node in self.nodes:
            for pod in node.new_pods:
                self._check_pod(pod, node)

    def _check_pod(self, pod: CPod, node: CNode) -> None:
        where = f"{pod.key} on {node.name}"
        if pod.unmodelled:
            self.out.append(
                f"unmodelled: {where} is placed although karpy does not model its {pod.unmodelled[0]}"
            )
        if taint := pod.untolerated(node.taints):
            self.out.append(f"taints: {where} does not tolerate {taint[0]}={taint[1]}:{taint[2]}")
        for world in node.projected(pod.node_keys()):
            if not pod.matches_node(world):
                shown = ", ".join(f"{k}={v}" for k, v in sorted(world.items())) or "no matching labels"
                self.out.append(
                    f"node affinity: {where} fails its nodeSelector/required affinity with {shown}"
                )
                break
        constraints = [s for s in pod.spreads if s.when_unsatisfiable == "DoNotSchedule"]
        for spread in constraints:
            self._check_spread(pod, node, spread, frozenset(s.topology_key for s in constraints), where)
        self._check_inter_pod(pod, node, where)

    # PodTopologySpread

    def _states(self, m: CNode, pod: CPod, spread: Spread, keys: frozenset[str]) -> frozenset:
        """(eligible, domain) pairs node `m` may be in for this constraint of `pod`."""
        honor_affinity = spread.node_affinity_policy == "Honor"
        honor_taints = spread.node_taints_policy == "Honor"
        memo = (
            id(m),
            spread.topology_key,
            keys,
            pod.affinity_signature if honor_affinity else None,
            pod.tolerations if honor_taints else None,
        )
        if memo not in self._state_memo:
            states = set()
            tolerated = not honor_taints or pod.untolerated(m.taints) is None
            for world in m.projected(keys | (pod.node_keys() if honor_affinity else frozenset())):
                eligible = tolerated and all(k in world for k in keys)
                if eligible and honor_affinity:
                    eligible = pod.matches_node(world)
                states.add((True, world[spread.topology_key]) if eligible else (False, None))
            self._state_memo[memo] = frozenset(states)
        return self._state_memo[memo]

    def _check_spread(self, pod: CPod, node: CNode, spread: Spread, keys: frozenset[str], where: str) -> None:
        values, absent = node.values(spread.topology_key)
        if absent:
            self.out.append(f"topology spread: {where} may lack topology key {spread.topology_key}")
            return
        own = 1 if _selects(spread.selector, pod.labels) else 0
        skew, witness = self._skew(pod, node, spread, keys, own, values, peers_only=False)
        if skew <= spread.max_skew:
            return
        # Counting only running pods and new pods that carry this same constraint: if the skew is then
        # within maxSkew, kube-scheduler would accept the state when the other counted pods (which do
        # not carry the constraint) are bound after this one, so the breach depends on binding order.
        peers_skew, _ = self._skew(pod, node, spread, keys, own, values, peers_only=True)
        kind = "topology spread (order-dependent)" if peers_skew <= spread.max_skew else "topology spread"
        self.out.append(
            f"{kind}: {where} skew {skew} > maxSkew {spread.max_skew} on {spread.topology_key} ({witness})"
        )

    def _skew(
        self,
        pod: CPod,
        node: CNode,
        spread: Spread,
        keys: frozenset[str],
        own: int,
        values: frozenset[str],
        *,
        peers_only: bool,
    ) -> tuple[int, str]:
        nodes = []
        upto = self.phase(pod)
        for m in self.nodes:
            if peers_only:
                k = sum(
                    1
                    for q in self.bound(m, upto)
                    if q.namespace == pod.namespace
                    and _selects(spread.selector, q.labels)
                    and (q.key not in self.new or self.new[q.key] is not q or spread in q.spreads)
                )
            else:
                k = self.count(m, spread.selector, pod.namespace, upto)
            if m is node:
                k -= own
            nodes.append((self._states(m, pod, spread, keys), k, m is node))
        return _worst_skew(nodes, own, spread.min_domains, values)

    # InterPodAffinity

    def _same_domain_possible(self, a: CNode, b: CNode, key: str) -> bool:
        if a is b:
            return bool(a.values(key)[0])
        return bool(a.values(key)[0] & b.values(key)[0])

    def _check_inter_pod(self, pod: CPod, node: CNode, where: str) -> None:
        if self._carriers is None:
            self._carriers = [(m, q, t) for m in self.nodes for q in m.pods for t in q.anti]
        upto = self.phase(pod)
        for m, q, term in self._carriers:
            if (
                q is not pod
                and self.phase(q) <= upto
                and self.term_selects(term, pod)
                and self._same_domain_possible(node, m, term.topology_key)
            ):
                self.out.append(
                    f"pod anti-affinity (symmetry): {where} may share {term.topology_key} with {q.key}"
                    f" on {m.name}, whose anti-affinity selects it"
                )
        if not pod.anti and not pod.affinity:
            return
        others = [(m, q) for m in self.nodes for q in self.bound(m, upto) if q is not pod]
        for term in pod.anti:
            for m, q in others:
                if self.term_selects(term, q) and self._same_domain_possible(node, m, term.topology_key):
                    self.out.append(
                        f"pod anti-affinity: {where} may share {term.topology_key} with {q.key} on {m.name}"
                    )
                    break
        if pod.affinity:
            self._check_affinity(pod, node, others, where)

    def _check_affinity(self, pod: CPod, node: CNode, others: list[tuple[CNode, CPod]], where: str) -> None:
        # A pod counts only if it matches ALL the terms (updateWithAffinityTerms).
        group = [(m, q) for m, q in others if all(self.term_selects(t, q) for t in pod.affinity)]
        counted = [(m, q) for m, q in group if any(m.values(t.topology_key)[0] for t in pod.affinity)]
        if not counted and all(self.term_selects(t, pod) for t in pod.affinity):
            # The first pod of a group that matches its own terms may go anywhere (with the keys).
            for term in pod.affinity:
                if node.values(term.topology_key)[1]:
                    self.out.append(f"pod affinity: {where} may lack topology key {term.topology_key}")
            return
        for term in pod.affinity:
            values, absent = node.values(term.topology_key)
            if absent:
                self.out.append(f"pod affinity: {where} may lack topology key {term.topology_key}")
                continue
            if _breakable(node, values, [m for m, _ in group], term.topology_key):
                self.out.append(
                    f"pod affinity: {where} may have no pod matching its terms in its {term.topology_key}"
                    f" domain ({len(group)} matching pod(s) elsewhere)"
                )

    # -- stricter than kube-scheduler

    def node_clean(self, node: CNode) -> bool:
        """Whether the node-level filters hold for the pods the plan gives the node."""
        saved, self.out = self.out, []
        try:
            self._check_resources(node)
            self._check_ports(node)
            self._check_volumes(node)
            return not self.out
        finally:
            self.out = saved

    def bind_last(self, pod: CPod, node: CNode) -> bool:
        """Bind `pod` to `node` after every pod placed so far if every filter passes it there (it
        then stays, and counts for the next); whether it did."""
        saved, self.out = self.out, []
        self.phases[pod.key] = max(self.phases.values(), default=0) + 1
        node.pods.append(pod)
        node.new_pods.append(pod)
        self._count_memo.clear()
        self._carriers = None
        try:
            self._check_resources(node)
            self._check_ports(node)
            self._check_volumes(node)
            self._check_pod(pod, node)
            passed = not self.out
        finally:
            self.out = saved
        if not passed:
            node.pods.remove(pod)
            node.new_pods.remove(pod)
            del self.phases[pod.key]
            self._count_memo.clear()
            self._carriers = None
        return passed

    # -- limits

    def check_limits(self, plan: Any, usage: Mapping[str, Any]) -> None:
        used: dict[str, dict[str, float]] = defaultdict(dict)
        for name, amount in usage.items():
            used[name] = dict(getattr(amount, "amounts", amount))
        for planned in plan.nodes:
            if planned.options:
                _add(used[planned.provisioner], dict(planned.options[0].capacity.amounts))
        for name, provisioner in self.provisioners.items():
            # Every resource the limits name, a limit of 0 included (Karpenter counts node capacity).
            for resource in sorted(set(provisioner.limited) | set(provisioner.limits.names())):
                limit = provisioner.limits.get(resource)
                if used[name].get(resource, 0.0) > limit + EPS:
                    self.out.append(
                        f"limits: provisioner {name} {resource} {used[name][resource]:g} > limit {limit:g}"
                        " (cheapest options of its planned nodes + usage)"
                    )


def _worst_skew(
    nodes: Sequence[tuple[frozenset, int, bool]], own: int, min_domains: int, values: frozenset[str]
) -> tuple[int, str]:
    """The largest skew any combination of the nodes' states gives the incoming pod.

    `nodes`: (possible (eligible, domain) states, matching pods, is the pod's node). skew =
    count(v) + own - min over eligible domains (0 when fewer than minDomains); see filtering.go.
    """
    if len(values) == 1 and all(len(states) == 1 for states, _, _ in nodes):
        counts: dict[str, int] = defaultdict(int)
        for states, k, _ in nodes:
            eligible, domain = next(iter(states))
            if eligible:
                counts[domain] += k
        (value,) = values
        minimum = min(counts.values()) if counts else math.inf
        if len(counts) < min_domains:
            minimum = 0
        skew = counts.get(value, 0) + own - minimum
        return int(skew) if math.isfinite(
            skew
        ) else -1, f"domain {value}: {counts.get(value, 0)}, min {minimum}"
    here = next(states for states, _, mine in nodes if mine)
    rest = [(states, k) for states, k, mine in nodes if not mine]
    k_here = next(k for _, k, mine in nodes if mine)
    worst, witness = own, "no worse combination"
    domains = {d for states, _ in rest for e, d in states if e}
    for v in sorted(values):
        base = k_here if (True, v) in here else 0
        # (a) count(v) - count(d*) for some eligible domain d* != v: min <= count(d*).
        for target in sorted(domains - {v}):
            total, losses, anchored = base, [], False
            for states, k in rest:
                gains = []
                if (True, v) in states:
                    gains.append(k)
                if any(s not in ((True, v), (True, target)) for s in states):
                    gains.append(0)
                lose = -k if (True, target) in states else None
                best = max([*gains, *([lose] if lose is not None else [])])
                total += best
                if lose is not None:
                    if best == lose:
                        anchored = True
                    else:
                        losses.append(best - lose)
            if not anchored:
                if not losses:
                    continue
                total -= min(losses)
            if total + own > worst:
                worst, witness = total + own, f"{v} vs {target}"
        # (b) fewer than minDomains eligible domains: min is 0 (greedy, so only a lower bound on the worst).
        if min_domains > 1:
            count, seen = base, ({v} if (True, v) in here else set())
            forced = []
            for states, k in rest:
                if (True, v) in states:
                    count += k
                    seen.add(v)
                elif any(not e for e, _ in states):
                    continue
                else:
                    forced.append({d for _, d in states})
            for options in sorted(forced, key=len):
                if not options & seen:
                    seen.add(min(options))
            if len(seen) < min_domains and count + own > worst:
                worst, witness = count + own, f"{v} with {len(seen)} domain(s) < minDomains {min_domains}"
    return worst, witness


def _breakable(node: CNode, values: frozenset[str], holders: Sequence[CNode], key: str) -> bool:
    """Whether some combination of worlds leaves `node`'s domain for `key` without any holder."""
    if any(m is node for m in holders):
        return False
    pinned = {
        next(iter(m.values(key)[0])) for m in holders if len(m.values(key)[0]) == 1 and not m.values(key)[1]
    }
    return any(v not in pinned for v in values)


def violations(
    new_pods: Sequence[Mapping[str, Any]],
    existing_nodes: Sequence[Any],
    plan: Any,
    provisioners: Sequence[Any],
    catalog: Sequence[Any] = (),
    *,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    daemonsets: Sequence[Mapping[str, Any]] = (),
    unavailable: Iterable[tuple[str, str, str]] = (),
    usage: Mapping[str, Any] | None = None,
    claims: Mapping[str, str] | None = None,
) -> list[str]:
    """Every kube-scheduler rule the plan's final state breaks, one line each (empty: none).
    `claims`: namespace/claim -> CSI driver of the claims whose volumes are known."""
    cluster = _Cluster(
        new_pods, existing_nodes, plan, provisioners, namespaces, daemonsets, unavailable, claims
    )
    cluster.check_nodes()
    cluster.check_pods()
    cluster.check_limits(plan, usage or {})
    return cluster.out


# -- unschedulable pods ---------------------------------------------------------------------------


def reason_category(item: Any) -> str:
    """topology | limits | unmodelled | daemonset | other, from the Unschedulable record."""
    if getattr(item, "unmodelled", False):
        return "unmodelled"
    # Label keys such as topology.kubernetes.io/zone name no topology rule.
    reason = item.reason.lower().replace("topology.kubernetes.io/", "")
    if "daemonset" in reason:
        return "daemonset"
    if "limit" in reason:
        return "limits"
    if any(word in reason for word in ("affinity", "topology", "spread")):
        return "topology"
    return "other"


def _explained_by_topology(pod: CPod, cluster: _Cluster) -> bool:
    """The pod has a constraint (own or another pod's anti-affinity) that may keep it off a lone node."""
    if pod.affinity or pod.anti:
        return True
    if any(s.when_unsatisfiable == "DoNotSchedule" and s.selector is not None for s in pod.spreads):
        return True
    others = [q for m in cluster.nodes for q in m.pods] + list(cluster.new.values())
    return any(q is not pod and any(cluster.term_selects(t, pod) for t in q.anti) for q in others)


def _holding_type(
    pod: CPod, provisioner: Any, catalog: Sequence[Any], cluster: _Cluster, room: dict
) -> str | None:
    """An instance type of `provisioner` that holds `pod` alone under every rule, or None."""
    if pod.untolerated(_taints(provisioner.taints)):
        return None
    certain = {_key(k): str(v) for k, v in provisioner.labels.items()}
    certain[PROVISIONER_NAME] = provisioner.name
    certain[HOSTNAME] = "hypothetical-node"
    custom = set()
    for req in provisioner.requirements:
        key = _key(req.key)
        if key in VARYING:
            continue
        if req.operator == "In" and len(req.values) == 1:
            certain.setdefault(key, req.values[0])
        else:
            custom.add(key)
    if custom & pod.node_keys():
        return None  # how such a node is labelled is a solver choice: do not judge it
    needs_keys = {s.topology_key for s in pod.spreads if s.when_unsatisfiable == "DoNotSchedule"}
    gpus = {g for g in GPU_NAMES if pod.requests.get(g, 0) > 0}
    named = {pod.node_selector.get(INSTANCE_TYPE)} | {
        v
        for r in provisioner.requirements
        if _key(r.key) == INSTANCE_TYPE and r.operator == "In"
        for v in r.values
    }
    need = dict(pod.requests)
    need["pods"] = need.get("pods", 0.0) + 1
    for instance_type in catalog:
        if provisioner.kubelet.max_pods:
            instance_type = instance_type.with_max_pods(provisioner.kubelet.max_pods)
        if instance_type.burstable and instance_type.name not in named:
            continue
        has = {g for g in GPU_NAMES if instance_type.gpus.get(g) > 0}
        if (gpus and not gpus <= has) or (not gpus and has):
            continue
        if any(room[r] is not None and instance_type.capacity.get(r) > room[r] + EPS for r in room):
            continue
        for offering in instance_type.offerings:
            if (
                not offering.available
                or (instance_type.name, offering.zone, offering.capacity_type) in cluster.unavailable
            ):
                continue
            world = {
                **certain,
                ZONE: offering.zone,
                CAPACITY_TYPE: offering.capacity_type,
                INSTANCE_TYPE: instance_type.name,
                ARCH: instance_type.arch,
                OS: instance_type.os,
            }
            if not all(
                node_expr_matches((_key(r.key), r.operator, tuple(r.values)), world)
                for r in provisioner.requirements
            ):
                continue
            if not pod.matches_node(world) or not all(k in world for k in needs_keys):
                continue
            free = dict(instance_type.allocatable.amounts)
            for daemon in cluster.daemons:
                if daemon.untolerated(_taints(provisioner.taints)) is None and daemon.matches_node(world):
                    for name, amount in daemon.requests.items():
                        free[name] = free.get(name, 0.0) - amount
                    free["pods"] = free.get("pods", 0.0) - 1
            if all(amount <= free.get(name, 0.0) + EPS for name, amount in need.items()):
                return f"{instance_type.name} in {offering.zone}/{offering.capacity_type}"
    return None


def _resources(planned: Any) -> set[str]:
    return {r for o in planned.options for r in o.capacity.amounts}


def unjustified_unschedulable(
    new_pods: Sequence[Mapping[str, Any]],
    existing_nodes: Sequence[Any],
    plan: Any,
    provisioners: Sequence[Any],
    catalog: Sequence[Any],
    *,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    daemonsets: Sequence[Mapping[str, Any]] = (),
    unavailable: Iterable[tuple[str, str, str]] = (),
    usage: Mapping[str, Any] | None = None,
    claims: Mapping[str, str] | None = None,
) -> list[str]:
    """Pods reported unschedulable (not for topology, limits or unmodelled rules) that some instance
    type of an applicable Provisioner could hold alone, within the Provisioner's limits."""
    cluster = _Cluster(
        new_pods, existing_nodes, plan, provisioners, namespaces, daemonsets, unavailable, claims
    )
    used: dict[str, dict[str, float]] = defaultdict(dict)
    for name, amount in (usage or {}).items():
        used[name] = dict(getattr(amount, "amounts", amount))
    for planned in plan.nodes:
        # Any option may be launched: charge the largest, so "room" is never overstated.
        _add(
            used[planned.provisioner],
            {r: max((o.capacity.get(r) for o in planned.options), default=0.0) for r in _resources(planned)},
        )
    out = []
    for item in plan.unschedulable:
        category = reason_category(item)
        if category in ("limits", "unmodelled", "daemonset"):
            continue
        pod = cluster.new.get(item.pod.key)
        if pod is None or pod.owner_kind == "DaemonSet" or pod.unmodelled:
            continue
        if _explained_by_topology(pod, cluster):
            continue
        wanted = pod.node_selector.get(PROVISIONER_NAME)
        for provisioner in sorted(provisioners, key=lambda p: (-p.weight, p.name)):
            if wanted and provisioner.name != wanted:
                continue
            room: dict[str, float | None] = {}
            for resource in set(provisioner.limited) | set(provisioner.limits.names()):
                room[resource] = provisioner.limits.get(resource) - used[provisioner.name].get(resource, 0.0)
            found = _holding_type(pod, provisioner, catalog, cluster, room)
            if found:
                out.append(
                    f"unschedulable: {pod.key} reported as '{item.reason}' ({category}) but {found} of"
                    f" provisioner {provisioner.name} holds it alone"
                )
                break
    return out


def stricter_than_scheduler(
    new_pods: Sequence[Mapping[str, Any]],
    existing_nodes: Sequence[Any],
    plan: Any,
    provisioners: Sequence[Any],
    catalog: Sequence[Any] = (),
    **options: Any,
) -> list[str]:
    """Pods reported unschedulable that kube-scheduler would bind: bound last, after every pod the
    plan places (and the pods found so before it, so pods that exclude each other are not all
    counted), to a node of the plan or a schedulable node of the cluster, the pod passes every
    filter in every world of that node (resources, ports, volumes, taints, node affinity, its own
    spread and (anti-)affinity, and the required anti-affinity of the pods there). Pods with rules
    the checker does not evaluate (unmodelled, DaemonSet pods) are not judged. `options`: the
    keyword arguments of `violations` (usage is not read)."""
    options.pop("usage", None)
    cluster = _Cluster(new_pods, existing_nodes, plan, provisioners, **options)
    hosts = [n for n in cluster.nodes if n.schedulable and cluster.node_clean(n)]
    out = []
    for item in plan.unschedulable:
        pod = cluster.new.get(item.pod.key)
        if (
            pod is None
            or pod.unmodelled
            or pod.owner_kind == "DaemonSet"
            or getattr(item, "unmodelled", False)
        ):
            continue
        host = next((n for n in hosts if cluster.bind_last(pod, n)), None)
        if host is not None:
            out.append(
                f"stricter: {pod.key} reported as '{item.reason}' but kube-scheduler would bind it last"
                f" to {host.name}"
            )
    return out


EBS_CSI = "ebs.csi.aws.com"


@functools.cache
def ebs_attach_limit(type_name: str) -> int:
    """What the EBS CSI node plugin (aws-ebs-csi-driver v1.30 getVolumesLimit) reports for a new node
    of the type, written here from the driver's rules, not the solver's: 28 slots on Nitro shared
    with ENIs (two attached when the plugin starts) and NVMe instance-store disks, 39 on Xen, the
    dedicated-slot families' own table; less the root volume; at least 1."""
    raw = next(t for t in raw_types() if t["InstanceType"] == type_name)
    family, _, size = type_name.partition(".")
    if family in {"m7i", "m7i-flex", "m7a", "c7i", "c7a", "r7a", "r7i", "r7iz", "u7i"}:
        table = {
            **{"16xlarge": 48, "24xlarge": 64, "32xlarge": 88, "48xlarge": 128},
            **{"metal-16xl": 31, "metal-24xl": 31, "metal-32xl": 79, "metal-48xl": 79},
        }
        return max(table.get(size, 32) - 1, 1)
    if raw.get("Hypervisor") != "nitro" and not raw.get("BareMetal"):
        return 38
    disks = sum(d.get("Count", 0) for d in (raw.get("InstanceStorageInfo") or {}).get("Disks") or ())
    return max(28 - 2 - disks - 1, 1)
