"""karpenter.k8s.aws/v1 EC2NodeClass manifests -> the NodeClass (and kubelet settings) karpy launches with.

v1 keeps most of the v1alpha5 node configuration under the same names (userData, tags,
blockDeviceMappings, metadataOptions, detailedMonitoring, context): those are checked by the one
schema behind an inline provider and an AWSNodeTemplate (nodeclass_schema.NodeClassSchema). What v1
changed is translated here, with v1 field paths in every error:

- `amiSelectorTerms`: an `alias` (`al2023@latest`, `bottlerocket@latest`, `al2@latest`) names the
  family whose published AMI boots the node; otherwise the terms become the v1alpha5 amiSelector
  (several `id` terms, or one term of tags/name/owner). `amiFamily` without an alias is required.
- `subnetSelectorTerms`, `securityGroupSelectorTerms`: the NodeClass's selector terms (ORed; each
  tags ANDed, or an `id`, or a security-group `name`), checked as Karpenter v1's CRD checks them.
- `role` xor `instanceProfile` (see `NodeClass.role`); `kubelet` moved here from the NodePool.
- `associatePublicIPAddress` (v1 only, no v1alpha5 twin): `NodeClass.associate_public_ip_address`.
- `capacityReservationSelectorTerms` (v1 only): `NodeClass.capacity_reservation_selector`, checked
  as Karpenter v1.14's CRD checks it (an `id`, else `tags` / `instanceMatchCriteria` with an
  optional `ownerID`).

Fields karpy does not implement are refused by name, never dropped: a node must not silently boot
differently from what the manifest says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from marshmallow import ValidationError

from extender.api import capacity_reservations as cr
from extender.api import nodeclass as nc
from extender.api.kubelet import KubeletConfiguration
from extender.api.nodeclass_schema import MAX_LIST_ITEMS, KubeletSchema, NodeClassSchema
from extender.api.provisioner_defaults import default_provider
from extender.api.provisioner_schema import flatten_errors
from extender.api.schema_text import choices, quote

API_GROUP = nc.API_GROUP
API_VERSION = f"{API_GROUP}/v1"
KIND = "EC2NodeClass"
PLURAL = "ec2nodeclasses"

#: alias family (the part before "@") -> amiFamily (Karpenter v1 `AMIFamily()` over the alias).
ALIAS_FAMILIES = {"al2023": nc.AL2023, "al2": nc.AL2, "bottlerocket": nc.BOTTLEROCKET}
WINDOWS_ALIASES = ("windows2019", "windows2022", "windows2025")
#: v1 fields karpy does not implement: refused, naming the field.
UNSUPPORTED_FIELDS = (
    "connectionTracking",
    "cpuOptions",
    "ipPrefixCount",
    "networkInterfaces",
    "placementGroupSelector",
)
#: Karpenter v1's metadataOptions default: hop limit 1 keeps pods off the node's IMDS.
V1_METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}
#: v1alpha5 fields ec2nodeclass_provider fills from v1 ones (errors are reported on the v1 names).
TRANSLATED_FIELDS = ("amiSelector", "instanceProfile")
#: Fields both versions share, checked by NodeClassSchema under the same names.
SHARED_FIELDS = (
    "userData",
    "tags",
    "blockDeviceMappings",
    "metadataOptions",
    "detailedMonitoring",
    "instanceStorePolicy",
    "context",
)


@dataclass(frozen=True)
class EC2NodeClass:
    name: str
    node_class: nc.NodeClass
    kubelet: KubeletConfiguration = field(default_factory=KubeletConfiguration)
    uid: str = ""


#: An alias version: `latest` or a release (`v20240625`, `1.10.0`), kept to what an SSM path holds.
_ALIAS_VERSION = re.compile(r"^[A-Za-z0-9._-]+$")


def alias_version(terms: Any) -> str:
    """The pinned version of an alias term ("" for `@latest` or no alias)."""
    alias = (
        terms[0].get("alias") if isinstance(terms, list) and terms and isinstance(terms[0], Mapping) else None
    )
    version = str(alias or "").partition("@")[2]
    return "" if version == "latest" else version


def _unsupported(path: str, what: str) -> str:
    return f"{path}: {what} is not supported by karpy"


def _term_list(terms: Any, path: str, errors: list[str]) -> TypeGuard[list[Any]]:
    """Whether `terms` is a selector-term list of 1 to MAX_TERMS items (the CRD's bounds); the
    problem goes to `errors` when it is not."""
    if not isinstance(terms, list) or not terms:
        errors.append(f"{path}: must list at least one term")
        return False
    if len(terms) > MAX_TERMS:
        errors.append(f"{path}: at most {MAX_TERMS} terms")
        return False
    return True


def _ami_selector(terms: Any, family: str, errors: list[str]) -> tuple[str, dict[str, str]]:
    """(amiFamily, v1alpha5 amiSelector) for `amiSelectorTerms`."""
    path = "spec.amiSelectorTerms"
    if not _term_list(terms, path, errors):
        return family, {}
    aliases = [t.get("alias") for t in terms if isinstance(t, Mapping) and t.get("alias")]
    if aliases:
        if len(terms) != 1:
            errors.append(f"{path}: an alias term must be the only term")
            return family, {}
        alias_family, _, version = str(aliases[0]).partition("@")
        if alias_family in WINDOWS_ALIASES:
            errors.append(
                f"{path}[0].alias: {quote(aliases[0])} is not supported: karpy launches Linux nodes only"
            )
        elif alias_family not in ALIAS_FAMILIES:
            errors.append(
                f"{path}[0].alias: family {quote(alias_family)} not in {choices(tuple(ALIAS_FAMILIES))}"
            )
        elif not _ALIAS_VERSION.match(version):
            errors.append(
                f"{path}[0].alias: version {quote(version)} is not 'latest' nor a release such as v20240625"
            )
        elif family == nc.CUSTOM:
            errors.append(_unsupported("spec.amiFamily", "Custom with an alias"))
        return family or ALIAS_FAMILIES.get(alias_family, ""), {}
    if not family:
        errors.append("spec.amiFamily: must specify amiFamily if amiSelectorTerms does not contain an alias")
    selector: dict[str, str] = {}
    ids = [t.get("id") for t in terms if isinstance(t, Mapping)]
    if len(terms) > 1 and all(isinstance(t, Mapping) and set(t) == {"id"} for t in terms):
        return family, {"aws::ids": ",".join(str(i) for i in ids)}
    if len(terms) > 1:
        errors.append(_unsupported(path, "more than one term unless every term is an id"))
        return family, {}
    term = terms[0] if isinstance(terms[0], Mapping) else {}
    if "ssmParameter" in term:
        errors.append(_unsupported(f"{path}[0].ssmParameter", "ssmParameter"))
    tags = term.get("tags") or {}
    selector.update({str(k): str(v) for k, v in tags.items()} if isinstance(tags, Mapping) else {})
    for key, name in (("id", "aws::ids"), ("name", "aws::name"), ("owner", "aws::owners")):
        if term.get(key):
            selector[name] = str(term[key])
    if not selector:
        errors.append(f"{path}[0]: expected at least one of alias, id, name or tags")
    return family, selector


#: selector-term list -> (what its terms may select by, the resource an `id` names, its id pattern).
SELECTOR_TERMS = {
    "subnetSelectorTerms": (("tags", "id"), "subnet", re.compile(r"subnet-[0-9a-z]+")),
    "securityGroupSelectorTerms": (("tags", "id", "name"), "security group", re.compile(r"sg-[0-9a-z]+")),
}
#: The CRD's MaxItems on a term list and MaxProperties on a term's tags.
MAX_TERMS, MAX_TAGS = 30, 20


def _term_fields(term: Any, path: str, keys: tuple[str, ...], errors: list[str]) -> list[str] | None:
    """The fields a selector term sets, in `keys` order; None (reported) if it is not an object
    or names a field a term does not have."""
    if not isinstance(term, Mapping):
        errors.append(f"{path}: expected an object")
        return None
    unknown = sorted(set(term) - set(keys))
    for key in unknown:
        errors.append(f"{path}.{key}: unknown field (a term selects by {choices(keys)})")
    return None if unknown else [key for key in keys if term.get(key) is not None]


def _selector_term(term: Any, path: str, name: str, errors: list[str]) -> nc.SelectorTerm | None:
    """One subnet/security-group term, checked as Karpenter v1's CRD checks it (its CEL rules and
    schema), except that a term mixing `id` (or `name`) with other fields is refused on its own."""
    keys, what, pattern = SELECTOR_TERMS[name]
    present = _term_fields(term, path, keys, errors)
    if present is None:
        return None
    if not present:
        errors.append(f"{path}: expected at least one, got none, {list(keys)}")
        return None
    for key in ("id", "name"):
        if key in present and len(present) > 1:
            errors.append(
                f"{path}.{key}: '{key}' is mutually exclusive, cannot be set with a combination "
                f"of other fields in a {what} selector term"
            )
            return None
    if "tags" in present:
        tags = _tag_map(term["tags"], f"{path}.tags", errors)
        return None if tags is None else nc.SelectorTerm(tags=tags)
    key = present[0]
    value = term[key]
    if not isinstance(value, str) or not value:
        errors.append(f"{path}.{key}: must be a non-empty string")
        return None
    if key == "id" and not pattern.search(value):
        errors.append(f"{path}.id: {quote(value)} does not match {quote(pattern.pattern)}")
        return None
    return nc.SelectorTerm(id=value) if key == "id" else nc.SelectorTerm(name=value)


def _tag_map(tags: Any, path: str, errors: list[str]) -> dict[str, str] | None:
    """A term's `tags`, checked as the CRD checks it (non-empty strings, at most MAX_TAGS)."""
    if not isinstance(tags, Mapping) or not tags:
        errors.append(f"{path}: must not be empty")
        return None
    if not all(isinstance(v, str) for v in tags.values()):
        errors.append(f"{path}: values must be strings")
        return None
    if any(k == "" or v == "" for k, v in tags.items()):
        errors.append(f"{path}: empty tag keys or values aren't supported")
        return None
    if len(tags) > MAX_TAGS:
        errors.append(f"{path}: at most {MAX_TAGS} tags")
        return None
    return {str(k): v for k, v in tags.items()}


#: A capacity reservation term's fields and their patterns (the CRD's).
RESERVATION_TERM_KEYS = ("tags", "id", "ownerID", "instanceMatchCriteria")
_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
_OWNER_ID = re.compile(r"^[0-9]{12}$")


def _reservation_term(term: Any, path: str, errors: list[str]) -> cr.ReservationTerm | None:
    """One `capacityReservationSelectorTerms` item, checked as Karpenter v1.14's CRD checks it
    (`pkg/apis/v1/ec2nodeclass.go`): an `id` alone, or `tags` and/or `instanceMatchCriteria`,
    either narrowed by `ownerID`. A term mixing `id` with others is refused on its own (the CRD's
    rule refuses it only when every term does)."""
    present = _term_fields(term, path, RESERVATION_TERM_KEYS, errors)
    if present is None:
        return None
    if not {"tags", "id", "instanceMatchCriteria"} & set(present):
        errors.append(f"{path}: expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']")
        return None
    if "id" in present and len(present) > 1:
        errors.append(
            f"{path}.id: 'id' is mutually exclusive, cannot be set along with other fields in a "
            "capacity reservation selector term"
        )
        return None
    for key, pattern in (("id", _RESERVATION_ID), ("ownerID", _OWNER_ID)):
        value = term.get(key)
        if value is not None and not (isinstance(value, str) and pattern.match(value)):
            errors.append(f"{path}.{key}: {quote(value)} does not match {quote(pattern.pattern)}")
            return None
    criteria = term.get("instanceMatchCriteria")
    if criteria is not None and criteria not in cr.INSTANCE_MATCH_CRITERIA:
        errors.append(
            f"{path}.instanceMatchCriteria: {quote(criteria)} not in {choices(cr.INSTANCE_MATCH_CRITERIA)}"
        )
        return None
    tags = _tag_map(term["tags"], f"{path}.tags", errors) if "tags" in present else {}
    if tags is None:
        return None
    return cr.ReservationTerm(
        id=str(term.get("id") or ""),
        owner_id=str(term.get("ownerID") or ""),
        tags=tags,
        instance_match_criteria=str(criteria or ""),
    )


def _reservation_terms(spec: Mapping[str, Any], errors: list[str]) -> cr.ReservationSelector:
    """`capacityReservationSelectorTerms` (optional; terms ORed)."""
    terms = spec.get("capacityReservationSelectorTerms")
    path = "spec.capacityReservationSelectorTerms"
    if terms is None:
        return ()
    if not isinstance(terms, list):
        errors.append(f"{path}: expected a list of terms")
        return ()
    if len(terms) > MAX_TERMS:
        errors.append(f"{path}: at most {MAX_TERMS} terms")
        return ()
    found = [_reservation_term(term, f"{path}[{i}]", errors) for i, term in enumerate(terms)]
    return tuple(term for term in found if term is not None)


def _selector_terms(spec: Mapping[str, Any], name: str, errors: list[str]) -> nc.Selector:
    """A v1 subnet/security-group selector-term list (terms ORed, as in Karpenter v1)."""
    terms = spec.get(name)
    path = f"spec.{name}"
    if not _term_list(terms, path, errors):
        return ()
    found = [_selector_term(term, f"{path}[{i}]", name, errors) for i, term in enumerate(terms)]
    return tuple(term for term in found if term is not None)


def ec2nodeclass_provider(spec: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The v1alpha5 provider block an EC2NodeClass spec stands for, and the v1-only problems."""
    errors: list[str] = []
    for name in UNSUPPORTED_FIELDS:
        if spec.get(name) is not None:
            errors.append(_unsupported(f"spec.{name}", name))
    role, profile = spec.get("role"), spec.get("instanceProfile")
    if bool(role) == bool(profile):
        errors.append("spec: must specify exactly one of ['role', 'instanceProfile']")
    family, ami_selector = _ami_selector(
        spec.get("amiSelectorTerms"), str(spec.get("amiFamily") or ""), errors
    )
    # Shared, not copied: the schema only reads them, and copying an oversized map item by item
    # would cost what its field's bound saves (the one edit, below, rebuilds what it changes).
    provider: dict[str, Any] = {name: spec[name] for name in SHARED_FIELDS if spec.get(name) is not None}
    provider.setdefault("metadataOptions", dict(V1_METADATA_OPTIONS))
    provider.update(
        amiFamily=family,
        # A role stands for the instance profile karpy launches with (NodeClass.role).
        instanceProfile=str(profile or role or ""),
    )
    if ami_selector:
        provider["amiSelector"] = ami_selector
    mappings = provider.get("blockDeviceMappings")
    if isinstance(mappings, list) and len(mappings) <= MAX_LIST_ITEMS:  # longer: refused by its bound
        provider["blockDeviceMappings"] = [_without_initialization_rate(m, errors) for m in mappings]
    return provider, errors


def _without_initialization_rate(mapping: Any, errors: list[str]) -> Any:
    """A block device mapping without v1's `ebs.volumeInitializationRate` (refused by name)."""
    ebs = mapping.get("ebs") if isinstance(mapping, dict) else None
    if not isinstance(ebs, dict) or "volumeInitializationRate" not in ebs:
        return mapping
    if ebs["volumeInitializationRate"] is not None:
        errors.append(
            _unsupported(
                "spec.blockDeviceMappings[].ebs.volumeInitializationRate", "volumeInitializationRate"
            )
        )
    return {**mapping, "ebs": {k: v for k, v in ebs.items() if k != "volumeInitializationRate"}}


def load_ec2nodeclass(
    obj: Mapping[str, Any], *, cluster_name: str = "", cluster_endpoint: str = ""
) -> EC2NodeClass:
    """Parse and validate; raises ValidationError whose `messages` is a list of `path: message`."""
    raw_metadata = obj.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
    name = str(metadata.get("name") or "")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ValidationError(["spec: missing required field"])
    provider, errors = ec2nodeclass_provider(spec)
    subnets = _selector_terms(spec, "subnetSelectorTerms", errors)
    security_groups = _selector_terms(spec, "securityGroupSelectorTerms", errors)
    reservations = _reservation_terms(spec, errors)
    public_ip = spec.get("associatePublicIPAddress")
    if public_ip is not None and not isinstance(public_ip, bool):
        errors.append(f"spec.associatePublicIPAddress: {quote(public_ip)} is not a boolean")
    if not name:
        errors.insert(0, "metadata.name: missing required field")
    if obj.get("apiVersion", API_VERSION) != API_VERSION or obj.get("kind", KIND) != KIND:
        errors.insert(0, f"expected {API_VERSION} {KIND}, got {obj.get('apiVersion')} {obj.get('kind')}")
    if cluster_name:
        default_provider(provider, cluster_name=cluster_name, cluster_endpoint=cluster_endpoint)
    node_class: nc.NodeClass | None = None
    kubelet = KubeletConfiguration()
    try:
        node_class = NodeClassSchema().load(provider)
    except ValidationError as err:
        # The translated v1alpha5 fields were checked above, under their v1 names.
        translated = tuple(f"spec.{name}" for name in TRANSLATED_FIELDS)
        errors += [line for line in flatten_errors(err.messages, "spec") if not line.startswith(translated)]
    try:
        kubelet = KubeletSchema().load(spec.get("kubelet") or {})
    except ValidationError as err:
        errors += flatten_errors(err.messages, "spec.kubelet")
    if errors or node_class is None:
        raise ValidationError(errors)
    node_class = replace(
        node_class,
        ami_version=alias_version(spec.get("amiSelectorTerms")),
        subnet_selector=subnets,
        security_group_selector=security_groups,
        capacity_reservation_selector=reservations,
        associate_public_ip_address=public_ip,
    )
    if role := str(spec.get("role") or ""):
        node_class = replace(node_class, role=role, instance_profile="")
    return EC2NodeClass(name=name, node_class=node_class, kubelet=kubelet, uid=str(metadata.get("uid") or ""))


def validate_ec2nodeclass(obj: Any, *, cluster_name: str = "my-cluster") -> list[str]:
    """Every problem with an EC2NodeClass manifest, one `path: message` line each; [] when valid."""
    if not isinstance(obj, Mapping):
        return ["expected an object"]
    try:
        load_ec2nodeclass(obj, cluster_name=cluster_name)
    except ValidationError as err:
        return list(err.messages)
    return []
