"""The parts of a v1 Pod that scheduling and the lifecycle need, parsed once from API JSON (camelCase).

`Pod.from_manifest` is the only entry: the provisioning worker (pending pods), `karpy plan`
(YAML streams) and DaemonSet templates all go through it, so every caller sees the same
requests arithmetic and the same `PodError(path, message)` naming the object and field.
`Pod.from_live` is its tolerant form for pods that run whatever karpy thinks of their spec (the
lifecycle drains and counts them, the bound-pod index counts them): it never raises on a mapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extender.api import labels as wk
from extender.api.affinity import (
    DO_NOT_SCHEDULE,
    HONOR,
    IGNORE,
    SCHEDULE_ANYWAY,
    HostPort,
    LabelSelector,
    PodAffinityTerm,
    TopologySpread,
    WeightedPodAffinityTerm,
)
from extender.api.meta import parse_time_or_none
from extender.api.provisioner import Requirement, Taint
from extender.api.quantity import QuantityError
from extender.api.resources import Resources

ZONE_KEY = wk.ZONE
HOSTNAME_KEY = wk.HOSTNAME


RequiredTerms = tuple[tuple[Requirement, ...], ...]
#: Claim name -> the ORed node-selector terms its volume needs (`()` = none).
VolumeTopology = Mapping[str, RequiredTerms]
MAX_VOLUME_TERMS = 16


class PodError(ValueError):
    """A pod manifest karpy cannot use; `path` is e.g. "default/web-0 spec.containers[0].resources"."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True)
class PreferredTerm:
    weight: int
    requirements: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Pod:
    """Slotted: the bound-pod index holds one per pod of the cluster (extender/cluster/boundpods.py)."""

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requests: Resources = field(default_factory=Resources)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # Required node affinity: the terms are ORed, the requirements inside one term ANDed.
    required_terms: tuple[tuple[Requirement, ...], ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpread, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    #: ORed node-selector terms the pod's volumes need (PV node affinity, class allowedTopologies).
    #: Where the pod may run, but not node affinity: topology spread's nodeAffinityPolicy ignores it.
    volume_terms: tuple[tuple[Requirement, ...], ...] = ()
    #: Rules karpy does not model ("<field path>: why"); such a pod is neither planned nor bound.
    unmodelled: tuple[str, ...] = ()
    #: Rules karpy leaves to kube-scheduler ("<field path>: why"): the pod is planned on every rule
    #: karpy evaluates, its room is reserved on the node launched for it, and kube-scheduler binds it
    #: (its binding does what karpy's would skip: volume binding, dynamic resource allocation).
    deferred: tuple[str, ...] = ()
    owner_kind: str = ""
    owner_name: str = ""
    node_name: str = ""
    priority_class_name: str = ""
    #: The kind of every owner reference (`owner_kind` is the controller's, or the first owner's).
    owner_kinds: frozenset[str] = frozenset()
    #: status.phase.
    phase: str = ""
    #: metadata.deletionTimestamp; None while the pod is not being deleted.
    deleted_at: datetime | None = None
    #: spec.terminationGracePeriodSeconds (the API server defaults it to 30); None when absent.
    grace_seconds: int | None = None
    #: Why its spec cannot be read (a PodError), set by `from_live` only: such a pod is counted,
    #: drained and evicted, never planned or bound; only identity, owners, phase, deletion,
    #: priority, annotations and tolerations are read.
    unreadable: str = ""
    #: (CSI driver, claim name) of each distinct claim of a CSI volume, for the drivers' attach
    #: limits (kube-scheduler NodeVolumeLimits counts unique volumes per node, so a claim pods
    #: share is one attachment where they meet); resolved with the claims by the edge.
    csi_claims: tuple[tuple[str, str], ...] = ()
    #: Names of the pod's PersistentVolumeClaims (generic ephemeral volumes' included), so the
    #: volumes a node's pods hold can be counted against its CSI attach limits.
    claims: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def csi_volumes(self) -> tuple[tuple[str, int], ...]:
        """(CSI driver, distinct volumes) of the pod's claims."""
        counts: dict[str, int] = {}
        for driver, _ in self.csi_claims:
            counts[driver] = counts.get(driver, 0) + 1
        return tuple(sorted(counts.items()))

    def owned_by(self, kind: str) -> bool:
        """Karpenter's IsOwnedBy: any owner reference of `kind`, the controller or not."""
        return kind == self.owner_kind or kind in self.owner_kinds

    @property
    def counts_pods(self) -> bool:
        """A required rule of the pod counts other pods: a topology spread, pod affinity or
        anti-affinity (where it may go depends on more than a node's room)."""
        return bool(self.topology_spread or self.pod_affinity or self.pod_anti_affinity)

    @property
    def is_daemonset(self) -> bool:
        return self.owned_by("DaemonSet")

    @property
    def is_static(self) -> bool:
        """A kubelet's static pod (owned by its Node), or its mirror."""
        return self.owned_by("Node") or wk.MIRROR_POD_ANNOTATION in self.annotations

    @property
    def node_bound(self) -> bool:
        """DaemonSet and static pods live and die with their node: never evicted, never moved, and
        never what keeps a node from being empty."""
        return self.is_daemonset or self.is_static

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def deleting(self) -> bool:
        return self.deleted_at is not None

    @property
    def is_critical(self) -> bool:
        return self.priority_class_name in wk.CRITICAL_PRIORITY_CLASSES

    @property
    def do_not_evict(self) -> bool:
        return self.annotations.get(wk.DO_NOT_EVICT_ANNOTATION) == "true"

    @property
    def tolerates_unschedulable(self) -> bool:
        """A pod that tolerates the cordon taint would be rescheduled right back: Karpenter leaves it.
        Wider than `tolerates` (an empty-key Exists of any effect, any value of the key counts)."""
        for tol in self.tolerations:
            if tol.operator == "Exists" and not tol.key:
                return True
            if tol.key == wk.UNSCHEDULABLE_TAINT_KEY and tol.effect in ("", "NoSchedule"):
                return True
        return False

    def tolerates(self, taints: Iterable[Taint]) -> Taint | None:
        """The first NoSchedule/NoExecute taint this pod does not tolerate, or None."""
        for taint in taints:
            if taint.effect == "PreferNoSchedule":
                continue
            if not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any], volumes: VolumeTopology | None = None) -> Pod:
        """Parse a v1 Pod (API JSON); raises PodError naming the pod and the field path.

        `volumes` maps the pod's claim names to the node-selector terms (ORed) their volumes need,
        as the edge resolved them (PersistentVolume node affinity, StorageClass allowedTopologies);
        `()` = no constraint. A pod with a claim not in it is unmodelled: karpy does not guess a
        volume's zone.
        """
        return _PodParser(obj, volumes).parse()

    @classmethod
    def from_live(cls, obj: Mapping[str, Any]) -> Pod:
        """A pod that exists (bound, running, being drained): `from_manifest`, or, for a spec karpy
        cannot read, a pod with what the lifecycle needs and the error in `unreadable`."""
        try:
            return cls.from_manifest(obj)
        except PodError as err:
            return _PodParser(obj, strict=False).identity(unreadable=str(err))


class _PodParser:
    def __init__(
        self, obj: Mapping[str, Any], volumes: VolumeTopology | None = None, *, strict: bool = True
    ) -> None:
        if not isinstance(obj, Mapping):
            raise PodError("pod", "must be an object")
        #: Not strict: a field of the wrong type reads as absent instead of raising.
        self.strict = strict
        self.obj = obj
        self.volumes = volumes or {}
        meta = obj.get("metadata") or {}
        self.namespace = str(meta.get("namespace") or "default")
        self.name = str(meta.get("name") or meta.get("generateName") or "")
        self.where = f"pod {self.namespace}/{self.name or '<unnamed>'}"
        self.labels: dict[str, str] = {}
        self.unmodelled: list[str] = []
        self.deferred: list[str] = []

    def fail(self, path: str, message: str) -> PodError:
        return PodError(f"{self.where} {path}", message)

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            if not self.strict:
                return {}
            raise self.fail(path, "must be an object")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            if not self.strict:
                return []
            raise self.fail(path, "must be a list")
        return value

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.mapping(value, path).items()}

    def parse(self) -> Pod:
        kind = self.obj.get("kind", "Pod")
        if kind != "Pod":
            raise self.fail("kind", f"expected Pod, got {kind!r}")
        if not self.name:
            raise self.fail("metadata.name", "is required")
        spec = self.mapping(self.obj.get("spec"), "spec")
        known = self.identity_fields()
        self.labels = known["labels"]
        affinity = self.mapping(spec.get("affinity"), "spec.affinity")
        required, preferred = self.node_affinity(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
        pod_affinity = self.mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
        anti_affinity = self.mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
        self.check_unmodelled(spec)
        return Pod(
            **known,
            requests=self.requests(spec),
            node_selector={
                wk.normalize_key(k): v
                for k, v in self.string_map(spec.get("nodeSelector"), "spec.nodeSelector").items()
            },
            required_terms=required,
            volume_terms=self.volume_terms(spec),
            claims=tuple(dict.fromkeys(name for _, name in self.claims(spec))),
            preferred_terms=preferred,
            topology_spread=self.spreads(spec.get("topologySpreadConstraints")),
            pod_affinity=self.pod_terms(pod_affinity, "spec.affinity.podAffinity"),
            pod_anti_affinity=self.pod_terms(anti_affinity, "spec.affinity.podAntiAffinity"),
            preferred_pod_affinity=self.weighted_terms(pod_affinity, "spec.affinity.podAffinity"),
            preferred_pod_anti_affinity=self.weighted_terms(anti_affinity, "spec.affinity.podAntiAffinity"),
            host_ports=self.host_ports(spec),
            unmodelled=tuple(self.unmodelled),
            deferred=tuple(self.deferred),
        )

    def identity(self, unreadable: str) -> Pod:
        return Pod(**self.identity_fields(), unreadable=unreadable)

    def identity_fields(self) -> dict[str, Any]:
        """What the lifecycle reads of every pod: identity, owners, phase, deletion, priority,
        annotations, tolerations (all `from_live` reads of a pod whose spec is unreadable)."""
        meta = self.mapping(self.obj.get("metadata"), "metadata")
        spec = self.mapping(self.obj.get("spec"), "spec")
        owners = self.items(meta.get("ownerReferences"), "metadata.ownerReferences")
        refs = [o for o in owners if isinstance(o, Mapping)]
        controller = next((o for o in refs if o.get("controller")), None)
        controller = controller or (owners[0] if owners and isinstance(owners[0], Mapping) else {})
        status = self.obj.get("status")
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": str(meta.get("uid") or ""),
            "labels": self.string_map(meta.get("labels"), "metadata.labels"),
            "annotations": self.string_map(meta.get("annotations"), "metadata.annotations"),
            "tolerations": self.tolerations(spec.get("tolerations")),
            "owner_kind": str(controller.get("kind") or ""),
            "owner_name": str(controller.get("name") or ""),
            "node_name": str(spec.get("nodeName") or ""),
            "priority_class_name": str(spec.get("priorityClassName") or ""),
            "owner_kinds": frozenset(str(o.get("kind") or "") for o in refs),
            "phase": str(status.get("phase") or "") if isinstance(status, Mapping) else "",
            "deleted_at": parse_time_or_none(meta.get("deletionTimestamp")),
            "grace_seconds": _int_or_none(spec.get("terminationGracePeriodSeconds")),
        }

    def container_requests(self, container: Any, path: str) -> Resources:
        container = self.mapping(container, path)
        resources = self.mapping(container.get("resources"), f"{path}.resources")
        requests = self.mapping(resources.get("requests"), f"{path}.resources.requests")
        limits = self.mapping(resources.get("limits"), f"{path}.resources.limits")
        # Kubernetes defaults a missing request to the limit (that is how GPU pods usually ask).
        merged = {**limits, **requests}
        amounts = {}
        for name, raw in merged.items():
            field_path = f"{path}.resources.{'requests' if name in requests else 'limits'}.{name}"
            try:
                amounts[name] = Resources.parse({name: raw}).get(name)
            except QuantityError as err:
                raise self.fail(field_path, str(err)) from err
        # Only a flag for kube-scheduler's extender call (managedResources, ignoredByScheduler): no
        # node offers it, and kube-scheduler's NodeResourcesFit ignores it too.
        amounts.pop(wk.GUARDED_RESOURCE, None)
        return Resources(amounts)

    def requests(self, spec: Mapping[str, Any]) -> Resources:
        """kube-scheduler's PodRequests: app containers plus running sidecars, or the largest init step.

        Restartable init containers (sidecars, `restartPolicy: Always`) keep running, so they add to
        every later init container and to the app containers; pod-level `spec.resources.requests`
        (when set) replace the containers' sum for the names they list; `spec.overhead` is added.
        """
        apps = Resources()
        for i, container in enumerate(self.items(spec.get("containers"), "spec.containers")):
            apps = apps + self.container_requests(container, f"spec.containers[{i}]")
        sidecars, init_peak = Resources(), Resources()
        for i, container in enumerate(self.items(spec.get("initContainers"), "spec.initContainers")):
            own = self.container_requests(container, f"spec.initContainers[{i}]")
            if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
                sidecars = sidecars + own
                step = sidecars
            else:
                step = own + sidecars
            init_peak = init_peak.maximum(step)
        total = (apps + sidecars).maximum(init_peak)
        pod_level = self.mapping(
            self.mapping(spec.get("resources"), "spec.resources").get("requests"), "spec.resources.requests"
        )
        try:
            if pod_level:
                total = Resources({**total.amounts, **Resources.parse(pod_level).amounts})
        except QuantityError as err:
            raise self.fail("spec.resources.requests", str(err)) from err
        overhead = self.mapping(spec.get("overhead"), "spec.overhead")
        try:
            return total + Resources.parse(overhead)
        except QuantityError as err:
            raise self.fail("spec.overhead", str(err)) from err

    def host_ports(self, spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
        result = []
        for i, container in enumerate(self.items(spec.get("containers"), "spec.containers")):
            container = self.mapping(container, f"spec.containers[{i}]")
            for j, port in enumerate(self.items(container.get("ports"), f"spec.containers[{i}].ports")):
                port = self.mapping(port, f"spec.containers[{i}].ports[{j}]")
                number = port.get("hostPort")
                if not number:
                    continue
                if not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 65536:
                    raise self.fail(
                        f"spec.containers[{i}].ports[{j}].hostPort", "must be an integer in 1..65535"
                    )
                result.append(
                    HostPort(str(port.get("protocol") or "TCP"), str(port.get("hostIP") or ""), number)
                )
        return tuple(result)

    def claims(self, spec: Mapping[str, Any]) -> list[tuple[int, str]]:
        """(volume index, claim name) of persistent and generic ephemeral volumes."""
        result = []
        for i, volume in enumerate(self.items(spec.get("volumes"), "spec.volumes")):
            if not isinstance(volume, Mapping):
                continue
            if isinstance(volume.get("persistentVolumeClaim"), Mapping):
                result.append((i, str(volume["persistentVolumeClaim"].get("claimName") or "")))
            elif volume.get("ephemeral"):
                # Kubernetes names a generic ephemeral volume's claim <pod>-<volume>.
                result.append((i, f"{self.name}-{volume.get('name') or ''}"))
        return result

    def volume_terms(self, spec: Mapping[str, Any]) -> RequiredTerms:
        """AND the ORed terms of every volume (a cross product)."""
        terms: list[tuple[Requirement, ...]] = [()]
        for _, claim in self.claims(spec):
            if options := self.volumes.get(claim):
                terms = [(*t, *v) for t in terms for v in options]
        if len(terms) > MAX_VOLUME_TERMS:
            self.unmodelled.append(f"spec.volumes: {len(terms)} ORed node terms from the volumes")
            return ()
        return () if terms == [()] else tuple(terms)

    def check_unmodelled(self, spec: Mapping[str, Any]) -> None:
        """Rules kube-scheduler applies that karpy's plan does not: the pod is reported, never bound."""
        for i, claim in self.claims(spec):
            if claim not in self.volumes:
                self.unmodelled.append(
                    f"spec.volumes[{i}]: the topology of claim {claim} is unknown (not resolved)"
                )
        if spec.get("resourceClaims"):
            self.deferred.append("spec.resourceClaims: dynamic resource allocation is not evaluated")
        if spec.get("schedulingGates"):
            self.unmodelled.append("spec.schedulingGates: the pod is not ready for scheduling")

    def requirement(self, raw: Any, path: str) -> Requirement:
        raw = self.mapping(raw, path)
        operator = raw.get("operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise self.fail(f"{path}.operator", f"unsupported operator {operator!r}")
        if not raw.get("key"):
            raise self.fail(f"{path}.key", "is required")
        values = tuple(str(v) for v in self.items(raw.get("values"), f"{path}.values"))
        if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise self.fail(f"{path}.values", f"{operator} needs exactly one integer value")
        return Requirement(key=wk.normalize_key(str(raw["key"])), operator=operator, values=values)

    def term(self, raw: Any, path: str) -> tuple[Requirement, ...]:
        raw = self.mapping(raw, path)
        exprs = self.items(raw.get("matchExpressions"), f"{path}.matchExpressions")
        return tuple(self.requirement(e, f"{path}.matchExpressions[{i}]") for i, e in enumerate(exprs))

    def match_fields(self, raw: Any, path: str) -> bool | None:
        """Whether the term has matchFields (kube-scheduler matches them against the node's name,
        which karpy does not choose): left to kube-scheduler when a new node satisfies them (NotIn),
        None when none can (In: it names nodes)."""
        raw = self.mapping(raw, path)
        fields = self.items(raw.get("matchFields"), f"{path}.matchFields")
        for j, item in enumerate(fields):
            expr = self.mapping(item, f"{path}.matchFields[{j}]")
            if expr.get("key") != "metadata.name":
                raise self.fail(f"{path}.matchFields[{j}].key", "only metadata.name is supported")
            if expr.get("operator") not in ("In", "NotIn"):
                raise self.fail(f"{path}.matchFields[{j}].operator", "must be In or NotIn")
            if expr.get("operator") == "In":
                return None
        if fields:
            self.deferred.append(f"{path}.matchFields: the node's name is not evaluated")
        return bool(fields)

    def node_affinity(
        self, raw: Any, path: str
    ) -> tuple[tuple[tuple[Requirement, ...], ...], tuple[PreferredTerm, ...]]:
        raw = self.mapping(raw, path)
        req_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        required = self.mapping(raw.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path)
        terms = self.items(required.get("nodeSelectorTerms"), f"{req_path}.nodeSelectorTerms")
        parsed = []
        for i, raw_term in enumerate(terms):
            term_path = f"{req_path}.nodeSelectorTerms[{i}]"
            term = self.term(raw_term, term_path)
            fields = self.match_fields(raw_term, term_path)
            if fields is None:
                continue  # names nodes: no node karpy launches can be one of them
            # kube-scheduler: an empty term matches no node, so it adds nothing to the ORed terms.
            if term or fields:
                parsed.append(term)
        required_terms = tuple(parsed)
        if terms and not required_terms and not self.unmodelled:
            self.unmodelled.append(
                f"{req_path}.nodeSelectorTerms: no term a new node can match (empty, or naming nodes"
                " with matchFields metadata.name In)"
            )
        pref_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
        preferred = []
        for i, item in enumerate(
            self.items(raw.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)
        ):
            item = self.mapping(item, f"{pref_path}[{i}]")
            weight = item.get("weight", 1)
            if not isinstance(weight, int) or isinstance(weight, bool):
                raise self.fail(f"{pref_path}[{i}].weight", "must be an integer")
            preferred.append(
                PreferredTerm(weight, self.term(item.get("preference"), f"{pref_path}[{i}].preference"))
            )
        return required_terms, tuple(preferred)

    def tolerations(self, raw: Any) -> tuple[Toleration, ...]:
        result = []
        for i, item in enumerate(self.items(raw, "spec.tolerations")):
            item = self.mapping(item, f"spec.tolerations[{i}]")
            operator = str(item.get("operator") or "Equal")
            if operator not in ("Equal", "Exists") and self.strict:
                raise self.fail(f"spec.tolerations[{i}].operator", f"unsupported operator {operator!r}")
            result.append(
                Toleration(
                    key=str(item.get("key") or ""),
                    operator=operator,
                    value=str(item.get("value") or ""),
                    effect=str(item.get("effect") or ""),
                )
            )
        return tuple(result)

    def selector(self, raw: Any, path: str) -> LabelSelector:
        raw = self.mapping(raw, path)
        exprs = self.items(raw.get("matchExpressions"), f"{path}.matchExpressions")
        return LabelSelector(
            match_labels=tuple(
                sorted(self.string_map(raw.get("matchLabels"), f"{path}.matchLabels").items())
            ),
            match_expressions=tuple(
                self.label_requirement(e, f"{path}.matchExpressions[{i}]") for i, e in enumerate(exprs)
            ),
        )

    def optional_selector(self, raw: Any, path: str) -> LabelSelector | None:
        return None if raw is None else self.selector(raw, path)

    def label_requirement(self, raw: Any, path: str) -> Requirement:
        raw = self.mapping(raw, path)
        operator = raw.get("operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise self.fail(f"{path}.operator", f"unsupported operator {operator!r}")
        if not raw.get("key"):
            raise self.fail(f"{path}.key", "is required")
        values = tuple(str(v) for v in self.items(raw.get("values"), f"{path}.values"))
        return Requirement(key=str(raw["key"]), operator=operator, values=values)

    def topology_key(self, raw: Mapping[str, Any], path: str) -> str:
        key = raw.get("topologyKey")
        if not key or not isinstance(key, str):
            raise self.fail(f"{path}.topologyKey", "is required")
        return wk.normalize_key(key)

    def label_keys(self, raw: Mapping[str, Any], name: str, path: str) -> tuple[str, ...]:
        return tuple(str(k) for k in self.items(raw.get(name), f"{path}.{name}"))

    def spreads(self, raw: Any) -> tuple[TopologySpread, ...]:
        result = []
        for i, item in enumerate(self.items(raw, "spec.topologySpreadConstraints")):
            path = f"spec.topologySpreadConstraints[{i}]"
            item = self.mapping(item, path)
            skew = item.get("maxSkew", 1)
            if not isinstance(skew, int) or isinstance(skew, bool) or skew < 1:
                raise self.fail(f"{path}.maxSkew", "must be an integer >= 1")
            when = str(item.get("whenUnsatisfiable") or DO_NOT_SCHEDULE)
            if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                raise self.fail(f"{path}.whenUnsatisfiable", f"unsupported value {when!r}")
            min_domains = item.get("minDomains")
            if min_domains is not None and (
                not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains < 1
            ):
                raise self.fail(f"{path}.minDomains", "must be an integer >= 1")
            policies = {}
            for name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
                policies[name] = str(item.get(name) or default)
                if policies[name] not in (HONOR, IGNORE):
                    raise self.fail(f"{path}.{name}", f"unsupported value {policies[name]!r}")
            selector = self.optional_selector(item.get("labelSelector"), f"{path}.labelSelector")
            keys = self.label_keys(item, "matchLabelKeys", path)
            if selector is not None:
                selector = selector.with_label_keys(self.labels, keys)
            result.append(
                TopologySpread(
                    max_skew=skew,
                    topology_key=self.topology_key(item, path),
                    when_unsatisfiable=when,
                    selector=selector,
                    # minDomains applies to DoNotSchedule only.
                    min_domains=min_domains if when == DO_NOT_SCHEDULE else None,
                    node_affinity_policy=policies["nodeAffinityPolicy"],
                    node_taints_policy=policies["nodeTaintsPolicy"],
                )
            )
        return tuple(result)

    def pod_term(self, raw: Any, path: str) -> PodAffinityTerm:
        item = self.mapping(raw, path)
        selector = self.optional_selector(item.get("labelSelector"), f"{path}.labelSelector")
        if selector is not None:
            selector = selector.with_label_keys(
                self.labels,
                self.label_keys(item, "matchLabelKeys", path),
                self.label_keys(item, "mismatchLabelKeys", path),
            )
        return PodAffinityTerm(
            topology_key=self.topology_key(item, path),
            selector=selector,
            namespaces=tuple(str(n) for n in self.items(item.get("namespaces"), f"{path}.namespaces")),
            namespace_selector=self.optional_selector(
                item.get("namespaceSelector"), f"{path}.namespaceSelector"
            ),
        )

    def pod_terms(self, raw: Mapping[str, Any], path: str) -> tuple[PodAffinityTerm, ...]:
        req_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        items = self.items(raw.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path)
        return tuple(self.pod_term(item, f"{req_path}[{i}]") for i, item in enumerate(items))

    def weighted_terms(self, raw: Mapping[str, Any], path: str) -> tuple[WeightedPodAffinityTerm, ...]:
        pref_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
        result = []
        for i, item in enumerate(
            self.items(raw.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)
        ):
            item = self.mapping(item, f"{pref_path}[{i}]")
            weight = item.get("weight", 1)
            if not isinstance(weight, int) or isinstance(weight, bool):
                raise self.fail(f"{pref_path}[{i}].weight", "must be an integer")
            result.append(
                WeightedPodAffinityTerm(
                    weight, self.pod_term(item.get("podAffinityTerm"), f"{pref_path}[{i}].podAffinityTerm")
                )
            )
        return tuple(result)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
