"""Pod -> the Provisioner and node requirements its new node would have, and the domains it could reach.

`resolve` tries Provisioners by weight, the pod's ORed required node-affinity terms in order, and
applies its preferred node-affinity terms heaviest first, each kept only if some instance type
still holds the pod (so one impossible preference never discards the others). `domains` tells
which values of a label key a new node could take for a pod, which topology rules on that key
count as its possible domains.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Requirement
from extender.api.resources import PODS, Resources
from extender.scheduling import attach
from extender.scheduling.candidates import (
    CandidateCache,
    CandidateSet,
    ProvisionerView,
    Vector,
    fits,
    gpu_kinds,
    vector,
)
from extender.scheduling.constraints import affinity_terms, describe_taint, pod_terms, preferences
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.requirements import Requirements
from extender.scheduling.shape import RESOLUTION, Shapes, domains_grouping

Resolution = tuple[ProvisionerView | None, Requirements, Requirements | None, str]


def describe_requests(requests: Resources) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(requests.amounts.items())) + "}"


class Resolver:
    def __init__(
        self,
        views: Sequence[ProvisionerView],
        cache: CandidateCache,
        dims: Sequence[str],
        shapes: Shapes | None = None,
    ) -> None:
        self.views = views
        self.shapes = shapes or Shapes()
        self.cache = cache
        self.dims = dims
        self.notes: list[str] = []
        self._domains: dict[Hashable, frozenset[str]] = {}
        #: pod key -> `request`: asked per class, per resolution and per domain question.
        self._requests: dict[str, Vector] = {}
        #: (shape less identity and inter-pod rules, extra, excluded) -> `_resolve`.
        self._resolved: dict[Hashable, tuple[Resolution, list[str]]] = {}

    def request(self, pod: Pod) -> Vector:
        """The pod's request over the batch's dimensions: its resources, itself as one pod, and an
        attachment per distinct CSI volume."""
        if (found := self._requests.get(pod.key)) is None:
            volumes = {attach.dimension(driver): count for driver, count in pod.csi_volumes}
            found = self._requests[pod.key] = vector(
                pod.requests + Resources({PODS: 1, **volumes}), self.dims
            )
        return found

    def holds(self, view: ProvisionerView, reqs: Requirements, request: Vector, gpus: frozenset[str]) -> bool:
        return any(fits(request, c.entry.alloc) for c in self.cache.lookup(view, reqs, gpus).candidates)

    def _views(self, pod: Pod, excluded: Collection[str]) -> list[ProvisionerView]:
        wanted = wk.owner_of(pod.node_selector)
        return [
            v
            for v in self.views
            if (not wanted or v.provisioner.selected_by(pod.node_selector))
            and v.provisioner.name not in excluded
        ]

    def resolve(
        self, pod: Pod, extra: Requirements | None = None, excluded: Collection[str] = ()
    ) -> Resolution:
        """The Provisioner view, the pod's node-affinity term, the node requirements with the kept
        preferences, and why no Provisioner takes it (when none does). Pods alike but for their
        labels and inter-pod rules resolve alike: once per round (many classes differ only there)."""
        extra = extra or Requirements()
        key = (self.shapes(pod).key(RESOLUTION), extra, tuple(sorted(excluded)))
        if (found := self._resolved.get(key)) is None:
            found = self._resolved[key] = self._resolve(pod, extra, excluded)
        resolution, dropped = found
        if dropped:
            self.notes.append(
                f"Relaxed preferred node affinity of pod {pod.key}, removing: {'; '.join(dropped)}"
            )
        return resolution

    def _resolve(
        self, pod: Pod, extra: Requirements, excluded: Collection[str]
    ) -> tuple[Resolution, list[str]]:
        """`resolve`, and the preferred terms it dropped."""
        request = self.request(pod)
        gpus = gpu_kinds(pod.requests)
        wanted = wk.owner_of(pod.node_selector)
        views = self._views(pod, excluded)
        reasons: list[str] = []
        terms = [t.intersect(extra) for t in pod_terms(pod)]
        prefs = preferences(pod)
        # (view, term, base) in order: every Provisioner and ORed term that can take the pod.
        usable: list[tuple[ProvisionerView, Requirements, Requirements]] = []
        for view in views:
            if taint := pod.tolerates(view.provisioner.taints):
                reasons.append(
                    f"provisioner/{view.provisioner.name}: did not tolerate {describe_taint(taint)}"
                )
                continue
            if missing := view.unlisted(pod.requests):
                reasons.append(
                    f"provisioner/{view.provisioner.name}: no instance type the pod may use has"
                    f" {', '.join(missing)} (a resource the node does not list has allocatable 0)"
                )
                continue
            for term in terms:
                base = view.requirements.intersect(term)
                if conflict := base.conflict(view.keys):
                    reasons.append(f"provisioner/{view.provisioner.name}: {conflict}")
                    continue
                if not self.holds(view, base, request, gpus):
                    reasons.append(
                        f"provisioner/{view.provisioner.name}: no instance type satisfies"
                        f" {base.describe() or 'the'} requirements"
                        f" and holds {describe_requests(pod.requests)}"
                    )
                    continue
                usable.append((view, term, base))
                if not prefs:
                    break
            if usable and not prefs:
                break
        if usable:
            view, term, base = self._preferred(usable, prefs, request, gpus)
            reqs, dropped = base, []
            for weight, pref, raw in prefs:
                narrowed = reqs.intersect(pref)
                if narrowed.conflict(view.keys) is None and self.holds(view, narrowed, request, gpus):
                    reqs = narrowed
                else:
                    dropped.append(
                        f"weight {weight}: "
                        + ", ".join(f"{r.key} {r.operator} {list(r.values)}" for r in raw)
                    )
            return (view, term, reqs, ""), dropped
        if wanted and not views:
            reasons.append(f"provisioner {wanted} not found or at its limits")
        return (None, terms[0], None, "; ".join(dict.fromkeys(reasons)) or "no provisioner"), []

    def _preferred(
        self,
        usable: Sequence[tuple[ProvisionerView, Requirements, Requirements]],
        prefs: Sequence[tuple[int, Requirements, tuple[Requirement, ...]]],
        request: Vector,
        gpus: frozenset[str],
    ) -> tuple[ProvisionerView, Requirements, Requirements]:
        """Where the pod goes among the Provisioners and terms that take it: the first that meets its
        heaviest preferred term, else the next heaviest, else the first. Karpenter treats the
        heaviest preference as a requirement across every Provisioner and relaxes it only when
        none can meet it (scheduling/preferences.go); within the one chosen, karpy then keeps every
        lighter preference that still fits."""
        for _, pref, _ in prefs:
            for view, term, base in usable:
                narrowed = base.intersect(pref)
                if narrowed.conflict(view.keys) is None and self.holds(view, narrowed, request, gpus):
                    return view, term, base
        return usable[0]

    def domains(
        self,
        pod: Pod,
        key: str,
        extra: Requirements,
        *,
        fit: bool,
        excluded: Collection[str] = (),
        honor_affinity: bool = True,
        honor_taints: bool = True,
    ) -> frozenset[str]:
        """Values of `key` a new node could carry for the pod.

        `fit=True`: nodes the pod can really land on (tolerated, some type holds it). `fit=False`:
        the domains a topology spread constraint counts, a superset used for spread minima: nodes
        whose labels the pod's node affinity accepts (`honor_affinity`, nodeAffinityPolicy) and
        whose taints it tolerates (`honor_taints`, nodeTaintsPolicy), whatever their room.
        """
        honor_affinity, honor_taints = honor_affinity or fit, honor_taints or fit
        grouping = domains_grouping(affinity=honor_affinity, fit=fit, taints=honor_taints)
        memo = (
            self.shapes(pod).key(grouping),
            key,
            extra,
            fit,
            honor_affinity,
            honor_taints,
            tuple(sorted(excluded)),
        )
        if (found := self._domains.get(memo)) is not None:
            return found
        request, gpus = self.request(pod), gpu_kinds(pod.requests)
        values: set[str] = set()
        for view in self._views(pod, excluded):
            if honor_taints and pod.tolerates(view.provisioner.taints):
                continue
            terms = (pod_terms(pod) if fit else affinity_terms(pod)) if honor_affinity else [Requirements()]
            for term in terms:
                reqs = view.requirements.intersect(term).intersect(extra)
                if reqs.conflict(view.keys):
                    continue
                values |= self._values(view, reqs, key, request if fit else None, gpus if fit else None)
        found = self._domains[memo] = frozenset(values)
        return found

    def may_share(self, counted: Pod, pod: Pod, *, honor_affinity: bool, honor_taints: bool) -> bool:
        """Whether some Provisioner could launch a node for `counted` that `pod`'s spread would count."""
        for view in self.views:
            if counted.tolerates(view.provisioner.taints) or (
                honor_taints and pod.tolerates(view.provisioner.taints)
            ):
                continue
            for term in pod_terms(counted):
                reqs = view.requirements.intersect(term)
                for own in affinity_terms(pod) if honor_affinity else [Requirements()]:
                    if reqs.intersect(own).conflict(view.keys) is None:
                        return True
        return False

    def _values(
        self,
        view: ProvisionerView,
        reqs: Requirements,
        key: str,
        request: Vector | None,
        gpus: frozenset[str] | None,
    ) -> set[str]:
        if (
            key in (wk.ZONE, wk.CAPACITY_TYPE, wk.INSTANCE_TYPE, wk.ARCH, wk.OS)
            or key in wk.INSTANCE_TYPE_LABELS
        ):
            found: set[str] = set()
            kinds = [gpus] if gpus is not None else [frozenset(), *view.accelerator_kinds]
            for kind in kinds:
                candidates = self.cache.lookup(view, reqs, kind)
                every = self._every(candidates, reqs, key)
                for c in candidates.candidates:
                    if request is not None and not fits(request, c.entry.alloc):
                        continue
                    found |= self._offered(c.entry.type, reqs, key)
                    if found >= every:
                        break  # nothing more to find (most pods fit most types)
            return found
        # Labels the Provisioner sets: its nodes carry them when some type there holds the pod.
        if request is not None and not self.holds(view, reqs, request, gpus or frozenset()):
            return set()
        if key in wk.OWNER_LABELS:
            return {view.provisioner.name} if key == view.provisioner.owner_label else set()
        value_set = reqs.get(key)
        if key in view.keys and not value_set.complement:
            return set(value_set.values)
        return set()

    def _every(self, candidates: CandidateSet, reqs: Requirements, key: str) -> set[str]:
        # The set is the one for `reqs` and the unavailable offerings: its memo may depend on them.
        return candidates.remember(
            ("every", key),
            lambda: set().union(*(self._offered(c.entry.type, reqs, key) for c in candidates.candidates)),
        )

    def _offered(self, instance_type: InstanceType, reqs: Requirements, key: str) -> set[str]:
        if key in (wk.INSTANCE_TYPE, wk.ARCH, wk.OS) or key in wk.INSTANCE_TYPE_LABELS:
            # A type without the label (no GPU, no NVMe) offers no domain on that key.
            value = instance_type.labels().get(key)
            return {value} if value is not None else set()
        result = set()
        for o in instance_type.offerings:
            if not o.available or (instance_type.name, o.zone, o.capacity_type) in self.cache.unavailable:
                continue
            if reqs.allows(wk.ZONE, o.zone) and reqs.allows(wk.CAPACITY_TYPE, o.capacity_type):
                result.add(o.zone if key == wk.ZONE else o.capacity_type)
        return result
