"""Provisioner custom resources: list (as parsed Provisioners) and status patches."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from marshmallow import ValidationError

from extender.api import labels as wk
from extender.api.provisioner import Provisioner
from extender.api.provisioner_defaults import default_manifest
from extender.api.provisioner_schema import load_provisioner
from extender.cluster.errors import translated
from extender.settings import Settings

log = logging.getLogger("karpy.provisioners")

GROUP, VERSION = wk.API_VERSION.split("/")
PLURAL = "provisioners"


def load_defaulted(
    obj: Mapping[str, Any], *, cluster_name: str, cluster_endpoint: str = "", instance_profile: str = ""
) -> Provisioner:
    """One Provisioner manifest with the webhook's defaults applied (idempotent) in case none ran;
    `instance_profile` is the global default for Provisioners that name none. Raises
    marshmallow.ValidationError."""
    return load_provisioner(
        default_manifest(
            obj,
            cluster_name=cluster_name,
            cluster_endpoint=cluster_endpoint,
            instance_profile=instance_profile,
        )
    )


def load_configured(obj: Mapping[str, Any], settings: Settings) -> Provisioner:
    """`load_defaulted` with the defaults karpy is configured with (the controller, and `karpy plan`
    so that its plans are the controller's)."""
    return load_defaulted(
        obj,
        cluster_name=settings.cluster_name,
        cluster_endpoint=settings.cluster_endpoint,
        instance_profile=settings.aws.default_instance_profile,
    )


def list_provisioners(
    kube: client.ApiClient, *, cluster_name: str, cluster_endpoint: str = "", instance_profile: str = ""
) -> list[Provisioner]:
    """Every valid Provisioner, defaulted (`load_defaulted`).

    An invalid object is logged and skipped: one bad Provisioner must not stop the others.
    """
    with translated("listing provisioners"):
        raw = client.CustomObjectsApi(kube).list_cluster_custom_object(GROUP, VERSION, PLURAL)
    result = []
    for obj in raw.get("items") or []:
        name = (obj.get("metadata") or {}).get("name", "")
        try:
            result.append(
                load_defaulted(
                    obj,
                    cluster_name=cluster_name,
                    cluster_endpoint=cluster_endpoint,
                    instance_profile=instance_profile,
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
