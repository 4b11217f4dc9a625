"""marshmallow schemas for the node configuration: a Provisioner's inline `spec.provider`, an
AWSNodeTemplate's `spec` (both -> extender.api.nodeclass.NodeClass) and `spec.kubeletConfiguration`
(-> extender.api.kubelet.KubeletConfiguration).

Values a kubelet or EC2 would refuse are refused here, with the field path, so a bad setting is
an admission error rather than a node that never joins.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from marshmallow import (
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_load,
    pre_load,
    validate,
    validates_schema,
)

from extender.api import nodeclass as nc
from extender.api import ranges
from extender.api.kubelet import EVICTION_SIGNALS, RESERVABLE, KubeletConfiguration
from extender.api.quantity import QuantityError, parse_quantity
from extender.api.schema_text import Base, BoundedDict, BoundedList, choices, quote, too_many

# Go's time.ParseDuration grammar (kubelet's metav1.Duration), on text of bounded length.
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PERCENT = re.compile(r"^([0-9]+(\.[0-9]+)?)%$")
MAX_PERCENT_LENGTH = 32
#: kubelet's defaults, which a lone image GC threshold is checked against.
IMAGE_GC_HIGH_DEFAULT, IMAGE_GC_LOW_DEFAULT = 85, 80
MAX_VOLUME_BYTES = 64 * 2**40
#: EC2's ranges (CreateVolume): iops by volume type, throughput for gp3 only.
IOPS_RANGES = {"gp3": (3000, 16000), "io1": (100, 64000), "io2": (100, 64000)}
THROUGHPUT_RANGE = (125, 1000)


def validate_selector(value: Mapping[str, str]) -> None:
    if not value:
        raise ValidationError("must not be empty")
    errors = {
        f"[{quote(k)}]": ["key and value must be non-empty"] for k, v in value.items() if not k or not v
    }
    if errors:
        raise ValidationError(errors)


def tag_count_problem(value: Mapping[Any, Any]) -> str | None:
    """More tags than an instance can carry next to karpy's own, or None."""
    if (extra := len(value) - sum(key in value for key in nc.KARPY_TAG_KEYS)) > nc.MAX_USER_TAGS:
        return (
            f"{extra} tags; EC2 allows {nc.MAX_EC2_TAGS} per instance and karpy adds"
            f" {len(nc.KARPY_INSTANCE_TAGS)} of its own ({choices(nc.KARPY_INSTANCE_TAGS)}), so at most"
            f" {nc.MAX_USER_TAGS}"
        )
    return None


def _validate_tags(value: Mapping[str, str]) -> None:
    if "" in value:
        raise ValidationError({'[""]': ["empty tag keys are not supported"]})
    errors = {
        f"[{quote(key)}]": [problem] for key, tag in value.items() if (problem := nc.tag_problem(key, tag))
    }
    if errors:
        raise ValidationError(errors)


def _validate_ip(value: str) -> None:
    try:
        ipaddress.ip_address(value)
    except ValueError as err:
        raise ValidationError(f"{quote(value)} is not an IP address") from err


#: Entries of any other map (selectors, kubelet thresholds): a few are ever meaningful.
MAX_MAP_ENTRIES = 50
#: List fields: the Karpenter CRDs' maxItems on blockDeviceMappings; clusterDNS likewise.
MAX_LIST_ITEMS = 50
#: EC2 takes at most 16 KB of user data, before base64 (RunInstances); karpy adds its own to it.
MAX_USER_DATA_BYTES = 16 * 1024


def _map(validator: Any = None, **kwargs: Any) -> BoundedDict:
    return BoundedDict(max_items=MAX_MAP_ENTRIES, load_default=dict, validate=validator, **kwargs)


def _user_data(value: str) -> None:
    if (size := len(value.encode("utf-8", "surrogatepass"))) > MAX_USER_DATA_BYTES:
        raise ValidationError(f"{size} bytes; EC2 takes at most {MAX_USER_DATA_BYTES} bytes of user data")


class _QuantityText(fields.Field[str]):
    """A ResourceList value (int-or-string in the CRD), kept as text for rendering."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValidationError("must be a quantity")
        return str(value)


def _quantities(validator: Any) -> BoundedDict:
    return _map(validator, values=_QuantityText())


def _count(low: int = 0) -> fields.Integer:
    """A kubelet count (an int32 in kubelet's own configuration)."""

    def check(value: int) -> None:
        if value < 0:
            raise ValidationError("cannot be negative")
        if (problem := ranges.count_problem(value, low)) is not None:
            raise ValidationError(problem)

    return fields.Integer(strict=True, load_default=None, validate=check)


def _reserved(value: Mapping[str, str]) -> None:
    errors: dict[str, list[str]] = {}
    for name, raw in value.items():
        if name not in RESERVABLE:
            errors[f"[{quote(name)}]"] = [f"not in {choices(RESERVABLE)}"]
            continue
        try:
            amount = parse_quantity(raw)
        except QuantityError as err:
            errors[f"[{quote(name)}]"] = [str(err)]
            continue
        if (problem := ranges.quantity_problem(amount)) is not None:
            errors[f"[{quote(name)}]"] = [f"{quote(raw)} {problem}"]
        elif name == "pid" and amount != int(amount):
            errors[f"[{quote(name)}]"] = ["must be a whole number of process IDs"]
    if errors:
        raise ValidationError(errors)


def threshold_problem(raw: str) -> str | None:
    """Why `raw` is not an eviction threshold kubelet accepts ("100Mi", "10%"), or None."""
    if len(raw) <= MAX_PERCENT_LENGTH and (match := _PERCENT.match(raw)):
        return None if 0 < float(match.group(1)) <= 100 else "a percentage must be above 0% and at most 100%"
    try:
        amount = parse_quantity(raw)
    except QuantityError as err:
        return f"{err} (a quantity such as 100Mi, or a percentage such as 10%)"
    if (problem := ranges.quantity_problem(amount)) is not None:
        return f"{quote(raw)} {problem}"
    return None


def _eviction(value: Mapping[str, str]) -> None:
    errors: dict[str, list[str]] = {}
    for signal, raw in value.items():
        if signal not in EVICTION_SIGNALS:
            errors[f"[{quote(signal)}]"] = [f"not in {choices(EVICTION_SIGNALS)}"]
        elif (problem := threshold_problem(raw)) is not None:
            errors[f"[{quote(signal)}]"] = [problem]
    if errors:
        raise ValidationError(errors)


def go_duration_seconds(raw: str) -> float | None:
    """Go's time.ParseDuration of unsigned text, in seconds; None when it is not one or is above
    Go's largest duration (ranges.MAX_DURATION_SECONDS)."""
    if len(raw) > ranges.MAX_DURATION_LENGTH or not _DURATION.match(raw):
        return None
    seconds = sum(float(n) * _GO_UNITS[unit] for n, unit in _DURATION_PART.findall(raw))
    return seconds if ranges.seconds_problem(seconds) is None else None


def _grace_periods(value: Mapping[str, str]) -> None:
    errors = {
        f"[{quote(signal)}]": [
            f"{quote(raw)} is not a duration such as 1m30s, up to {ranges.MAX_DURATION_TEXT}"
        ]
        for signal, raw in value.items()
        if go_duration_seconds(raw) is None
    }
    if errors:
        raise ValidationError(errors)


class KubeletSchema(Base):
    clusterDNS = BoundedList(
        fields.String(validate=_validate_ip), max_items=MAX_LIST_ITEMS, load_default=list
    )
    maxPods = _count(low=1)
    podsPerCore = _count()
    systemReserved = _quantities(_reserved)
    kubeReserved = _quantities(_reserved)
    evictionHard = _map(_eviction)
    evictionSoft = _map(_eviction)
    evictionSoftGracePeriod = _map(_grace_periods)
    evictionMaxPodGracePeriod = _count()
    imageGCHighThresholdPercent = fields.Integer(
        strict=True, load_default=None, validate=validate.Range(min=0, max=100)
    )
    imageGCLowThresholdPercent = fields.Integer(
        strict=True, load_default=None, validate=validate.Range(min=0, max=100)
    )
    cpuCFSQuota = fields.Boolean(truthy={True}, falsy={False}, load_default=None)

    @validates_schema
    def check_pairs(self, data: dict[str, Any], **_: Any) -> None:
        # kubelet refuses a soft threshold without a grace period, and a grace period for nothing.
        soft, grace = data["evictionSoft"], data["evictionSoftGracePeriod"]
        errors: dict[str, list[str]] = {}
        for signal in soft.keys() - grace.keys():
            errors[f"evictionSoftGracePeriod[{quote(signal)}]"] = ["missing: evictionSoft sets this signal"]
        for signal in grace.keys() - soft.keys():
            errors[f"evictionSoftGracePeriod[{quote(signal)}]"] = ["evictionSoft does not set this signal"]
        high, low = data["imageGCHighThresholdPercent"], data["imageGCLowThresholdPercent"]
        if (high, low) != (None, None):
            high = IMAGE_GC_HIGH_DEFAULT if high is None else high
            low = IMAGE_GC_LOW_DEFAULT if low is None else low
            if low >= high:
                errors["imageGCLowThresholdPercent"] = [
                    f"{low} must be below imageGCHighThresholdPercent ({high}; kubelet's default is "
                    f"{IMAGE_GC_HIGH_DEFAULT})"
                ]
        if errors:
            raise ValidationError(errors)

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> KubeletConfiguration:
        return KubeletConfiguration(
            cluster_dns=tuple(data["clusterDNS"]),
            max_pods=data["maxPods"],
            pods_per_core=data["podsPerCore"],
            system_reserved=data["systemReserved"],
            kube_reserved=data["kubeReserved"],
            eviction_hard=data["evictionHard"],
            eviction_soft=data["evictionSoft"],
            eviction_soft_grace_period=data["evictionSoftGracePeriod"],
            eviction_max_pod_grace_period=data["evictionMaxPodGracePeriod"],
            image_gc_high_threshold_percent=data["imageGCHighThresholdPercent"],
            image_gc_low_threshold_percent=data["imageGCLowThresholdPercent"],
            cpu_cfs_quota=data["cpuCFSQuota"],
        )


class ClusterSchema(Base):
    name = fields.String(required=True, validate=validate.Length(min=1, error="must not be empty"))
    endpoint = fields.String(load_default="")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> nc.ClusterRef:
        return nc.ClusterRef(**data)


class StrictSchema(Schema):
    """Unknown fields refused (RAISE); a map with more keys than the schema declares is refused
    before any is read: a 300,000-key metadataOptions costs one len(), not 300,000 error lines."""

    class Meta:
        unknown = RAISE

    @pre_load
    def bound_fields(self, data: Any, **_: Any) -> Any:
        if isinstance(data, Mapping) and len(data) > len(self.load_fields):
            raise ValidationError(
                too_many(len(data), len(self.load_fields), "fields") + ", unknown fields among them"
            )
        return data


class _VolumeSize(fields.Field[float]):
    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        try:
            size = parse_quantity(value)
        except QuantityError as err:
            raise ValidationError(str(err)) from err
        if not 0 < size <= MAX_VOLUME_BYTES:
            raise ValidationError(f"{quote(value)} must be above 0 and at most 64Ti")
        return size


def _bool() -> fields.Boolean:
    return fields.Boolean(truthy={True}, falsy={False}, load_default=None)


class EBSSchema(StrictSchema):
    volumeSize = _VolumeSize(load_default=None)
    volumeType = fields.String(
        load_default="",
        validate=validate.OneOf(nc.VOLUME_TYPES, error='"{input}" not in ' + choices(nc.VOLUME_TYPES)),
    )
    iops = fields.Integer(strict=True, load_default=None)
    throughput = fields.Integer(strict=True, load_default=None)
    encrypted = _bool()
    kmsKeyID = fields.String(load_default="")
    deleteOnTermination = _bool()
    snapshotID = fields.String(load_default="")

    @validates_schema
    def check_volume(self, data: dict[str, Any], **_: Any) -> None:
        kind = data["volumeType"] or "gp3"
        if data["volumeSize"] is None and not data["snapshotID"]:
            raise ValidationError("volumeSize or snapshotID is required", "volumeSize")
        if (iops := data["iops"]) is not None:
            if kind not in IOPS_RANGES:
                raise ValidationError(f"only {choices(tuple(IOPS_RANGES))} volumes take iops", "iops")
            low, high = IOPS_RANGES[kind]
            if not low <= iops <= high:
                raise ValidationError(f"{iops} is outside {low}-{high} for {kind}", "iops")
        if (throughput := data["throughput"]) is not None:
            if kind != "gp3":
                raise ValidationError("only gp3 volumes take throughput", "throughput")
            low, high = THROUGHPUT_RANGE
            if not low <= throughput <= high:
                raise ValidationError(f"{throughput} is outside {low}-{high} MiB/s", "throughput")
        if data["kmsKeyID"] and data["encrypted"] is False:
            raise ValidationError("a KMS key needs encrypted: true", "kmsKeyID")

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> nc.EBS:
        return nc.EBS(
            volume_size=data["volumeSize"],
            volume_type=data["volumeType"],
            iops=data["iops"],
            throughput=data["throughput"],
            encrypted=data["encrypted"],
            kms_key_id=data["kmsKeyID"],
            delete_on_termination=data["deleteOnTermination"],
            snapshot_id=data["snapshotID"],
        )


class BlockDeviceMappingSchema(StrictSchema):
    deviceName = fields.String(required=True, validate=validate.Length(min=1))
    ebs = fields.Nested(EBSSchema, required=True)
    rootVolume = fields.Boolean(truthy={True}, falsy={False}, load_default=False)

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> nc.BlockDeviceMapping:
        return nc.BlockDeviceMapping(data["deviceName"], data["ebs"], data["rootVolume"])


def _one_of(*options: str) -> validate.OneOf:
    return validate.OneOf(options, error='"{input}" not in ' + choices(options))


class MetadataOptionsSchema(StrictSchema):
    defaults = nc.MetadataOptions()
    httpEndpoint = fields.String(load_default=defaults.http_endpoint, validate=_one_of("enabled", "disabled"))
    httpProtocolIPv6 = fields.String(
        load_default=defaults.http_protocol_ipv6, validate=_one_of("enabled", "disabled")
    )
    httpPutResponseHopLimit = fields.Integer(
        strict=True, load_default=defaults.http_put_response_hop_limit, validate=validate.Range(min=1, max=64)
    )
    httpTokens = fields.String(load_default=defaults.http_tokens, validate=_one_of("required", "optional"))

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> nc.MetadataOptions:
        return nc.MetadataOptions(
            http_endpoint=data["httpEndpoint"],
            http_protocol_ipv6=data["httpProtocolIPv6"],
            http_put_response_hop_limit=data["httpPutResponseHopLimit"],
            http_tokens=data["httpTokens"],
        )


def _ami_family(value: str) -> None:
    if value in nc.UNSUPPORTED_AMI_FAMILIES:
        raise ValidationError(
            f"{quote(value)} is not supported: karpy launches Linux nodes only "
            f"(supported: {choices(nc.AMI_FAMILIES)})"
        )
    if value not in ("", *nc.AMI_FAMILIES):
        raise ValidationError(f"{quote(value)} not in {choices(nc.AMI_FAMILIES)}")


class NodeClassSchema(StrictSchema):
    """A Provisioner's `spec.provider` and an AWSNodeTemplate's `spec`: one set of fields. Strict,
    as Karpenter decodes the provider: a misspelt selector must not be silently dropped."""

    apiVersion = fields.String()
    kind = fields.String()
    instanceProfile = fields.String(load_default="")
    launchTemplate = fields.String(load_default="")
    subnetSelector = _map(validate_selector)
    securityGroupSelector = _map(validate_selector)
    tags = BoundedDict(
        max_items=nc.MAX_EC2_TAGS + len(nc.KARPY_TAG_KEYS),
        precheck=tag_count_problem,
        load_default=dict,
        validate=_validate_tags,
    )
    amiFamily = fields.String(load_default="", validate=_ami_family)
    amiSelector = _map(validate_selector)
    userData = fields.String(load_default=None, validate=_user_data)
    blockDeviceMappings = BoundedList(
        fields.Nested(BlockDeviceMappingSchema), max_items=MAX_LIST_ITEMS, load_default=list
    )
    metadataOptions = fields.Nested(MetadataOptionsSchema, load_default=None)
    detailedMonitoring = _bool()
    instanceStorePolicy = fields.String(load_default="", validate=validate.OneOf([nc.RAID0]))
    context = fields.String(load_default="")
    cluster = fields.Nested(ClusterSchema, load_default=None)

    @validates_schema
    def check_profile(self, data: dict[str, Any], **_: Any) -> None:
        # A launch template carries its own instance profile.
        if not data.get("instanceProfile") and not data.get("launchTemplate"):
            raise ValidationError("missing required field", "instanceProfile")

    @validates_schema
    def check_launch_template(self, data: dict[str, Any], **_: Any) -> None:
        # Karpenter: an unmanaged launch template already fixes what these would set.
        if data.get("launchTemplate"):
            fixed = ("userData", "amiSelector", "metadataOptions", "instanceStorePolicy")
            clashing = [f for f in fixed if data.get(f)]
            clashing += ["blockDeviceMappings"] if data.get("blockDeviceMappings") else []
            for name in clashing:
                raise ValidationError("cannot be set together with launchTemplate", name)

    @validates_schema
    def check_custom(self, data: dict[str, Any], **_: Any) -> None:
        # No AMI is published for a custom family (Karpenter requires amiSelector too).
        if (
            data.get("amiFamily") == nc.CUSTOM
            and not data.get("amiSelector")
            and not data.get("launchTemplate")
        ):
            raise ValidationError("a Custom AMI family needs amiSelector", "amiSelector")

    @validates_schema
    def check_block_devices(self, data: dict[str, Any], **_: Any) -> None:
        mappings = data.get("blockDeviceMappings") or []
        if sum(1 for m in mappings if m.root_volume) > 1:
            raise ValidationError("at most one mapping may set rootVolume", "blockDeviceMappings")

    @validates_schema
    def check_user_data(self, data: dict[str, Any], **_: Any) -> None:
        # Bottlerocket merges its settings into the user's TOML, so it has to parse.
        if data.get("amiFamily") == nc.BOTTLEROCKET and data.get("userData"):
            try:
                tomllib.loads(data["userData"])
            except tomllib.TOMLDecodeError as err:
                raise ValidationError(f"Bottlerocket user data is not TOML: {err}", "userData") from err

    @post_load
    def make(self, data: dict[str, Any], **_: Any) -> nc.NodeClass:
        return nc.NodeClass(
            instance_profile=data["instanceProfile"],
            launch_template=data["launchTemplate"],
            subnet_selector=nc.tag_terms(data["subnetSelector"]),
            security_group_selector=nc.tag_terms(data["securityGroupSelector"]),
            tags=data["tags"],
            ami_family=data["amiFamily"],
            ami_selector=data["amiSelector"],
            user_data=data["userData"],
            block_device_mappings=tuple(data["blockDeviceMappings"]),
            metadata_options=data["metadataOptions"] or nc.MetadataOptions(),
            detailed_monitoring=data["detailedMonitoring"],
            instance_store_policy=data["instanceStorePolicy"],
            context=data["context"],
            cluster=data["cluster"],
        )
