"""Provisioner and NodePool custom resources: list (as parsed Provisioners, with the AWSNodeTemplate
each `spec.providerRef` names, or the EC2NodeClass each `nodeClassRef` names, resolved into its node
configuration) and status patches.

Both API versions load into the one Provisioner type (`kind` says which). Names are unique across
the two: a NodePool named as a Provisioner is ignored, with an error, so that every node's owner
label, status and event names exactly one object.

An object that does not load — refused by the schema, or with a value karpy cannot compute with
that raises anything else — is left out and the others load: it is quarantined (quarantine.py), so
its ERROR line and its `ValidationFailed` Event come once per generation (spec change) and error,
not on every listing nor on every status write. (Its status condition is the status pass's, v1status.py.)
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from kubernetes import client
from marshmallow import ValidationError

from extender.api import labels as wk
from extender.api import nodeclass as nc
from extender.api import nodepool as np
from extender.api.ec2nodeclass import API_VERSION as NODE_CLASS_API_VERSION
from extender.api.ec2nodeclass import PLURAL as NODE_CLASS_PLURAL
from extender.api.ec2nodeclass import EC2NodeClass, load_ec2nodeclass
from extender.api.nodeclass import NodeClass
from extender.api.nodepool import load_nodepool
from extender.api.nodetemplate import default_node_template, load_node_template
from extender.api.provisioner import Provisioner
from extender.api.provisioner_defaults import default_manifest
from extender.api.provisioner_schema import load_provisioner
from extender.api.schema_text import summarize
from extender.cluster import events
from extender.cluster.errors import NotFound, translated
from extender.cluster.quarantine import Quarantine, short
from extender.settings import Settings

log = logging.getLogger("karpy.provisioners")

GROUP, VERSION = wk.API_VERSION.split("/")
PLURAL = "provisioners"
TEMPLATE_GROUP, TEMPLATE_VERSION = nc.API_VERSION.split("/")
TEMPLATE_PLURAL = "awsnodetemplates"
NODEPOOL_GROUP, NODEPOOL_VERSION = np.API_VERSION.split("/")
NODE_CLASS_GROUP, NODE_CLASS_VERSION = NODE_CLASS_API_VERSION.split("/")


#: Objects that did not load, by kind: reported once per change, whichever worker listed them.
INVALID = {kind: Quarantine(kind) for kind in ("Provisioner", "AWSNodeTemplate", np.KIND, "EC2NodeClass")}
#: NodePools left out for a Provisioner of the same name.
CLASHES = Quarantine("NodePoolNameClash")
API_VERSIONS = {
    "Provisioner": wk.API_VERSION,
    "AWSNodeTemplate": nc.API_VERSION,
    np.KIND: np.API_VERSION,
    "EC2NodeClass": NODE_CLASS_API_VERSION,
}
#: How much of an error's text an ERROR line carries (a 10,000-value requirement's is megabytes).
LOG_LIMIT = 1000
INVALID_REASON = "ValidationFailed"


def error_text(err: Exception) -> str:
    """What an object's load failure says: the schema's messages (field paths), or, for a value
    that broke a computation, the exception."""
    if isinstance(err, ValidationError):
        # The webhook's bounded denial text: the first problems, cut at a word, "+N more".
        return summarize(err.messages) if isinstance(err.messages, list) else str(err.messages)
    return f"{type(err).__name__}: {err}"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec_version(meta: Mapping[str, Any]) -> str:
    """What marks a change worth reporting again: the generation, which only a spec change bumps
    (karpy's own status writes bump the resourceVersion every status pass), else the
    resourceVersion."""
    generation = meta.get("generation")
    return f"g{generation}" if generation is not None else str(meta.get("resourceVersion") or "")


def reject(
    kind: str, obj: Mapping[str, Any], err: Exception | str, kube: client.ApiClient | None = None
) -> None:
    """Report that `obj` is left out (`err`: why): at ERROR with a Warning Event the first time for
    this resourceVersion and error text, at DEBUG after that."""
    meta = _meta(obj)
    name = str(meta.get("name") or "")
    message = err if isinstance(err, str) else error_text(err)
    if not INVALID[kind].failed(name, _spec_version(meta), message):
        log.debug("Ignoring invalid %s %s, %s", kind.lower(), name, short(message, LOG_LIMIT))
        return
    log.error("Ignoring invalid %s %s, %s", kind.lower(), name, short(message, LOG_LIMIT))
    if kube is not None:
        events.record(
            kube,
            kind=kind,
            api_version=API_VERSIONS[kind],
            name=name,
            uid=str(meta.get("uid") or ""),
            reason=INVALID_REASON,
            message=f"Ignoring invalid {kind.lower()}, {short(message)}",
            warning=True,
        )


def accept(kind: str, obj: Mapping[str, Any]) -> None:
    """`obj` loaded: a later failure is news again."""
    name = str(_meta(obj).get("name") or "")
    if INVALID[kind].recovered(name):
        log.info("Loaded %s %s, valid again", kind.lower(), name)


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
    kube: client.ApiClient | None = None,
) -> dict[str, NodeClass]:
    """AWSNodeTemplate manifests -> node configurations by name, defaulted as an inline provider is;
    an invalid one is reported (`reject`) and left out (a Provisioner naming it is then refused)."""
    result: dict[str, NodeClass] = {}
    for obj in items:
        try:
            defaulted = default_node_template(
                obj,
                cluster_name=cluster_name,
                cluster_endpoint=cluster_endpoint,
                instance_profile=instance_profile,
            )
            name, node_class = load_node_template(defaulted)
        except Exception as err:  # one object's boundary: it is left out, the others load
            reject("AWSNodeTemplate", obj, err, kube)
            continue
        accept("AWSNodeTemplate", obj)
        result[name] = node_class
    return result


def node_classes_of(
    items: list[Mapping[str, Any]],
    *,
    cluster_name: str,
    cluster_endpoint: str = "",
    kube: client.ApiClient | None = None,
) -> dict[str, EC2NodeClass]:
    """EC2NodeClass manifests by name; an invalid one is reported (`reject`) and left out (a
    NodePool naming it is then refused)."""
    result: dict[str, EC2NodeClass] = {}
    for obj in items:
        try:
            loaded = load_ec2nodeclass(obj, cluster_name=cluster_name, cluster_endpoint=cluster_endpoint)
        except Exception as err:  # one object's boundary
            reject("EC2NodeClass", obj, err, kube)
            continue
        accept("EC2NodeClass", obj)
        result[loaded.name] = loaded
    return result


def refused_names(items: list[Mapping[str, Any]], loaded: Mapping[str, Any]) -> set[str]:
    """The names among `items` that did not load: a NodePool naming one is told its class is
    invalid, not missing."""
    return {str(_meta(obj).get("name") or "") for obj in items} - set(loaded)


def list_custom(kube: client.ApiClient, group: str, version: str, plural: str) -> list[Mapping[str, Any]]:
    """Every object of a custom resource; none when its CRD is not installed."""
    try:
        with translated(f"listing {plural}"):
            raw = client.CustomObjectsApi(kube).list_cluster_custom_object(group, version, plural)
    except NotFound:
        return []
    return [obj for obj in raw.get("items") or [] if isinstance(obj, Mapping)]


def list_node_templates(kube: client.ApiClient) -> list[Mapping[str, Any]]:
    """Every AWSNodeTemplate manifest; none when the CRD is not installed (no Provisioner can use one)."""
    return list_custom(kube, TEMPLATE_GROUP, TEMPLATE_VERSION, TEMPLATE_PLURAL)


def load_configured(
    obj: Mapping[str, Any],
    settings: Settings,
    node_templates: list[Mapping[str, Any]] | None = None,
    node_classes: list[Mapping[str, Any]] | None = None,
) -> Provisioner:
    """`load_defaulted` with the defaults karpy is configured with (the controller, and `karpy plan`
    so that its plans are the controller's); `node_templates` are AWSNodeTemplate manifests. A
    NodePool (`kind`) loads with `node_classes`, EC2NodeClass manifests, resolving its nodeClassRef."""
    if obj.get("kind") == np.KIND:
        if node_classes is None:
            return load_nodepool(obj)
        classes = node_classes_of(
            node_classes, cluster_name=settings.cluster_name, cluster_endpoint=settings.cluster_endpoint
        )
        return load_nodepool(obj, classes, refused_names(node_classes, classes))
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
    items = [obj for obj in raw.get("items") or [] if isinstance(obj, Mapping)]
    templates = (
        node_templates_of(
            list_node_templates(kube),
            cluster_name=cluster_name,
            cluster_endpoint=cluster_endpoint,
            instance_profile=instance_profile,
            kube=kube,
        )
        if any(isinstance(obj.get("spec"), Mapping) and obj["spec"].get("providerRef") for obj in items)
        else {}
    )
    return provisioners_of(
        items,
        templates,
        cluster_name=cluster_name,
        cluster_endpoint=cluster_endpoint,
        instance_profile=instance_profile,
        kube=kube,
    )


def provisioners_of(
    items: list[Mapping[str, Any]],
    templates: Mapping[str, NodeClass],
    *,
    cluster_name: str,
    cluster_endpoint: str = "",
    instance_profile: str = "",
    kube: client.ApiClient | None = None,
) -> list[Provisioner]:
    """Provisioner manifests -> every one that loads, defaulted; the others are reported and left
    out (`kube`, when given, carries their Events)."""
    result = []
    for obj in items:
        try:
            loaded = load_defaulted(
                obj,
                cluster_name=cluster_name,
                cluster_endpoint=cluster_endpoint,
                instance_profile=instance_profile,
                node_templates=templates,
            )
        except Exception as err:  # one object's boundary
            reject("Provisioner", obj, err, kube)
            continue
        accept("Provisioner", obj)
        result.append(loaded)
    return result


def list_nodepools(
    kube: client.ApiClient, *, cluster_name: str, cluster_endpoint: str = ""
) -> list[Provisioner]:
    """Every valid NodePool (as a Provisioner of kind NodePool) with its EC2NodeClass resolved; none
    when the v1 CRDs are not installed. An invalid one is logged and skipped."""
    items = list_custom(kube, NODEPOOL_GROUP, NODEPOOL_VERSION, np.PLURAL)
    if not items:
        return []
    class_items = list_custom(kube, NODE_CLASS_GROUP, NODE_CLASS_VERSION, NODE_CLASS_PLURAL)
    classes = node_classes_of(
        class_items, cluster_name=cluster_name, cluster_endpoint=cluster_endpoint, kube=kube
    )
    return nodepools_of(items, classes, kube=kube, invalid_classes=refused_names(class_items, classes))


def nodepools_of(
    items: list[Mapping[str, Any]],
    classes: Mapping[str, EC2NodeClass],
    *,
    kube: client.ApiClient | None = None,
    invalid_classes: Collection[str] = (),
) -> list[Provisioner]:
    """NodePool manifests -> every one that loads with its EC2NodeClass; the others are reported
    and left out (`invalid_classes`: EC2NodeClasses that exist but did not load)."""
    result = []
    for obj in items:
        try:
            loaded = load_nodepool(obj, dict(classes), invalid_classes)
        except Exception as err:  # one object's boundary
            reject(np.KIND, obj, err, kube)
            continue
        accept(np.KIND, obj)
        result.append(loaded)
    return result


def without_clashes(provisioners: list[Provisioner], nodepools: list[Provisioner]) -> list[Provisioner]:
    """Both lists as one; a NodePool named as a Provisioner is left out (the Provisioner came first)."""
    taken = {p.name for p in provisioners}
    result = list(provisioners)
    for pool in nodepools:
        if pool.name in taken:
            # Its own record: the NodePool itself loaded (and was accepted) a moment ago.
            if CLASHES.failed(pool.name, pool.spec_only(), "a provisioner of the same name exists"):
                log.error("Ignoring nodepool %s, a provisioner of the same name exists", pool.name)
            continue
        CLASHES.recovered(pool.name)
        result.append(pool)
    return result


def list_configured(kube: client.ApiClient, settings: Settings) -> list[Provisioner]:
    """Every Provisioner and NodePool with the defaults this controller is configured with: every
    worker must see the same ones (a Provisioner without instanceProfile relies on the default)."""
    provisioners = list_provisioners(
        kube,
        cluster_name=settings.cluster_name,
        cluster_endpoint=settings.cluster_endpoint,
        instance_profile=settings.aws.default_instance_profile,
    )
    nodepools = list_nodepools(
        kube, cluster_name=settings.cluster_name, cluster_endpoint=settings.cluster_endpoint
    )
    return without_clashes(provisioners, nodepools)


def patch_status(kube: client.ApiClient, name: str, status: Mapping[str, Any]) -> None:
    """A v1alpha5 Provisioner's status (a NodePool's is cluster/v1status.py's)."""
    with translated(f"patching status of provisioner {name}"):
        client.CustomObjectsApi(kube).patch_cluster_custom_object_status(
            GROUP,
            VERSION,
            PLURAL,
            name,
            {"status": dict(status)},
            _content_type="application/merge-patch+json",
        )
