"""The smallest change that would admit a waiting pod: single edits to the pod or to one pool, each
checked by solving again with the edit applied (never guessed).

Candidates come from the pools' verdicts (explain.py), most relevant pool first, and for each the
edit to the pod before the edit to the pool: add the toleration, drop the pod's requirement on the
key or widen the pool's, drop an unlisted request, drop a pool requirement that narrows its types,
lower minValues to what the types give, raise the limit to what the pod needs, drop a required
anti-affinity term, make a spread constraint ScheduleAnyway. At most MAX_CANDIDATES are solved;
the first that plans is the answer, with the node and $/h the solver gives it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from extender.api import labels as wk
from extender.api.affinity import SCHEDULE_ANYWAY
from extender.api.pod import Pod, Toleration
from extender.api.provisioner import Provisioner, Requirement, Taint
from extender.api.resources import CPU, MEMORY, Resources
from extender.scheduling import explain as rules
from extender.scheduling.explain import Explanation, Placement, Verdict, World, placement
from extender.scheduling.requirements import ValueSet

#: Edits solved at most per pod (each is one solve of the pod with every pool).
MAX_CANDIDATES = 12
#: Keys a pool may narrow its instance types by: dropping one may let a larger type in.
TYPE_KEYS = frozenset({wk.INSTANCE_TYPE, *wk.INSTANCE_TYPE_LABELS})


@dataclass(frozen=True)
class Edit:
    """One change: `target` is "pod" or the pool's "<Kind> <name>"."""

    target: str
    description: str
    pod: Pod
    pool: Provisioner | None = None
    #: The edit as data a tool can apply: {"op": ..., ...} (docs/explain.md lists the ops).
    change: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Remedy:
    edit: Edit
    placement: Placement
    #: Edits solved to find it.
    tried: int

    def describe(self) -> str:
        where = self.placement
        if where.instance_type:
            launch = f"{where.provisioner} would launch {where.instance_type} at ${where.price:.4f}/h"
            return f"{self.edit.description}: {launch}"
        return f"{self.edit.description}: the pod fits on existing node {where.node}"


def smallest_change(
    explanation: Explanation, world: World, *, limit: int = MAX_CANDIDATES
) -> tuple[Remedy | None, int]:
    """The first candidate edit whose solve places the pod, and how many were solved."""
    tried = 0
    seen: set[str] = set()
    for edit in candidates(explanation):
        if edit.description in seen:
            continue
        seen.add(edit.description)
        if tried == limit:
            break
        tried += 1
        edited = world.with_provisioner(edit.pool) if edit.pool is not None else world
        if (where := placement(edited.solve(edit.pod), edit.pod)) is not None:
            return Remedy(edit, where, tried), tried
    return None, tried


def candidates(explanation: Explanation) -> Iterator[Edit]:
    pod = explanation.pod
    for verdict in explanation.ranked():
        if not verdict.admits:
            yield from _edits(pod, verdict)


def _edits(pod: Pod, verdict: Verdict) -> Iterator[Edit]:
    pool, detail, rule = verdict.pool, verdict.detail, verdict.rule
    noun = verdict.pool_name
    if rule == rules.TAINT:
        taint = detail["taint"]
        assert isinstance(taint, Taint)
        yield _tolerate(pod, taint)
    elif rule in (rules.REQUIREMENT, rules.NO_TYPE, rules.VOLUME_ZONE) and "key" in detail:
        key, wants = str(detail["key"]), detail["wants"]
        assert isinstance(wants, ValueSet)
        if rule != rules.VOLUME_ZONE and (dropped := _drop_key(pod, key)) is not None:
            yield dropped
        if detail.get("unset") and not wants.complement and wants.values:
            yield _pool_edit(
                pod,
                pool,
                f"add requirement {key} In [{', '.join(sorted(wants.values))}] to {noun}",
                (*pool.requirements, Requirement(key, "In", tuple(sorted(wants.values)))),
            )
        elif (widened := _widen(pod, pool, key, wants)) is not None:
            yield widened
    elif rule == rules.UNKNOWN_RESOURCE:
        missing = detail["resources"]
        assert isinstance(missing, tuple)
        requests = Resources({k: v for k, v in pod.requests.amounts.items() if k not in missing})
        yield Edit(
            "pod",
            f"drop the pod's request for {', '.join(missing)}",
            replace(pod, requests=requests),
            change={"op": "dropRequests", "resources": list(missing)},
        )
    elif rule == rules.TOO_BIG:
        for req in pool.requirements:
            if wk.normalize_key(req.key) in TYPE_KEYS:
                kept = tuple(r for r in pool.requirements if r is not req)
                yield _pool_edit(
                    pod,
                    pool,
                    f"remove requirement {req.key} {req.operator} {list(req.values)} from {noun}",
                    kept,
                )
    elif rule == rules.MIN_VALUES:
        key, available = str(detail["key"]), int(str(detail["available"]))
        lowered = tuple(
            replace(r, min_values=available or None) if wk.normalize_key(r.key) == key and r.min_values else r
            for r in pool.requirements
        )
        yield _pool_edit(pod, pool, f"lower minValues of {key} on {noun} to {available}", lowered)
    elif rule == rules.LIMIT and "resource" in detail:
        name, target = str(detail["resource"]), float(str(detail["raise_to"]))
        raised = _round_up(name, target)
        limits = Resources({**pool.limits.amounts, name: raised})
        edited = replace(pool, limits=limits, limited=pool.limited | {name})
        shown = rules.amount(name, raised, unit=False)
        yield Edit(
            noun,
            f"raise the {name} limit of {noun} to {shown}",
            pod,
            edited,
            change={"op": "setLimit", "resource": name, "value": shown},
        )
    elif rule == rules.ANTI_AFFINITY:
        for i, term in enumerate(pod.pod_anti_affinity):
            kept_terms = pod.pod_anti_affinity[:i] + pod.pod_anti_affinity[i + 1 :]
            yield Edit(
                "pod",
                f"drop the pod's required anti-affinity term on {term.topology_key}",
                replace(pod, pod_anti_affinity=kept_terms),
                change={"op": "dropAntiAffinity", "index": i},
            )
    elif rule == rules.SPREAD:
        for i, spread in enumerate(pod.topology_spread):
            if spread.hard:
                relaxed = replace(spread, when_unsatisfiable=SCHEDULE_ANYWAY)
                spreads = (*pod.topology_spread[:i], relaxed, *pod.topology_spread[i + 1 :])
                yield Edit(
                    "pod",
                    f"make the pod's topology spread on {spread.topology_key} ScheduleAnyway",
                    replace(pod, topology_spread=spreads),
                    change={"op": "scheduleAnyway", "index": i},
                )


def _tolerate(pod: Pod, taint: Taint) -> Edit:
    toleration = (
        Toleration(taint.key, "Equal", taint.value, taint.effect)
        if taint.value
        else Toleration(taint.key, "Exists", "", taint.effect)
    )
    shown = f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"
    return Edit(
        "pod",
        f"add a toleration for {shown} to the pod",
        replace(pod, tolerations=(*pod.tolerations, toleration)),
        change={"op": "addToleration", "toleration": _toleration_json(toleration)},
    )


def _drop_key(pod: Pod, key: str) -> Edit | None:
    """The pod without its nodeSelector entry and required node-affinity expressions on `key`."""
    selector = {k: v for k, v in pod.node_selector.items() if wk.normalize_key(k) != key}
    terms = tuple(tuple(r for r in term if wk.normalize_key(r.key) != key) for term in pod.required_terms)
    if selector == dict(pod.node_selector) and terms == pod.required_terms:
        return None
    # A term left empty would match every node: drop the affinity altogether then.
    required = () if any(not t for t in terms) else terms
    return Edit(
        "pod",
        f"drop the pod's requirement on {key}",
        replace(pod, node_selector=selector, required_terms=required),
        change={"op": "dropRequirement", "key": key},
    )


def _widen(pod: Pod, pool: Provisioner, key: str, wants: ValueSet) -> Edit | None:
    """The pool's requirements on `key` letting the pod's values in: In gains them, NotIn loses
    them, any other operator is dropped."""
    mine = [r for r in pool.requirements if wk.normalize_key(r.key) == key]
    if not mine or wants.complement or not wants.values:
        return None
    rest = tuple(r for r in pool.requirements if wk.normalize_key(r.key) != key)
    widened: list[Requirement] = []
    for req in mine:
        if req.operator == "In":
            widened.append(replace(req, values=tuple(sorted(set(req.values) | wants.values))))
        elif req.operator == "NotIn" and (kept := tuple(v for v in req.values if v not in wants.values)):
            widened.append(replace(req, values=kept))
    noun = f"{pool.kind} {pool.name}"
    return _pool_edit(
        pod, pool, f"allow {key} {', '.join(sorted(wants.values))} in {noun}", (*rest, *widened)
    )


def _pool_edit(pod: Pod, pool: Provisioner, description: str, requirements: Sequence[Requirement]) -> Edit:
    listed = [
        {
            "key": r.key,
            "operator": r.operator,
            **({"values": list(r.values)} if r.values else {}),
            **({"minValues": r.min_values} if r.min_values is not None else {}),
        }
        for r in requirements
    ]
    return Edit(
        f"{pool.kind} {pool.name}",
        description,
        pod,
        replace(pool, requirements=tuple(requirements)),
        change={"op": "setRequirements", "requirements": listed},
    )


def _toleration_json(toleration: Toleration) -> dict[str, str]:
    found = {
        "key": toleration.key,
        "operator": toleration.operator,
        "value": toleration.value,
        "effect": toleration.effect,
    }
    return {k: v for k, v in found.items() if v}


def _round_up(name: str, value: float) -> float:
    """A limit a user would write: whole CPUs, whole GiB."""
    if name == CPU:
        return float(math.ceil(value - 1e-9))
    if name == MEMORY:
        return float(math.ceil(value / 2**30 - 1e-9) * 2**30)
    return float(math.ceil(value))
