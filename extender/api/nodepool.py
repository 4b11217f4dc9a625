"""karpenter.sh/v1 NodePool manifests -> the one Provisioner type the solver, launch and lifecycle use.

Field for field (Karpenter's v1 migration guide; `shared/reference/nodes-and-v1.md` §10.5):
template.metadata.labels -> labels; template.spec.requirements/taints -> requirements/taints;
template.spec.expireAfter -> ttl_seconds_until_expired ("Never" -> None, default 720h);
template.spec.terminationGracePeriod -> termination_grace_period; limits -> limits; weight;
disruption.consolidationPolicy WhenEmpty -> ttl_seconds_after_empty = consolidateAfter,
WhenEmptyOrUnderutilized -> consolidation + consolidate_after; disruption.budgets -> budgets;
template.spec.nodeClassRef -> the EC2NodeClass's NodeClass (`provider`) and kubelet settings.

Defaults are the CRD's (the API server applies them to stored objects; `karpy plan` reads files
the API server never saw, so they are applied here too). What karpy does not implement is refused
by name (Gte/Lte). consolidationPolicy Balanced -> consolidation with k = 2
(`consolidation_threshold`, fixed as in Karpenter v1.14). template.spec.startupTaints ->
startup_taints and template.metadata.annotations -> annotations, both put on each node at launch.
A requirement's minValues is kept (`Requirement.min_values`) within the CRD's bounds (1..50, at
most the number of `In` values); the solver keeps that many distinct values of its key among a
node's instance types. spec.replicas -> replicas: a static NodePool (never consolidated or emptied;
provisioning/static.py keeps its node count, the solver never launches for it); limits.nodes ->
limits["nodes"], a count.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from extender.api import cron, ranges
from extender.api import labels as wk
from extender.api.disruption import (
    BALANCED,
    REASONS,
    WHEN_EMPTY,
    WHEN_EMPTY_OR_UNDERUTILIZED,
    Budget,
    policy_rules,
)
from extender.api.ec2nodeclass import API_GROUP as NODE_CLASS_GROUP
from extender.api.ec2nodeclass import KIND as NODE_CLASS_KIND
from extender.api.ec2nodeclass import EC2NodeClass
from extender.api.provisioner import DEFAULT_DISRUPTION_BUDGET, OPERATORS, Provisioner, Requirement
from extender.api.provisioner_schema import (
    MAX_REQUIREMENTS,
    REQUIREMENT_KEYS,
    RESTRICTED_LABELS,
    LimitListField,
    MetadataSchema,
    RequirementSchema,
    flatten_errors,
    label_field,
    min_savings,
    qualified_name_problem,
    taint_field,
)
from extender.api.resources import NODES, Resources
from extender.api.schema_text import Base, BoundedDict, BoundedList, choices, quote

API_VERSION = f"{wk.GROUP}/v1"
KIND = "NodePool"
PLURAL = "nodepools"
DEFAULT_EXPIRE_AFTER = "720h"
NEVER = "Never"
POLICIES = (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED, BALANCED)

# The CRD's patterns (karpenter.sh_nodepools.yaml), applied only to text of bounded length. Its
# schedule pattern is not: Python's backtracking engine takes seconds on a few hundred characters
# of it (Go's RE2 does not), so a schedule is parsed instead (cron.parse, linear).
_DURATION = re.compile(r"^([0-9]+(s|m|h))+$")
_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")
_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_BUDGET_DURATION = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
#: The longest schedule admitted: every value of every field listed ("0,1,...,59 0,1,...,23 ...")
#: is about 350 characters.
MAX_SCHEDULE_LENGTH = 1024
#: Kubernetes' limit on a Node's annotations, len(key) + len(value) summed in bytes (apimachinery
#: ValidateAnnotationsSize, TotalAnnotationSizeLimitB).
NODE_ANNOTATIONS_BYTES = 256 * 1024
#: Room kept for the annotations karpy (hash, startup taints, AMI) and kubelet put on the Node too.
RESERVED_ANNOTATION_BYTES = 16 * 1024
#: The CRD's maxItems on budgets; reasons are a set of three, a few repeats tolerated.
MAX_BUDGETS, MAX_REASONS = 50, 10
#: The CRD's minimum and maximum of a requirement's minValues.
MIN_VALUES_RANGE = (1, 50)


def duration_seconds(text: str) -> int | None:
    """ "1h30m" -> 5400, "Never" -> None; raises ValueError for anything else."""
    if text == NEVER:
        return None
    if len(text) > ranges.MAX_DURATION_LENGTH or not _DURATION.match(text):
        raise ValueError(f'{quote(text)} is not a duration such as "30s", "15m", "720h" or "Never"')
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    if (problem := ranges.seconds_problem(seconds)) is not None:
        raise ValueError(f"{quote(text)} {problem}")
    return seconds


class _Duration(fields.Field[int | None]):
    """A v1 duration string as seconds (None for "Never" when `never` allows it)."""

    def __init__(self, *, never: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.never = never

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int | None:
        if not isinstance(value, str) or (value == NEVER and not self.never):
            raise ValidationError(f"{quote(value)} is not a duration such as 30s, 15m or 720h")
        try:
            return duration_seconds(value)
        except ValueError as err:
            raise ValidationError(str(err)) from err


def _unsupported(what: str) -> str:
    return f"{what} is not supported by karpy"


class NodePoolRequirementSchema(RequirementSchema):
    operator = fields.String(required=True)
    minValues = fields.Integer(
        strict=True,
        load_default=None,
        validate=validate.Range(
            min=MIN_VALUES_RANGE[0], max=MIN_VALUES_RANGE[1], error="must be between {min} and {max}"
        ),
    )

    @validates_schema(skip_on_field_errors=False)
    def check_operator(self, data: dict[str, Any], **_: Any) -> None:
        op = data.get("operator")
        if op in ("Gte", "Lte"):
            raise ValidationError(_unsupported(f"operator {op}") + f" (use {choices(OPERATORS)})", "operator")
        if op not in OPERATORS:
            raise ValidationError(f"{quote(op)} not in {choices(OPERATORS)}", "operator")
        min_values = data.get("minValues")
        if op == "In" and min_values is not None and len(data.get("values") or ()) < min_values:
            # The CRD's CEL rule (karpenter.sh_nodepools.yaml), also for files the API server never saw.
            raise ValidationError(
                "requirements with 'minValues' must have at least that many values specified in the"
                " 'values' field",
                "minValues",
            )
        key = data.get("key") or ""
        if (problem := qualified_name_problem(key)) is not None:
            raise ValidationError(f"invalid key name {quote(key)}: {problem}", "key")
        if key in RESTRICTED_LABELS:
            raise ValidationError(f'label "{key}" is restricted', "key")
        domain = key.rpartition("/")[0]
        for restricted in (wk.GROUP, wk.AWS_LABEL_DOMAIN):
            if (domain == restricted or domain.endswith("." + restricted)) and key not in REQUIREMENT_KEYS:
                raise ValidationError(f'label domain "{restricted}" is restricted', "key")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Requirement:
        return Requirement(
            key=wk.normalize_key(data["key"]),
            operator=data["operator"],
            values=tuple(data["values"]),
            min_values=data["minValues"],
        )


class NodeClassRefSchema(Base):
    group = fields.String(
        required=True, validate=validate.Equal(NODE_CLASS_GROUP, error='"{input}" is not ' + NODE_CLASS_GROUP)
    )
    kind = fields.String(
        required=True, validate=validate.Equal(NODE_CLASS_KIND, error='"{input}" is not ' + NODE_CLASS_KIND)
    )
    name = fields.String(required=True, validate=validate.Length(min=1, error="name may not be empty"))


class TemplateSpecSchema(Base):
    requirements = BoundedList(
        fields.Nested(NodePoolRequirementSchema),
        max_items=MAX_REQUIREMENTS,
        what="requirements",
        required=True,
    )
    taints = taint_field()
    startupTaints = taint_field()
    nodeClassRef = fields.Nested(NodeClassRefSchema, required=True)
    expireAfter = _Duration(load_default=duration_seconds(DEFAULT_EXPIRE_AFTER))
    terminationGracePeriod = _Duration(never=False, load_default=None)


def annotation_bytes(annotations: Mapping[str, str]) -> int:
    """What apimachinery's ValidateAnnotationsSize counts: len(key) + len(value), in UTF-8 bytes."""
    return sum(
        len(k.encode("utf-8", "surrogatepass")) + len(v.encode("utf-8", "surrogatepass"))
        for k, v in annotations.items()
    )


def annotations_size_problem(value: Mapping[Any, Any]) -> str | None:
    """Annotations that do not fit on a Node next to karpy's and kubelet's own, or None."""
    limit = NODE_ANNOTATIONS_BYTES - RESERVED_ANNOTATION_BYTES
    if (size := annotation_bytes({str(k): str(v) for k, v in value.items()})) > limit:
        return (
            f"{size} bytes of annotations; a Node takes {NODE_ANNOTATIONS_BYTES} bytes in all, and "
            f"karpy keeps {RESERVED_ANNOTATION_BYTES} of them for its own and kubelet's (at most {limit})"
        )
    return None


def validate_annotations(value: Mapping[str, str]) -> None:
    """What the API server takes on a Node (qualified keys, 256 KiB in all, checked on the raw map
    by annotations_size_problem): the CRD itself checks neither, and annotations the Node create
    refuses would fail every launch instead of the NodePool's admission."""
    errors = {
        f"[{quote(key)}]": [f"invalid key name {quote(key)}: {problem}"]
        for key in value
        if (problem := qualified_name_problem(key)) is not None
    }
    if errors:
        raise ValidationError(errors)


def validate_budget_nodes(value: str) -> None:
    """The CRD's pattern, and a count karpy computes with (at most math.MaxInt32)."""
    if len(value) > ranges.MAX_DURATION_LENGTH or not _BUDGET_NODES.match(value):
        raise ValidationError(f'{quote(value)} is not a node count ("3") or a percentage ("10%")')
    if not value.endswith("%") and ranges.bounded_int(value, ranges.MAX_COUNT) is None:
        raise ValidationError(f"{quote(value)} is more nodes than {ranges.MAX_COUNT} (math.MaxInt32)")


def validate_schedule(value: str) -> None:
    """robfig/cron's standard parser, as Karpenter reads the schedule, on text of bounded length:
    parsed in linear time rather than matched against the CRD's backtracking pattern."""
    if len(value) > MAX_SCHEDULE_LENGTH:
        raise ValidationError(f"{len(value)} characters, more than a cron schedule's {MAX_SCHEDULE_LENGTH}")
    try:
        cron.parse(value)
    except cron.CronError as err:
        raise ValidationError(f"{quote(value)} is not a cron schedule: {err}") from err


def validate_budget_duration(value: str) -> None:
    if len(value) > ranges.MAX_DURATION_LENGTH or not _BUDGET_DURATION.match(value):
        raise ValidationError(f"{quote(value)} is not a duration in hours and minutes")
    try:
        duration_seconds(value.removesuffix("0s"))
    except ValueError as err:
        raise ValidationError(str(err)) from err


class TemplateMetadataSchema(Base):
    labels = label_field()
    annotations = BoundedDict(
        # Entries cost at least 2 bytes each: the byte limit bounds the count too.
        max_items=NODE_ANNOTATIONS_BYTES // 2,
        precheck=annotations_size_problem,
        load_default=dict,
        validate=validate_annotations,
    )


class TemplateSchema(Base):
    metadata = fields.Nested(TemplateMetadataSchema, load_default=dict)
    spec = fields.Nested(TemplateSpecSchema, required=True)


class BudgetSchema(Base):
    nodes = fields.String(load_default=DEFAULT_DISRUPTION_BUDGET, validate=validate_budget_nodes)
    schedule = fields.String(load_default=None, validate=validate_schedule)
    duration = fields.String(load_default=None, validate=validate_budget_duration)
    reasons = BoundedList(
        fields.String(validate=validate.OneOf(REASONS)),
        max_items=MAX_REASONS,
        what="reasons",
        load_default=list,
    )

    @validates_schema
    def check_schedule(self, data: dict[str, Any], **_: Any) -> None:
        if (data.get("schedule") is None) != (data.get("duration") is None):
            raise ValidationError("'schedule' must be set with 'duration'", "schedule")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Budget:
        duration = data["duration"]
        # Go's Duration.String() appends "0s" ("10m0s"), which the CRD pattern allows.
        seconds = duration_seconds(duration.removesuffix("0s")) if duration else None
        return Budget(
            nodes=data["nodes"],
            schedule=data["schedule"],
            duration=seconds,
            reasons=frozenset(data["reasons"]),
        )


class DisruptionSchema(Base):
    consolidationPolicy = fields.String(load_default=WHEN_EMPTY_OR_UNDERUTILIZED)
    consolidateAfter = _Duration(load_default=0)
    budgets = BoundedList(
        fields.Nested(BudgetSchema), max_items=MAX_BUDGETS, what="budgets", load_default=None
    )

    @validates_schema
    def check_policy(self, data: dict[str, Any], **_: Any) -> None:
        policy = data.get("consolidationPolicy")
        if policy not in POLICIES:
            raise ValidationError(f"{quote(policy)} not in {choices(POLICIES)}", "consolidationPolicy")


class NodePoolSpecSchema(Base):
    template = fields.Nested(TemplateSchema, required=True)
    disruption = fields.Nested(DisruptionSchema, load_default=dict)
    limits = LimitListField(load_default=Resources)
    weight = fields.Integer(strict=True, load_default=0, validate=validate.Range(min=1, max=100))
    replicas = fields.Integer(
        strict=True,
        load_default=None,
        validate=validate.Range(min=0, max=ranges.MAX_INT64, error="must be between {min} and {max}"),
    )

    @validates_schema(pass_original=True)
    def check_static(self, data: dict[str, Any], original: Any, **_: Any) -> None:
        """The CRD's CEL rules on static NodePools (karpenter.sh_nodepools.yaml), also for files the
        API server never saw."""
        raw = original if isinstance(original, Mapping) else {}
        if raw.get("replicas") is None:
            return
        errors: dict[str, list[str]] = {}
        if set(raw.get("limits") or {}) - {NODES}:
            errors["limits"] = ["only 'limits.nodes' is supported on static NodePools"]
        if "weight" in raw:
            errors["weight"] = ["'weight' is not supported on static NodePools"]
        if errors:
            raise ValidationError(errors)


class NodePoolSchema(Base):
    apiVersion = fields.String(
        load_default=API_VERSION,
        validate=validate.Equal(API_VERSION, error='"{input}" is not ' + API_VERSION),
    )
    kind = fields.String(load_default=KIND, validate=validate.Equal(KIND))
    metadata = fields.Nested(MetadataSchema, required=True)
    spec = fields.Nested(NodePoolSpecSchema, required=True)

    @post_load(pass_original=True)
    def make(self, data: dict[str, Any], original: Any, **_: Any) -> Provisioner:
        spec = data["spec"]
        template = spec["template"]
        tspec = template["spec"]
        disruption = spec["disruption"] or {}
        policy = disruption.get("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED)
        after = disruption.get("consolidateAfter", 0)
        budgets = tuple(disruption.get("budgets") or (Budget(nodes=DEFAULT_DISRUPTION_BUDGET),))
        raw_limits = (original.get("spec") or {}).get("limits") or {}
        static = spec["replicas"] is not None
        rules = policy_rules(policy, after, static=static)
        return Provisioner(
            name=data["metadata"]["name"],
            uid=data["metadata"]["uid"],
            resource_version=data["metadata"]["resourceVersion"],
            kind=KIND,
            requirements=tuple(tspec["requirements"]),
            labels=(template.get("metadata") or {}).get("labels", {}),
            taints=tuple(tspec["taints"]),
            startup_taints=tuple(tspec["startupTaints"]),
            annotations=(template.get("metadata") or {}).get("annotations", {}),
            ttl_seconds_until_expired=tspec["expireAfter"],
            termination_grace_period=tspec["terminationGracePeriod"],
            limits=spec["limits"],
            limited=frozenset(str(k) for k in raw_limits),
            weight=spec["weight"],
            ttl_seconds_after_empty=rules.ttl_seconds_after_empty,
            consolidation=rules.consolidation,
            consolidation_threshold=rules.consolidation_threshold,
            consolidation_min_savings=min_savings(data["metadata"]),
            consolidate_after=after,
            budgets=budgets,
            provider_ref=tspec["nodeClassRef"]["name"],
            replicas=spec["replicas"],
        )


_SCHEMA = NodePoolSchema()


def parse_nodepool(obj: Any) -> Provisioner:
    """Load and validate; raises ValidationError whose `messages` is the flat list of `path: message`."""
    try:
        loaded: Provisioner = _SCHEMA.load(obj)
        return loaded
    except ValidationError as err:
        raise ValidationError(flatten_errors(err.messages)) from err


def load_nodepool(
    obj: Mapping[str, Any],
    node_classes: Mapping[str, EC2NodeClass] | None = None,
    invalid_classes: Collection[str] = (),
) -> Provisioner:
    """A NodePool as a Provisioner (kind "NodePool"); `node_classes` (EC2NodeClasses by name)
    resolves nodeClassRef into `provider` and `kubelet`, a reference to none of them being an error,
    which names the class invalid when it is among `invalid_classes` (it exists but did not load).
    Without it the reference is kept unresolved (the webhook validates a NodePool on its own)."""
    pool = parse_nodepool(dict(obj))
    if node_classes is not None:
        found = node_classes.get(pool.provider_ref)
        if found is None:
            path = "spec.template.spec.nodeClassRef.name"
            state = "is invalid" if pool.provider_ref in invalid_classes else "not found"
            raise ValidationError([f"{path}: {NODE_CLASS_KIND} {quote(pool.provider_ref)} {state}"])
        pool = replace(pool, provider=found.node_class, kubelet=found.kubelet)
    return pool


def validate_nodepool(obj: Any, old: Any = None) -> list[str]:
    """Every problem with a NodePool manifest, one `path: message` line each; [] when valid. `old`:
    the stored object an update replaces (the CRD's transition rule)."""
    problems = []
    try:
        parse_nodepool(obj)
    except ValidationError as err:
        problems = list(err.messages)
    if isinstance(old, Mapping) and isinstance(obj, Mapping) and _static(obj) != _static(old):
        problems.append(
            "spec.replicas: Cannot transition NodePool between static (replicas set) and dynamic"
            " (replicas unset) provisioning modes"
        )
    return problems


def _static(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    return isinstance(spec, Mapping) and spec.get("replicas") is not None
