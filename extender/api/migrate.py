"""v1alpha5 Provisioners (+ inline `spec.provider` or AWSNodeTemplates) -> v1 NodePools and
EC2NodeClasses, as Karpenter's migration tool does (aws/karpenter-provider-aws
tools/karpenter-convert, v0.32: Provisioner -> NodePool, AWSNodeTemplate or inline provider ->
EC2NodeClass named as the Provisioner, the v1alpha5 defaults written out unless told not to,
`launchTemplate` refused, a `$KARPENTER_NODE_ROLE` placeholder where no instance profile is known),
but to v1 and keeping what the nodes get unchanged:

- no empty TTL and no consolidation -> WhenEmpty with consolidateAfter "Never" (v1 has no "off");
  no ttlSecondsUntilExpired -> expireAfter "Never" (v1's default would be 720h);
- metadataOptions written out with v1alpha5's defaults (hop limit 2; v1's default is 1);
- the family keeps karpy's default (AL2023) as an `al2023@latest` alias;
- the kubelet settings move to the EC2NodeClass (v1 keeps them there): Provisioners sharing an
  AWSNodeTemplate with different kubelet settings get one EC2NodeClass each.

Every field with no v1 counterpart is named in the notes (printed on stderr by `karpy convert`).
Plain data in and out: manifests as API JSON.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.api import ec2nodeclass, nodepool
from extender.api import nodeclass as nc
from extender.api.disruption import v1alpha5_policy
from extender.api.nodetemplate import default_node_template
from extender.api.provisioner_defaults import default_manifest

ROLE_PLACEHOLDER = "$KARPENTER_NODE_ROLE"
ALIASES = {nc.AL2023: "al2023", nc.AL2: "al2", nc.BOTTLEROCKET: "bottlerocket"}
V1ALPHA5_METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 2,
    "httpTokens": "required",
}
#: Provider fields that carry over under the same name.
SAME_FIELDS = ("userData", "tags", "blockDeviceMappings", "detailedMonitoring", "context")


class ConvertError(ValueError):
    """An object that cannot be converted (the message names it and the field)."""


@dataclass
class Converted:
    objects: list[dict[str, Any]] = field(default_factory=list)
    #: Fields with no v1 counterpart and values changed on the way, one line each.
    notes: list[str] = field(default_factory=list)


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Name, labels and annotations (karpenter-convert keeps these and finalizers; finalizers are
    Karpenter's own and differ in v1)."""
    source = obj.get("metadata") or {}
    return {k: copy.deepcopy(source[k]) for k in ("name", "labels", "annotations") if source.get(k)}


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _tag_terms(selector: Mapping[str, str], id_key: str = "") -> list[dict[str, Any]]:
    """A v1alpha5 selector map as v1 terms: `aws-ids` -> one id term each; the tags as one term."""
    terms: list[dict[str, Any]] = []
    ids = selector.get("aws::ids") or selector.get("aws-ids")
    if ids and id_key:
        terms += [{"id": one} for one in _split(ids)]
    tags = {k: v for k, v in selector.items() if k not in ("aws-ids", "aws::ids", "aws::name", "aws::owners")}
    if tags:
        terms.append({"tags": dict(tags)})
    return terms


def _network_terms(selector: Mapping[str, str], where: str, notes: list[str]) -> list[dict[str, Any]]:
    """A v1alpha5 subnet/security-group selector as v1 terms: one id term per `aws-ids` entry, and
    the tags split into one term per combination of their comma-separated values (v1 matches a
    value exactly; "a,b" meant a or b)."""
    ids = _split(selector.get("aws::ids") or selector.get("aws-ids") or "")
    tags = {k: v for k, v in selector.items() if k not in ("aws-ids", "aws::ids")}
    if ids and tags:
        notes.append(f"{where}: aws-ids and tags became separate terms, which v1 ORs (v1alpha5 ANDed them)")
    return [{"id": one} for one in ids] + [{"tags": t} for t in nc.split_tag_selector(tags)]


def _ami_terms(
    provider: Mapping[str, Any], family: str, where: str, notes: list[str]
) -> list[dict[str, Any]]:
    selector = provider.get("amiSelector") or {}
    if not selector:
        return [{"alias": f"{ALIASES[family]}@latest"}]
    terms = _tag_terms(selector, id_key="id")
    if name := selector.get("aws::name"):
        owners = _split(selector.get("aws::owners", "")) or [""]
        terms += [{"name": name, **({"owner": owner} if owner else {})} for owner in owners]
    elif owner_list := selector.get("aws::owners"):
        tag_terms = [t for t in terms if "tags" in t] or [{}]
        terms = [t for t in terms if "tags" not in t]
        terms += [{**t, "owner": owner} for t in tag_terms for owner in _split(owner_list)]
    if len(terms) > 1 and not all(set(t) == {"id"} for t in terms):
        notes.append(
            f"{where}.amiSelector: became {len(terms)} amiSelectorTerms, which karpy's v1 loader refuses"
        )
    return terms


def node_class(
    name: str, provider: Mapping[str, Any], kubelet: Mapping[str, Any] | None, where: str
) -> Converted:
    """One EC2NodeClass from a (defaulted) v1alpha5 provider block or AWSNodeTemplate spec."""
    out = Converted()
    if provider.get("launchTemplate"):
        raise ConvertError(
            f'{where}: cannot convert with "launchTemplate" (v1 has no unmanaged launch templates)'
        )
    family = str(provider.get("amiFamily") or nc.DEFAULT_AMI_FAMILY)
    if family not in (*ALIASES, nc.CUSTOM):
        raise ConvertError(f"{where}.amiFamily: {family} has no v1 counterpart (Karpenter v1 dropped it)")
    spec: dict[str, Any] = {"amiFamily": family} if family == nc.CUSTOM or provider.get("amiSelector") else {}
    spec["amiSelectorTerms"] = _ami_terms(provider, family, where, out.notes)
    for kind in ("subnet", "securityGroup"):
        spec[f"{kind}SelectorTerms"] = _network_terms(
            provider.get(f"{kind}Selector") or {}, f"{where}.{kind}Selector", out.notes
        )
    if profile := provider.get("instanceProfile"):
        spec["instanceProfile"] = profile
    else:
        spec["role"] = ROLE_PLACEHOLDER
        out.notes.append(
            f"{where}: no instanceProfile; role is the placeholder {ROLE_PLACEHOLDER}, replace it"
        )
    for key in SAME_FIELDS:
        if provider.get(key) not in (None, "", {}, []):
            spec[key] = copy.deepcopy(provider[key])
    spec["metadataOptions"] = {**V1ALPHA5_METADATA_OPTIONS, **(provider.get("metadataOptions") or {})}
    if not provider.get("metadataOptions"):
        out.notes.append(
            f"{where}.metadataOptions: written out with v1alpha5's defaults (v1's hop limit is 1)"
        )
    if kubelet:
        spec["kubelet"] = copy.deepcopy(dict(kubelet))
    if provider.get("cluster"):
        out.notes.append(f"{where}.cluster: no v1 counterpart (karpy's own field), dropped")
    extra = sorted(
        set(provider)
        - {
            *SAME_FIELDS,
            "amiFamily",
            "amiSelector",
            "subnetSelector",
            "securityGroupSelector",
            "instanceProfile",
            "metadataOptions",
            "cluster",
            "apiVersion",
            "kind",
            "launchTemplate",
        }
    )
    for key in extra:
        out.notes.append(f"{where}.{key}: no v1 counterpart, dropped")
    out.objects.append(
        {
            "apiVersion": ec2nodeclass.API_VERSION,
            "kind": ec2nodeclass.KIND,
            "metadata": {"name": name},
            "spec": spec,
        }
    )
    return out


def _seconds(value: Any) -> str:
    return f"{int(value)}s"


def node_pool(obj: Mapping[str, Any], class_name: str, notes: list[str]) -> dict[str, Any]:
    """The NodePool of one (defaulted) Provisioner whose node class is `class_name`."""
    spec = obj.get("spec") or {}
    where = f"Provisioner {(obj.get('metadata') or {}).get('name')}: spec"
    template_spec: dict[str, Any] = {
        "requirements": copy.deepcopy(spec.get("requirements") or []),
        "nodeClassRef": {"group": ec2nodeclass.API_GROUP, "kind": ec2nodeclass.KIND, "name": class_name},
    }
    for key in ("taints", "startupTaints"):
        if spec.get(key):
            template_spec[key] = copy.deepcopy(spec[key])
    expire = spec.get("ttlSecondsUntilExpired")
    template_spec["expireAfter"] = nodepool.NEVER if expire is None else _seconds(expire)
    template: dict[str, Any] = {"spec": template_spec}
    if spec.get("labels"):
        template["metadata"] = {"labels": copy.deepcopy(spec["labels"])}
    policy, after = v1alpha5_policy(
        spec.get("ttlSecondsAfterEmpty"), bool((spec.get("consolidation") or {}).get("enabled"))
    )
    disruption: dict[str, Any] = {
        "consolidationPolicy": policy,
        "consolidateAfter": nodepool.NEVER if after is None else _seconds(after),
    }
    if nodes := (spec.get("disruption") or {}).get("nodes"):
        disruption["budgets"] = [{"nodes": str(nodes)}]
    out: dict[str, Any] = {"template": template, "disruption": disruption}
    if limits := (spec.get("limits") or {}).get("resources"):
        out["limits"] = copy.deepcopy(limits)
    if spec.get("weight"):
        out["weight"] = spec["weight"]
    known = {
        "requirements",
        "labels",
        "taints",
        "startupTaints",
        "ttlSecondsUntilExpired",
        "ttlSecondsAfterEmpty",
        "consolidation",
        "disruption",
        "limits",
        "weight",
        "provider",
        "providerRef",
        "kubeletConfiguration",
    }
    notes += [f"{where}.{key}: no v1 counterpart, dropped" for key in sorted(set(spec) - known)]
    return {"apiVersion": nodepool.API_VERSION, "kind": nodepool.KIND, "metadata": _meta(obj), "spec": out}


def convert(
    docs: Sequence[Mapping[str, Any]],
    *,
    cluster_name: str,
    instance_profile: str = "",
    ignore_defaults: bool = False,
) -> Converted:
    """Provisioners and AWSNodeTemplates -> NodePools and EC2NodeClasses (raises ConvertError)."""
    result = Converted()
    templates: dict[str, Mapping[str, Any]] = {}
    provisioners = []
    for doc in docs:
        kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name", "")
        if kind == "AWSNodeTemplate":
            templates[name] = default_node_template(
                doc, cluster_name=cluster_name, instance_profile=instance_profile
            )
        elif kind == "Provisioner":
            defaulted = default_manifest(doc, cluster_name=cluster_name, instance_profile=instance_profile)
            if ignore_defaults:  # as karpenter-convert --ignore-defaults: the requirements as written
                defaulted["spec"]["requirements"] = copy.deepcopy(
                    (doc.get("spec") or {}).get("requirements") or []
                )
            provisioners.append(defaulted)
        else:
            raise ConvertError(f"{kind} {name}: unknown kind, expected one of Provisioner, AWSNodeTemplate")
    # (template, kubelet) -> EC2NodeClass name: a template's kubelet settings must be one set.
    classes: dict[tuple[str, str], str] = {}
    for prov in provisioners:
        spec, name = prov.get("spec") or {}, prov["metadata"]["name"]
        kubelet = spec.get("kubeletConfiguration") or None
        if (ref := spec.get("providerRef")) is not None:
            template = templates.get(ref.get("name", ""))
            if template is None:
                missing = ref.get("name")
                raise ConvertError(
                    f"Provisioner {name}: spec.providerRef names AWSNodeTemplate {missing!r}, not given"
                )
            key = (template["metadata"]["name"], repr(sorted((kubelet or {}).items())))
            if key not in classes:
                taken = any(k[0] == key[0] for k in classes)
                classes[key] = f"{key[0]}-{name}" if taken else key[0]
                made = node_class(
                    classes[key], template.get("spec") or {}, kubelet, f"AWSNodeTemplate {key[0]}: spec"
                )
                result.objects += made.objects
                result.notes += made.notes
            class_name = classes[key]
        else:
            made = node_class(name, spec.get("provider") or {}, kubelet, f"Provisioner {name}: spec.provider")
            result.objects += made.objects
            result.notes += made.notes
            class_name = name
        result.objects.append(node_pool(prov, class_name, result.notes))
    # A template no Provisioner names still converts, as karpenter-convert converts it.
    used = {k[0] for k in classes}
    for name, template in templates.items():
        if name not in used:
            made = node_class(name, template.get("spec") or {}, None, f"AWSNodeTemplate {name}: spec")
            result.objects += made.objects
            result.notes += made.notes
    return result
