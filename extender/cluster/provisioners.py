"""Provisioner custom resources: list (as parsed Provisioners, with the AWSNodeTemplate each
`spec.providerRef` names resolved into its node configuration) and status patches."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from marshmallow import ValidationError

from extender.api import labels as wk
from extender.api import nodeclass as nc
from extender.api.nodeclass import NodeClass
from extender.api.nodetemplate import default_node_template, load_node_template
from extender.api.provisioner import Provisioner
from extender.api.provisioner_defaults import default_manifest
from extender.api.provisioner_schema import load_provisioner
from extender.cluster.errors import NotFound, translated
from extender.settings import Settings

log = logging.getLogger("karpy.provisioners")

GROUP, VERSION = wk.API_VERSION.split("/")
PLURAL = "provisioners"
TEMPLATE_GROUP, TEMPLATE_VERSION = nc.API_VERSION.split("/")
TEMPLATE_PLURAL = "awsnodetemplates"


def load_defaulted(
    obj: Mapping[str, Any],
    *,
    cluster_name: str,
    cluster_endpoint: str = "",
    instance_profile: str = "",
    node_templates: Mapping[str, NodeClass] | None = None,
) -> Provisioner:
    """One Provisioner manifest with the webhook's defaults applied (idempotent) in case none ran;
    `instance_profile` is the global default for Provisioners that name none; `node_templates`
    resolves `spec.providerRef`. Raises marshmallow.ValidationError."""
    return load_provisioner(
        default_manifest(
            obj,
            cluster_name=cluster_name,
            cluster_endpoint=cluster_endpoint,
            instance_profile=instance_profile,
        ),
        node_templates,
    )


def node_templates_of(
    items: list[Mapping[str, Any]],
    *,
    cluster_name: str,
    cluster_endpoint: str = "",
    instance_profile: str = "",
) -> dict[str, NodeClass]:
    """AWSNodeTemplate manifests -> node configurations by name, defaulted as an inline provider is;
    an invalid one is logged and left out (a Provisioner naming it is then refused)."""
    result: dict[str, NodeClass] = {}
    for obj in items:
        defaulted = default_node_template(
            obj,
            cluster_name=cluster_name,
            cluster_endpoint=cluster_endpoint,
            instance_profile=instance_profile,
        )
        try:
            name, node_class = load_node_template(defaulted)
        except ValidationError as err:
            log.error(
                "Ignoring invalid AWSNodeTemplate %s, %s",
                (obj.get("metadata") or {}).get("name"),
                err.messages,
            )
            continue
        result[name] = node_class
    return result


def list_node_templates(kube: client.ApiClient) -> list[Mapping[str, Any]]:
    """Every AWSNodeTemplate manifest; none when the CRD is not installed (no Provisioner can use one)."""
    try:
        with translated("listing awsnodetemplates"):
            raw = client.CustomObjectsApi(kube).list_cluster_custom_object(
                TEMPLATE_GROUP, TEMPLATE_VERSION, TEMPLATE_PLURAL
            )
    except NotFound:
        return []
    return list(raw.get("items") or [])


def load_configured(
    obj: Mapping[str, Any], settings: Settings, node_templates: list[Mapping[str, Any]] | None = None
) -> Provisioner:
    """`load_defaulted` with the defaults karpy is configured with (the controller, and `karpy plan`
    so that its plans are the controller's); `node_templates` are AWSNodeTemplate manifests."""
    defaults = {
        "cluster_name": settings.cluster_name,
        "cluster_endpoint": settings.cluster_endpoint,
        "instance_profile": settings.aws.default_instance_profile,
    }
    templates = node_templates_of(node_templates, **defaults) if node_templates is not None else None
    return load_defaulted(obj, node_templates=templates, **defaults)


def list_provisioners(
    kube: client.ApiClient, *, cluster_name: str, cluster_endpoint: str = "", instance_profile: str = ""
) -> list[Provisioner]:
    """Every valid Provisioner, defaulted (`load_defaulted`).

    An invalid object is logged and skipped: one bad Provisioner must not stop the others.
    """
    with translated("listing provisioners"):
        raw = client.CustomObjectsApi(kube).list_cluster_custom_object(GROUP, VERSION, PLURAL)
    items = raw.get("items") or []
    templates = (
        node_templates_of(
            list_node_templates(kube),
            cluster_name=cluster_name,
            cluster_endpoint=cluster_endpoint,
            instance_profile=instance_profile,
        )
        if any((obj.get("spec") or {}).get("providerRef") for obj in items)
        else {}
    )
    result = []
    for obj in items:
        name = (obj.get("metadata") or {}).get("name", "")
        try:
            result.append(
                load_defaulted(
                    obj,
                    cluster_name=cluster_name,
                    cluster_endpoint=cluster_endpoint,
                    instance_profile=instance_profile,
                    node_templates=templates,
                )
            )
        except ValidationError as err:
            log.error("Ignoring invalid provisioner %s, %s", name, err.messages)
    return result


def list_configured(kube: client.ApiClient, settings: Settings) -> list[Provisioner]:
    """`list_provisioners` with the defaults this controller is configured with: every worker must see
    the same Provisioners (a Provisioner without instanceProfile relies on the configured default)."""
    return list_provisioners(
        kube,
        cluster_name=settings.cluster_name,
        cluster_endpoint=settings.cluster_endpoint,
        instance_profile=settings.aws.default_instance_profile,
    )


def patch_status(kube: client.ApiClient, name: str, status: Mapping[str, Any]) -> None:
    with translated(f"patching status of provisioner {name}"):
        client.CustomObjectsApi(kube).patch_cluster_custom_object_status(
            GROUP,
            VERSION,
            PLURAL,
            name,
            {"status": dict(status)},
            _content_type="application/merge-patch+json",
        )
