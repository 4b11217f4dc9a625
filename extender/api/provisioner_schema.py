"""marshmallow schemas for karpenter.sh/v1alpha5 Provisioner manifests -> extender.api.provisioner dataclasses."""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, validate

from extender.api.provisioner import (
    OPERATORS,
    TAINT_EFFECTS,
    AWSProvider,
    ClusterRef,
    KubeletConfiguration,
    Provisioner,
    Requirement,
    Taint,
)
from extender.api.quantity import QuantityError
from extender.api.resources import Resources


class _Base(Schema):
    class Meta:
        unknown = EXCLUDE


class RequirementSchema(_Base):
    key = fields.String(required=True, validate=validate.Length(min=1))
    operator = fields.String(required=True, validate=validate.OneOf(OPERATORS))
    values = fields.List(fields.String(), load_default=list)

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Requirement:
        return Requirement(key=data["key"], operator=data["operator"], values=tuple(data["values"]))


class TaintSchema(_Base):
    key = fields.String(required=True, validate=validate.Length(min=1))
    value = fields.String(load_default="")
    effect = fields.String(required=True, validate=validate.OneOf(TAINT_EFFECTS))

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Taint:
        return Taint(key=data["key"], value=data["value"], effect=data["effect"])


class ClusterSchema(_Base):
    name = fields.String(required=True, validate=validate.Length(min=1))
    endpoint = fields.String(load_default="")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> ClusterRef:
        return ClusterRef(**data)


class AWSProviderSchema(_Base):
    instanceProfile = fields.String(load_default="")
    launchTemplate = fields.String(load_default="")
    subnetSelector = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    securityGroupSelector = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    tags = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    amiFamily = fields.String(load_default="")
    cluster = fields.Nested(ClusterSchema, load_default=None)

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> AWSProvider:
        return AWSProvider(
            instance_profile=data["instanceProfile"],
            launch_template=data["launchTemplate"],
            subnet_selector=data["subnetSelector"],
            security_group_selector=data["securityGroupSelector"],
            tags=data["tags"],
            ami_family=data["amiFamily"],
            cluster=data["cluster"],
        )


class KubeletSchema(_Base):
    clusterDNS = fields.List(fields.String(), load_default=list)
    maxPods = fields.Integer(load_default=None, validate=validate.Range(min=1))

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> KubeletConfiguration:
        return KubeletConfiguration(cluster_dns=tuple(data["clusterDNS"]), max_pods=data["maxPods"])


class ResourceListField(fields.Field):
    """{"cpu": "1000", "memory": "1000Gi"} -> Resources; a malformed quantity names its key."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Resources:
        if not isinstance(value, dict):
            raise ValidationError("must be a map of resource name to quantity")
        try:
            return Resources.parse(value)
        except QuantityError as err:
            raise ValidationError(str(err)) from err


class LimitsSchema(_Base):
    resources = ResourceListField(load_default=Resources)


class SpecSchema(_Base):
    requirements = fields.List(fields.Nested(RequirementSchema), load_default=list)
    labels = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    taints = fields.List(fields.Nested(TaintSchema), load_default=list)
    ttlSecondsAfterEmpty = fields.Integer(load_default=None, validate=validate.Range(min=0))
    ttlSecondsUntilExpired = fields.Integer(load_default=None, validate=validate.Range(min=0))
    limits = fields.Nested(LimitsSchema, load_default=None)
    weight = fields.Integer(load_default=0)
    kubeletConfiguration = fields.Nested(KubeletSchema, load_default=None)
    provider = fields.Nested(AWSProviderSchema, load_default=None)


class MetadataSchema(_Base):
    name = fields.String(required=True, validate=validate.Length(min=1, max=253))
    uid = fields.String(load_default="")
    resourceVersion = fields.String(load_default="")


class ProvisionerSchema(_Base):
    apiVersion = fields.String(load_default="karpenter.sh/v1alpha5")
    kind = fields.String(load_default="Provisioner", validate=validate.Equal("Provisioner"))
    metadata = fields.Nested(MetadataSchema, required=True)
    spec = fields.Nested(SpecSchema, load_default=dict)

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> Provisioner:
        spec = data["spec"] or {}
        limits = spec.get("limits") or {}
        return Provisioner(
            name=data["metadata"]["name"],
            uid=data["metadata"]["uid"],
            resource_version=data["metadata"]["resourceVersion"],
            requirements=tuple(spec.get("requirements", ())),
            labels=spec.get("labels", {}),
            taints=tuple(spec.get("taints", ())),
            ttl_seconds_after_empty=spec.get("ttlSecondsAfterEmpty"),
            ttl_seconds_until_expired=spec.get("ttlSecondsUntilExpired"),
            limits=limits.get("resources", Resources()),
            weight=spec.get("weight", 0),
            kubelet=spec.get("kubeletConfiguration") or KubeletConfiguration(),
            provider=spec.get("provider") or AWSProvider(),
        )
