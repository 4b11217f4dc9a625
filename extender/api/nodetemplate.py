"""karpenter.k8s.aws/v1alpha1 AWSNodeTemplate manifests -> (name, NodeClass).

A v1alpha5 Provisioner names one with `spec.providerRef.name`; its `spec` has the same fields as an
inline `spec.provider` (extender.api.nodeclass_schema) and gets the same defaults.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from marshmallow import ValidationError, fields, post_load, validate

from extender.api import nodeclass as nc
from extender.api.nodeclass_schema import NodeClassSchema
from extender.api.provisioner_defaults import default_provider
from extender.api.provisioner_schema import MetadataSchema, flatten_errors
from extender.api.schema_text import Base


class AWSNodeTemplateSchema(Base):
    apiVersion = fields.String(
        load_default=nc.API_VERSION,
        validate=validate.Equal(nc.API_VERSION, error='"{input}" is not ' + nc.API_VERSION),
    )
    kind = fields.String(load_default=nc.KIND, validate=validate.Equal(nc.KIND))
    metadata = fields.Nested(MetadataSchema, required=True)
    spec = fields.Nested(NodeClassSchema, required=True)

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> tuple[str, nc.NodeClass]:
        return data["metadata"]["name"], data["spec"]


_SCHEMA = AWSNodeTemplateSchema()


def default_node_template(
    obj: Mapping[str, Any], *, cluster_name: str, cluster_endpoint: str = "", instance_profile: str = ""
) -> dict[str, Any]:
    """The manifest with the defaults an inline provider gets; `obj` is not modified."""
    result = copy.deepcopy(dict(obj))
    spec = result.setdefault("spec", {})
    if isinstance(spec, dict):
        default_provider(
            spec,
            cluster_name=cluster_name,
            cluster_endpoint=cluster_endpoint,
            instance_profile=instance_profile,
        )
    return result


def load_node_template(obj: Mapping[str, Any]) -> tuple[str, nc.NodeClass]:
    """Parse and validate; raises ValidationError whose `messages` is a list of `path: message`."""
    try:
        loaded: tuple[str, nc.NodeClass] = _SCHEMA.load(dict(obj))
        return loaded
    except ValidationError as err:
        raise ValidationError(flatten_errors(err.messages)) from err


def validate_node_template(obj: Any) -> list[str]:
    """Every problem with an AWSNodeTemplate manifest, one `path: message` line each; [] when valid."""
    try:
        load_node_template(obj)
    except ValidationError as err:
        return list(err.messages)
    return []
