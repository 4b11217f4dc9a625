"""karpenter.sh/v1alpha1 NodeOverlay manifests -> `Overlay`, as Karpenter v1.14 defines the kind.

Fields (kubernetes-sigs/karpenter pkg/apis/v1alpha1/nodeoverlay.go, its CRD
karpenter.sh_nodeoverlays.yaml and RuntimeValidate in nodeoverlay_validation.go):
- `requirements` (required, at most 100): which instance types and offerings of which pools the
  overlay changes: well-known labels (instance type, zone, capacity type, `karpenter.sh/nodepool`),
  the AWS provider's type labels, and the NodePool's template labels.
- `price` ("0.5": the offering's price) or `priceAdjustment` ("+0.1", "-0.1", "+10%", "-10%": the
  price changed by that much, never below 0); not both.
- `capacity`: extended resources added to the type; cpu, memory, ephemeral-storage and pods are
  refused (Karpenter's WellKnownResources).
- `weight` 1..10000, 0 when unset: higher applies first (extender/scheduling/overlays.py).

The CRD's rules are checked again here (the webhook, and `karpy plan` on files the API server never
saw); what karpy could not honour is refused by name: the operators `Gte`/`Lte`, which karpy's
requirement algebra does not have.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from extender.api import labels as wk
from extender.api import ranges
from extender.api.provisioner import OPERATORS, Overlay, Requirement
from extender.api.provisioner_schema import (
    MAX_REQUIREMENTS,
    MetadataSchema,
    RequirementSchema,
    ResourceListField,
    flatten_errors,
    qualified_name_problem,
)
from extender.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources
from extender.api.schema_text import Base, BoundedList, choices, quote

API_VERSION = f"{wk.GROUP}/v1alpha1"
GROUP, VERSION = API_VERSION.split("/")
KIND = "NodeOverlay"
PLURAL = "nodeoverlays"
#: The CRD's weight bounds (an unset weight is 0, below them).
WEIGHT_RANGE = (1, 10000)
#: Resources an overlay may not set (Karpenter's v1.WellKnownResources, the CRD's CEL rule).
RESTRICTED_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
#: karpenter.sh keys an overlay may select on (the CRD's CEL rule on `key`).
KARPENTER_KEYS = frozenset({wk.CAPACITY_TYPE, wk.NODEPOOL})
#: The one karpenter.k8s.aws key the provider's CRD admits that is no instance-type label.
EC2NODECLASS_KEY = f"{wk.AWS_LABEL_DOMAIN}/ec2nodeclass"
#: Capacity types Karpenter knows (v1.WellKnownValuesForRequirements); runtime-validated.
CAPACITY_TYPES = ("on-demand", "spot", "reserved")
#: The CRD's patterns, applied to text of bounded length.
_PRICE = re.compile(r"^\d+(\.\d+)?$")
_ADJUSTMENT = re.compile(r"^(([+-](\d*\.?\d+))|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%))$")
MAX_PRICE_LENGTH = 64


def _unsupported(what: str) -> str:
    return f"{what} is not supported by karpy"


class OverlayRequirementSchema(RequirementSchema):
    operator = fields.String(required=True)

    @validates_schema(skip_on_field_errors=False)
    def check_key(self, data: dict[str, Any], **_: Any) -> None:
        op = data.get("operator")
        if op in ("Gte", "Lte"):
            raise ValidationError(_unsupported(f"operator {op}") + f" (use {choices(OPERATORS)})", "operator")
        if op not in OPERATORS:
            raise ValidationError(f"{quote(op)} not in {choices(OPERATORS)}", "operator")
        key = data.get("key") or ""
        if (problem := qualified_name_problem(key)) is not None:
            raise ValidationError(f"invalid key name {quote(key)}: {problem}", "key")
        if key == wk.HOSTNAME:
            raise ValidationError(f'label "{key}" is restricted', "key")
        domain = key.rpartition("/")[0]
        if (domain == wk.GROUP or domain.endswith("." + wk.GROUP)) and key not in KARPENTER_KEYS:
            raise ValidationError(f'label domain "{wk.GROUP}" is restricted', "key")
        aws = domain == wk.AWS_LABEL_DOMAIN or domain.endswith("." + wk.AWS_LABEL_DOMAIN)
        if aws and key not in wk.INSTANCE_TYPE_LABELS | {EC2NODECLASS_KEY}:
            raise ValidationError(f'label domain "{wk.AWS_LABEL_DOMAIN}" is restricted', "key")
        values = data.get("values") or ()
        if key == wk.CAPACITY_TYPE and op == "In" and values and not set(values) & set(CAPACITY_TYPES):
            # v1 validateWellKnownValues: at least one value must be one Karpenter knows.
            raise ValidationError(f"no value in {choices(CAPACITY_TYPES)}", "values")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Requirement:
        return Requirement(
            key=wk.normalize_key(data["key"]), operator=data["operator"], values=tuple(data["values"])
        )


def validate_price(value: str) -> None:
    if len(value) > MAX_PRICE_LENGTH or not _PRICE.match(value):
        raise ValidationError(f"{quote(value)} is not a price such as 0.5")
    if (problem := ranges.quantity_problem(float(value))) is not None:
        raise ValidationError(f"{quote(value)} {problem}")


def validate_adjustment(value: str) -> None:
    if len(value) > MAX_PRICE_LENGTH or not _ADJUSTMENT.match(value):
        raise ValidationError(
            f'{quote(value)} is not a price adjustment such as "+0.1", "-0.1", "+10%" or "-10%"'
            " (at most -100%)"
        )
    if (problem := ranges.quantity_problem(abs(float(value.rstrip("%"))))) is not None:
        raise ValidationError(f"{quote(value)} {problem}")


class OverlayCapacityField(ResourceListField):
    """Extended resources only (Karpenter's CEL rule "invalid resource restricted")."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Resources:
        result = super()._deserialize(value, attr, data, **kwargs)
        errors = {
            str(name): [f"invalid capacity: {name} in resource, restricted (only extended resources)"]
            for name in value
            if name in RESTRICTED_RESOURCES
        }
        errors.update(
            {
                str(name): [f"invalid resource name {quote(name)}: {problem}"]
                for name in value
                if name not in errors and (problem := qualified_name_problem(str(name))) is not None
            }
        )
        if errors:
            raise ValidationError(errors)
        return result


class NodeOverlaySpecSchema(Base):
    requirements = BoundedList(
        fields.Nested(OverlayRequirementSchema),
        max_items=MAX_REQUIREMENTS,
        what="requirements",
        required=True,
    )
    price = fields.String(load_default=None, validate=validate_price)
    priceAdjustment = fields.String(load_default=None, validate=validate_adjustment)
    capacity = OverlayCapacityField(load_default=Resources)
    weight = fields.Integer(
        strict=True,
        load_default=0,
        validate=validate.Range(
            min=WEIGHT_RANGE[0], max=WEIGHT_RANGE[1], error="must be between {min} and {max}"
        ),
    )

    @validates_schema(skip_on_field_errors=False)
    def check_price(self, data: dict[str, Any], **_: Any) -> None:
        if data.get("price") is not None and data.get("priceAdjustment") is not None:
            raise ValidationError("cannot set both 'price' and 'priceAdjustment'", "price")


class NodeOverlaySchema(Base):
    apiVersion = fields.String(
        load_default=API_VERSION,
        validate=validate.Equal(API_VERSION, error='"{input}" is not ' + API_VERSION),
    )
    kind = fields.String(load_default=KIND, validate=validate.Equal(KIND))
    metadata = fields.Nested(MetadataSchema, required=True)
    spec = fields.Nested(NodeOverlaySpecSchema, required=True)

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Overlay:
        spec = data["spec"]
        return Overlay(
            name=data["metadata"]["name"],
            requirements=tuple(spec["requirements"]),
            price=spec["price"] if spec["price"] is not None else spec["priceAdjustment"],
            capacity=spec["capacity"],
            weight=spec["weight"],
        )


_SCHEMA = NodeOverlaySchema()


def load_nodeoverlay(obj: Mapping[str, Any]) -> Overlay:
    """Load and validate; raises ValidationError whose `messages` is the flat list of `path: message`."""
    try:
        loaded: Overlay = _SCHEMA.load(dict(obj))
        return loaded
    except ValidationError as err:
        raise ValidationError(flatten_errors(err.messages)) from err


def validate_nodeoverlay(obj: Any) -> list[str]:
    """Every problem with a NodeOverlay manifest, one `path: message` line each; [] when valid."""
    if not isinstance(obj, Mapping):
        return ["a NodeOverlay must be an object"]
    try:
        load_nodeoverlay(obj)
    except ValidationError as err:
        return list(err.messages)
    return []
