"""marshmallow schemas: karpenter.sh/v1alpha5 Provisioner manifests -> extender.api.provisioner dataclasses.

This is the one validator for Provisioners: the admission webhook, the controller and `karpy plan` all
go through it. Errors are flattened to `path: message` lines such as
`spec.requirements[1].operator: "Foo" not in [In NotIn Exists DoesNotExist Gt Lt]`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from marshmallow import (
    ValidationError,
    fields,
    post_load,
    validate,
    validates_schema,
)

from extender.api import labels as wk
from extender.api import ranges
from extender.api.disruption import (
    MIN_SAVINGS_ANNOTATION,
    Budget,
    SavingsThreshold,
    parse_min_savings,
    policy_rules,
    v1alpha5_policy,
)
from extender.api.nodeclass import API_VERSION as NODE_TEMPLATE_API_VERSION
from extender.api.nodeclass import KIND as NODE_TEMPLATE_KIND
from extender.api.nodeclass import NodeClass
from extender.api.nodeclass_schema import KubeletSchema, NodeClassSchema
from extender.api.provisioner import (
    DEFAULT_DISRUPTION_BUDGET,
    OPERATORS,
    TAINT_EFFECTS,
    KubeletConfiguration,
    Provisioner,
    Requirement,
    Taint,
)
from extender.api.quantity import QuantityError
from extender.api.resources import LIMITABLE, Resources
from extender.api.schema_text import Base as _Base
from extender.api.schema_text import BoundedDict, BoundedList, too_many
from extender.api.schema_text import choices as _choices
from extender.api.schema_text import quote as _quote

# Keys the controller owns on every node; users may not set them as labels.
RESTRICTED_LABELS = wk.RESTRICTED_LABELS | {*wk.OWNER_LABELS, wk.EMPTINESS_TIMESTAMP_ANNOTATION}
# Requirement keys a Provisioner may constrain without declaring them in spec.labels.
# The capacity-reservation keys are Karpenter AWS well-known labels (pkg/apis/v1/labels.go init).
REQUIREMENT_KEYS = (wk.WELL_KNOWN_LABELS | wk.INSTANCE_TYPE_LABELS | set(wk.RESERVATION_LABELS)) - set(
    wk.OWNER_LABELS
)

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Karpenter: Gt/Lt "must have a single positive integer value" (0 allowed, no sign).
_INTEGER = re.compile(r"^[0-9]+$")
#: A Gt/Lt value is a label value (at most 63 characters).
MAX_INTEGER_LENGTH = 63


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes qualified name ([prefix/]name), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "prefix must be a DNS subdomain"
    if not name or len(name) > 63 or not _NAME.match(name):
        return "name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def label_value_problem(value: str) -> str | None:
    if value and (len(value) > 63 or not _NAME.match(value)):
        return "must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def _is_restricted_domain(key: str) -> bool:
    domain = key.rpartition("/")[0]
    return any(domain == d or domain.endswith("." + d) for d in wk.RESTRICTED_LABEL_DOMAINS)


def validate_labels(value: Mapping[str, str]) -> None:
    errors: dict[str, list[str]] = {}
    for key, val in value.items():
        problems = []
        problem = qualified_name_problem(key)
        if problem:
            problems.append(f"invalid key name {_quote(key)}: {problem}")
        elif key in RESTRICTED_LABELS:
            problems.append("label is restricted")
        elif _is_restricted_domain(key) and wk.normalize_key(key) not in REQUIREMENT_KEYS:
            problems.append(f"label domain not allowed (restricted: {_choices(wk.RESTRICTED_LABEL_DOMAINS)})")
        if (problem := label_value_problem(val)) is not None:
            problems.append(f"invalid value {_quote(val)}: {problem}")
        if problems:
            errors[f"[{_quote(key)}]"] = problems
    if errors:
        raise ValidationError(errors)


#: Bounds a Provisioner's requirements (Karpenter v1's NodePool CRD allows 100 requirements); each
#: value is a node label's, so a few hundred cover any real zone or type list. Labels: the NodePool
#: CRD's maxProperties. Taints: no CRD bound; a hundred is far past any real node's.
MAX_REQUIREMENTS = 100
MAX_VALUES = 500
MAX_LABELS = 100
MAX_TAINTS = 100
#: Entries of a resource list (limits): a handful of resource names are countable.
MAX_RESOURCES = 64


def label_field() -> BoundedDict:
    """Labels every node gets: at most MAX_LABELS, each a valid node label."""
    return BoundedDict(max_items=MAX_LABELS, what="labels", load_default=dict, validate=validate_labels)


def taint_field() -> BoundedList:
    return BoundedList(fields.Nested(TaintSchema), max_items=MAX_TAINTS, what="taints", load_default=list)


class RequirementSchema(_Base):
    key = fields.String(required=True, validate=validate.Length(min=1))
    operator = fields.String(
        required=True, validate=validate.OneOf(OPERATORS, error='"{input}" not in ' + _choices(OPERATORS))
    )
    values = BoundedList(fields.String(), max_items=MAX_VALUES, what="values", load_default=list)

    @validates_schema
    def check_values(self, data: dict[str, Any], **_: Any) -> None:
        op, values = data["operator"], data["values"]
        if op in ("Exists", "DoesNotExist") and values:
            raise ValidationError(f"must be empty for operator {op}", "values")
        if op in ("Gt", "Lt") and (
            len(values) != 1
            or len(values[0]) > MAX_INTEGER_LENGTH
            or not _INTEGER.match(values[0])
            or ranges.bounded_int(values[0], ranges.MAX_INT64) is None
        ):
            raise ValidationError(
                f"operator {op} takes exactly one non-negative integer value up to {ranges.MAX_INT64}",
                "values",
            )
        if op in ("In", "NotIn"):
            if not values:
                raise ValidationError(f"must not be empty for operator {op}", "values")
            problems = {
                i: [f"invalid value {_quote(v)}: {p}"]
                for i, v in enumerate(values)
                if (p := label_value_problem(v)) is not None
            }
            if problems:
                raise ValidationError(problems, "values")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Requirement:
        # The Karpenter <= 0.5 alias is accepted on input and never seen past this point.
        key = wk.normalize_key(data["key"])
        return Requirement(key=key, operator=data["operator"], values=tuple(data["values"]))


class TaintSchema(_Base):
    key = fields.String(required=True, validate=validate.Length(min=1))
    value = fields.String(load_default="")
    effect = fields.String(
        required=True,
        validate=validate.OneOf(TAINT_EFFECTS, error='"{input}" not in ' + _choices(TAINT_EFFECTS)),
    )

    @validates_schema
    def check_names(self, data: dict[str, Any], **_: Any) -> None:
        if (problem := qualified_name_problem(data["key"])) is not None:
            raise ValidationError(f"invalid key name {_quote(data['key'])}: {problem}", "key")
        if (problem := label_value_problem(data["value"])) is not None:
            raise ValidationError(f"invalid value {_quote(data['value'])}: {problem}", "value")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Taint:
        return Taint(key=data["key"], value=data["value"], effect=data["effect"])


class ResourceListField(fields.Field[Resources]):
    """{"cpu": "1000", "memory": "1000Gi"} -> Resources; a malformed quantity names its key."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Resources:
        if not isinstance(value, dict):
            raise ValidationError("must be a map of resource name to quantity")
        if len(value) > MAX_RESOURCES:
            raise ValidationError(too_many(len(value), MAX_RESOURCES, "resources"))
        errors: dict[str, list[str]] = {}
        for name, raw in value.items():
            try:
                parsed = Resources.parse({name: raw}).get(str(name))
            except (QuantityError, TypeError, ValueError) as err:
                errors[str(name)] = [str(err)]
                continue
            if (problem := ranges.quantity_problem(parsed)) is not None:
                # "1e400" parses to infinity: a limit nothing can reach is no limit.
                errors[str(name)] = [f"{_quote(raw)} {problem}"]
        if errors:
            raise ValidationError(errors)
        return Resources.parse(value)


class LimitListField(ResourceListField):
    """Limits may only name what karpy counts, a resource a node's capacity can list or `nodes`
    (each node counts 1): a limit on anything else would be accepted and never reached."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Resources:
        result = super()._deserialize(value, attr, data, **kwargs)
        unknown = sorted(str(name) for name in value if name not in LIMITABLE)
        if unknown:
            allowed = ", ".join(LIMITABLE)
            raise ValidationError(
                {
                    name: [f"karpy cannot count this resource in limits (countable: {allowed})"]
                    for name in unknown
                }
            )
        return result


class LimitsSchema(_Base):
    resources = LimitListField(load_default=Resources)


def _validate_ttl(seconds: int) -> None:
    # Karpenter v1alpha5 turns these into a time.Duration: the same maximum as a v1 duration.
    if seconds < 0:
        raise ValidationError("cannot be negative")
    if (problem := ranges.seconds_problem(seconds)) is not None:
        raise ValidationError(f"{seconds} seconds: {problem}")


_BUDGET = re.compile(r"^(0|[1-9][0-9]*)%?$")


def _validate_budget(value: str) -> None:
    count = ranges.bounded_int(value.removesuffix("%"), ranges.MAX_COUNT) if _BUDGET.match(value) else None
    if count is None or (value.endswith("%") and count > 100):
        raise ValidationError(
            f'{_quote(value)} is not a node count ("3") up to {ranges.MAX_COUNT} or a percentage from'
            ' 0% to 100% ("10%")'
        )


class ConsolidationSchema(_Base):
    enabled = fields.Boolean(truthy={True}, falsy={False}, load_default=False)


class DisruptionSchema(_Base):
    """karpy's budget shape: `spec.disruption.nodes`, as one of Karpenter's NodePool budgets."""

    nodes = fields.String(load_default=DEFAULT_DISRUPTION_BUDGET, validate=_validate_budget)


class ProviderRefSchema(_Base):
    # Resolved by name only, as Karpenter does; kind and apiVersion may be omitted.
    apiVersion = fields.String(
        load_default=NODE_TEMPLATE_API_VERSION,
        validate=validate.Equal(
            NODE_TEMPLATE_API_VERSION, error='"{input}" is not ' + NODE_TEMPLATE_API_VERSION
        ),
    )
    kind = fields.String(
        load_default=NODE_TEMPLATE_KIND,
        validate=validate.Equal(NODE_TEMPLATE_KIND, error='"{input}" is not ' + NODE_TEMPLATE_KIND),
    )
    name = fields.String(required=True, validate=validate.Length(min=1, max=253))


class SpecSchema(_Base):
    requirements = BoundedList(
        fields.Nested(RequirementSchema), max_items=MAX_REQUIREMENTS, what="requirements", load_default=list
    )
    labels = label_field()
    taints = taint_field()
    ttlSecondsAfterEmpty = fields.Integer(strict=True, load_default=None, validate=_validate_ttl)
    ttlSecondsUntilExpired = fields.Integer(strict=True, load_default=None, validate=_validate_ttl)
    limits = fields.Nested(LimitsSchema, load_default=None)
    # Higher is tried first; modern Karpenter's range.
    weight = fields.Integer(strict=True, load_default=0, validate=validate.Range(min=0, max=100))
    consolidation = fields.Nested(ConsolidationSchema, load_default=None)
    disruption = fields.Nested(DisruptionSchema, load_default=None)
    kubeletConfiguration = fields.Nested(KubeletSchema, load_default=None)
    provider = fields.Nested(NodeClassSchema, load_default=None)
    providerRef = fields.Nested(ProviderRefSchema, load_default=None)

    @validates_schema
    def check_provider(self, data: dict[str, Any], **_: Any) -> None:
        # Karpenter v1alpha5 validateProvider: one node configuration, inline or referenced.
        if data.get("provider") is not None and data.get("providerRef") is not None:
            raise ValidationError("provider and providerRef are mutually exclusive: set one", "providerRef")

    @validates_schema
    def check_consolidation(self, data: dict[str, Any], **_: Any) -> None:
        # Karpenter v1alpha5: an empty TTL and consolidation both remove empty nodes; pick one.
        if (data.get("consolidation") or {}).get("enabled") and data.get("ttlSecondsAfterEmpty") is not None:
            raise ValidationError(
                "consolidation.enabled and ttlSecondsAfterEmpty are mutually exclusive",
                "consolidation.enabled",
            )

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def check_requirement_keys(self, _data: dict[str, Any], original: Any, **_: Any) -> None:
        # Works on the raw input so an unknown key is reported together with any field errors.
        if not isinstance(original, Mapping) or not isinstance(original.get("requirements"), list):
            return
        if len(original["requirements"]) > MAX_REQUIREMENTS:
            return  # refused by its field, unread
        raw_labels = original.get("labels")
        declared = {wk.normalize_key(k) for k in raw_labels} if isinstance(raw_labels, Mapping) else set()
        errors: dict[str, list[str]] = {}
        for i, req in enumerate(original["requirements"]):
            key = req.get("key") if isinstance(req, Mapping) else None
            if not isinstance(key, str) or not key:
                continue
            if key in RESTRICTED_LABELS:
                errors[f"requirements[{i}].key"] = [f"{_quote(key)} is restricted"]
            elif (canonical := wk.normalize_key(key)) not in REQUIREMENT_KEYS and canonical not in declared:
                errors[f"requirements[{i}].key"] = [
                    f"{_quote(key)} not in {_choices(tuple(sorted(REQUIREMENT_KEYS)))} "
                    "and not declared in spec.labels"
                ]
            elif (problem := qualified_name_problem(key)) is not None:
                errors[f"requirements[{i}].key"] = [f"invalid key name {_quote(key)}: {problem}"]
        if errors:
            raise ValidationError(errors)


class MetadataSchema(_Base):
    name = fields.String(required=True, validate=validate.Length(min=1, max=253))
    uid = fields.String(load_default="")
    resourceVersion = fields.String(load_default="")
    annotations = fields.Dict(keys=fields.String(), values=fields.Raw(), load_default=dict)

    @validates_schema
    def check_min_savings(self, data: dict[str, Any], **_: Any) -> None:
        value = (data.get("annotations") or {}).get(MIN_SAVINGS_ANNOTATION)
        if value is None:
            return
        try:
            if not isinstance(value, str):
                raise ValueError(f"must be a string, not {type(value).__name__}")
            parse_min_savings(value)
        except ValueError as err:
            raise ValidationError({f"[{MIN_SAVINGS_ANNOTATION}]": [str(err)]}, "annotations") from None


def min_savings(metadata: Mapping[str, Any]) -> SavingsThreshold:
    """The consolidation savings threshold a loaded (validated) object's metadata sets."""
    value = (metadata.get("annotations") or {}).get(MIN_SAVINGS_ANNOTATION)
    return SavingsThreshold() if value is None else parse_min_savings(value)


class ProvisionerSchema(_Base):
    apiVersion = fields.String(
        load_default=wk.API_VERSION,
        validate=validate.Equal(wk.API_VERSION, error='"{input}" is not ' + wk.API_VERSION),
    )
    kind = fields.String(load_default="Provisioner", validate=validate.Equal("Provisioner"))
    metadata = fields.Nested(MetadataSchema, required=True)
    spec = fields.Nested(SpecSchema, load_default=dict)

    @post_load(pass_original=True)
    def make(self, data: dict[str, Any], original: Any, **_: Any) -> Provisioner:
        spec = data["spec"] or {}
        limits = spec.get("limits") or {}
        raw_limits = ((original.get("spec") or {}).get("limits") or {}).get("resources") or {}
        rules = policy_rules(
            *v1alpha5_policy(
                spec.get("ttlSecondsAfterEmpty"), bool((spec.get("consolidation") or {}).get("enabled"))
            )
        )
        return Provisioner(
            name=data["metadata"]["name"],
            uid=data["metadata"]["uid"],
            resource_version=data["metadata"]["resourceVersion"],
            consolidation_min_savings=min_savings(data["metadata"]),
            requirements=tuple(spec.get("requirements", ())),
            labels=spec.get("labels", {}),
            taints=tuple(spec.get("taints", ())),
            ttl_seconds_after_empty=rules.ttl_seconds_after_empty,
            ttl_seconds_until_expired=spec.get("ttlSecondsUntilExpired"),
            limits=limits.get("resources", Resources()),
            # Resources drops zeros, but a limit of 0 means "launch nothing", not "no limit".
            limited=frozenset(str(k) for k in raw_limits),
            weight=spec.get("weight", 0),
            consolidation=rules.consolidation,
            budgets=(Budget(nodes=(spec.get("disruption") or {}).get("nodes", DEFAULT_DISRUPTION_BUDGET)),),
            kubelet=spec.get("kubeletConfiguration") or KubeletConfiguration(),
            provider=spec.get("provider") or NodeClass(),
            provider_ref=(spec.get("providerRef") or {}).get("name", ""),
        )


def flatten_errors(messages: Any, prefix: str = "") -> list[str]:
    """marshmallow's nested error dict -> ["spec.requirements[1].operator: ...", ...] in field order."""
    if isinstance(messages, Mapping):
        lines: list[str] = []
        for key, sub in messages.items():
            if key == "_schema":
                path = prefix
            elif isinstance(key, int):
                path = f"{prefix}[{key}]"
            elif str(key).startswith("["):
                path = f"{prefix}{key}"
            else:
                path = f"{prefix}.{key}" if prefix else str(key)
            lines.extend(flatten_errors(sub, path))
        return lines
    if isinstance(messages, list | tuple):
        return [line for item in messages for line in flatten_errors(item, prefix)]
    return [f"{prefix}: {messages}" if prefix else str(messages)]


# Built once: constructing the schema costs three times a load, and load keeps no per-call state.
_SCHEMA = ProvisionerSchema()


def parse_provisioner(obj: Any) -> Provisioner:
    """Load and validate; raises ValidationError whose `messages` is the flat list of `path: message`."""
    try:
        loaded: Provisioner = _SCHEMA.load(obj)
        return loaded
    except ValidationError as err:
        raise ValidationError(flatten_errors(err.messages)) from err


def load_provisioner(
    obj: Mapping[str, Any], node_templates: Mapping[str, NodeClass] | None = None
) -> Provisioner:
    """Parse a Provisioner manifest (API JSON); every process (webhook, controller, `karpy plan`)
    loads Provisioners through it. Raises ValidationError whose `messages` is a list of
    `path: message` lines.

    `node_templates` (AWSNodeTemplates by name) resolves `spec.providerRef` into `provider`; a
    reference to none of them is an error. Without it the reference is kept unresolved (the
    webhook validates a Provisioner on its own, as Karpenter's does).
    """
    provisioner = parse_provisioner(dict(obj))
    if provisioner.provider_ref and node_templates is not None:
        template = node_templates.get(provisioner.provider_ref)
        if template is None:
            raise ValidationError(
                [f"spec.providerRef.name: {NODE_TEMPLATE_KIND} {_quote(provisioner.provider_ref)} not found"]
            )
        provisioner = replace(provisioner, provider=template)
    return provisioner


def validate_provisioner(obj: Any) -> list[str]:
    """Every problem with a Provisioner manifest, one `path: message` line each; [] when valid."""
    try:
        parse_provisioner(obj)
    except ValidationError as err:
        return list(err.messages)
    return []
