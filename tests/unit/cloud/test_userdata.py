"""User data of every AMI family x (plain, custom userData, kubelet settings, taints and labels),
read back with a real parser of its format (email for MIME, yaml for nodeadm's NodeConfig, shlex
for bootstrap.sh, tomllib for Bottlerocket), and the allocatable packing uses for the same
settings checked against what those rendered settings imply for the kubelet."""

from __future__ import annotations

import email
import math
import shlex
import tomllib
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

import pytest
import yaml

from extender.api import nodeclass as nc
from extender.api.kubelet import KubeletConfiguration
from extender.api.provisioner import Taint
from extender.api.quantity import parse_quantity
from extender.cloud.aws.bootstrap import NodeBootstrap, render
from extender.scheduling.instancetypes import InstanceType, NodeSettings

CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM="
ENDPOINT = "https://ABCD.gr7.us-west-2.eks.amazonaws.com"
CIDR = "10.100.0.0/16"
GIB, MIB = 2**30, 2**20

KUBELET = KubeletConfiguration(
    cluster_dns=("10.100.0.10",),
    max_pods=20,
    system_reserved={"cpu": "100m", "memory": "200Mi"},
    kube_reserved={"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "2Gi"},
    eviction_hard={"memory.available": "200Mi", "nodefs.available": "15%"},
    eviction_soft={"memory.available": "500Mi"},
    eviction_soft_grace_period={"memory.available": "1m30s"},
    image_gc_high_threshold_percent=80,
    image_gc_low_threshold_percent=60,
    cpu_cfs_quota=False,
)
LABELS = {"team": "search", "karpenter.sh/provisioner-name": "default", "kubernetes.io/arch": "amd64"}
TAINTS = (Taint("dedicated", "NoSchedule", "search"), Taint("gpu", "NoExecute"))
CUSTOM = {
    nc.AL2023: 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n--BOUNDARY\n'
    'Content-Type: text/x-shellscript; charset="us-ascii"\n\n#!/bin/bash\necho custom\n\n--BOUNDARY--\n',
    nc.AL2: "#!/bin/bash\necho custom\n",
    nc.UBUNTU: "#!/bin/bash\necho custom\n",
    nc.BOTTLEROCKET: "[settings.kubernetes]\nkube-api-qps = 30\n"
    "[settings.host-containers.admin]\nenabled = true\n"
    '[settings.kubernetes.node-labels]\n"team" = "from-user"\n"mine" = "kept"\n',
}
CASES = ("plain", "custom-user-data", "kubelet", "taints-and-labels")
FAMILIES = (nc.AL2023, nc.AL2, nc.UBUNTU, nc.BOTTLEROCKET)


def node_for(family: str, case: str) -> NodeBootstrap:
    return NodeBootstrap(
        cluster_name="demo",
        endpoint=ENDPOINT,
        ca_bundle=CA,
        cluster_cidr=CIDR,
        kubelet=KUBELET if case == "kubelet" else KubeletConfiguration(cluster_dns=("10.100.0.10",)),
        labels=LABELS if case == "taints-and-labels" else {"karpenter.sh/provisioner-name": "default"},
        taints=TAINTS if case == "taints-and-labels" else (),
        user_data=CUSTOM[family] if case == "custom-user-data" else None,
    )


@dataclass
class Read:
    """What a node would join with, as read back from its user data."""

    cluster: str = ""
    endpoint: str = ""
    ca: str = ""
    cluster_dns: str = ""
    kubelet: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: set[tuple[str, str, str]] = field(default_factory=set)
    #: Evidence the user's own user data survived.
    custom: str = ""
    #: The instance-store disks are striped and hold kubelet's nodefs (instanceStorePolicy RAID0).
    raid0: bool = False


def _mime(text: str) -> list[Message]:
    message = email.message_from_string(text)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    parts = [p for p in message.get_payload() if isinstance(p, Message)]
    assert parts, "an empty archive"
    return parts


def _pairs(text: str, sep: str = "=") -> dict[str, str]:
    return dict(item.split(sep, 1) for item in text.strip('"').split(",") if item)


def read_nodeadm(text: str) -> Read:
    parts = _mime(text)
    last = parts[-1]
    assert last.get_content_type() == "application/node.eks.aws"
    doc = yaml.safe_load(last.get_payload())
    # nodeadm's NodeConfig schema (node.eks.aws/v1alpha1): only fields it defines.
    assert doc["apiVersion"] == "node.eks.aws/v1alpha1" and doc["kind"] == "NodeConfig"
    assert set(doc["spec"]) <= {"cluster", "kubelet", "containerd", "instance", "featureGates"}
    cluster, kubelet = doc["spec"]["cluster"], doc["spec"]["kubelet"]
    assert set(cluster) == {"name", "apiServerEndpoint", "certificateAuthority", "cidr"}
    assert cluster["cidr"] == CIDR
    assert set(kubelet) <= {"config", "flags"}
    config = dict(kubelet["config"])
    labels: dict[str, str] = {}
    for flag in kubelet.get("flags", []):
        name, _, value = flag.partition("=")
        assert name == "--node-labels"
        labels.update(_pairs(value))
    taints = {(t["key"], t.get("value", ""), t["effect"]) for t in config.pop("registerWithTaints", [])}
    # nodeadm's InstanceOptions.LocalStorage: strategy RAID0 (or Mount), nothing else.
    storage = doc["spec"].get("instance", {}).get("localStorage", {})
    assert set(doc["spec"].get("instance", {})) <= {"localStorage"} and set(storage) <= {"strategy"}
    return Read(
        raid0=storage.get("strategy") == "RAID0",
        cluster=cluster["name"],
        endpoint=cluster["apiServerEndpoint"],
        ca=cluster["certificateAuthority"],
        cluster_dns=config.pop("clusterDNS", [""])[0],
        kubelet=config,
        labels=labels,
        taints=taints,
        custom="".join(str(p.get_payload()) for p in parts[:-1]),
    )


# bootstrap.sh --kubelet-extra-args flag -> kubelet config field
_FLAGS = {
    "max-pods": ("maxPods", int),
    "system-reserved": ("systemReserved", _pairs),
    "kube-reserved": ("kubeReserved", _pairs),
    "eviction-hard": ("evictionHard", lambda v: _pairs(v, "<")),
    "eviction-soft": ("evictionSoft", lambda v: _pairs(v, "<")),
    "eviction-soft-grace-period": ("evictionSoftGracePeriod", _pairs),
    "image-gc-high-threshold": ("imageGCHighThresholdPercent", int),
    "image-gc-low-threshold": ("imageGCLowThresholdPercent", int),
    "cpu-cfs-quota": ("cpuCFSQuota", lambda v: v == "true"),
}


def read_bootstrap_sh(text: str) -> Read:
    parts = _mime(text)
    script = str(parts[-1].get_payload())
    assert parts[-1].get_content_type() == "text/x-shellscript"
    assert script.startswith("#!/bin/bash -xe\n")
    command = shlex.split(script.split("\n", 2)[2].replace("\\\n", " "))
    assert command[0] == "/etc/eks/bootstrap.sh"
    options = dict(zip(command[2::2], command[3::2], strict=True))
    # bootstrap.sh's --local-disks takes raid0 or mount.
    assert options.get("--local-disks", "raid0") in ("raid0", "mount")
    read = Read(
        raid0=options.get("--local-disks") == "raid0",
        cluster=command[1],
        endpoint=options["--apiserver-endpoint"],
        ca=options["--b64-cluster-ca"],
        cluster_dns=options.get("--dns-cluster-ip", ""),
        custom="".join(str(p.get_payload()) for p in parts[:-1]),
    )
    for arg in shlex.split(options.get("--kubelet-extra-args", "")):
        name, _, value = arg[2:].partition("=")
        if name == "node-labels":
            read.labels = _pairs(value)
        elif name == "register-with-taints":
            for taint in value.strip('"').split(","):
                key_value, _, effect = taint.rpartition(":")
                key, _, val = key_value.partition("=")
                read.taints.add((key, val, effect))
        else:
            field_name, parse = _FLAGS[name]
            read.kubelet[field_name] = parse(value)
    if "maxPods" in read.kubelet:
        assert options["--use-max-pods"] == "false"
    return read


# Bottlerocket settings.kubernetes key -> kubelet config field
_SETTINGS = {
    "max-pods": "maxPods",
    "system-reserved": "systemReserved",
    "kube-reserved": "kubeReserved",
    "eviction-hard": "evictionHard",
    "eviction-soft": "evictionSoft",
    "eviction-soft-grace-period": "evictionSoftGracePeriod",
    "image-gc-high-threshold-percent": "imageGCHighThresholdPercent",
    "image-gc-low-threshold-percent": "imageGCLowThresholdPercent",
    "cpu-cfs-quota-enforced": "cpuCFSQuota",
}


def read_bottlerocket(text: str) -> Read:
    settings = tomllib.loads(text)["settings"]
    k8s = settings["kubernetes"]
    kubelet = {_SETTINGS[k]: v for k, v in k8s.items() if k in _SETTINGS}
    for name in ("imageGCHighThresholdPercent", "imageGCLowThresholdPercent"):
        if name in kubelet:
            assert isinstance(kubelet[name], str)  # Bottlerocket's API types them as strings
            kubelet[name] = int(kubelet[name])
    taints = {
        (key, value, effect)
        for key, entries in k8s.get("node-taints", {}).items()
        for value, _, effect in (e.rpartition(":") for e in entries)
    }
    custom = f"qps={k8s.get('kube-api-qps')} admin={settings.get('host-containers', {}).get('admin')}"
    mount = settings.get("bootstrap-commands", {}).get("000-mount-instance-storage", {})
    return Read(
        raid0=mount.get("commands", [[]])[0] == ["apiclient", "ephemeral-storage", "init"]
        and mount.get("mode") == "always"
        and mount.get("essential") is True,
        cluster=k8s["cluster-name"],
        endpoint=k8s["api-server"],
        ca=k8s["cluster-certificate"],
        cluster_dns=k8s.get("cluster-dns-ip", ""),
        kubelet=kubelet,
        labels=dict(k8s.get("node-labels", {})),
        taints=taints,
        custom=custom,
    )


READERS = {
    nc.AL2023: read_nodeadm,
    nc.AL2: read_bootstrap_sh,
    nc.UBUNTU: read_bootstrap_sh,
    nc.BOTTLEROCKET: read_bottlerocket,
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("family", FAMILIES)
def test_user_data_carries_the_cluster_kubelet_labels_and_taints(family: str, case: str) -> None:
    node = node_for(family, case)
    read = READERS[family](render(family, node))
    assert (read.cluster, read.endpoint, read.ca, read.cluster_dns) == ("demo", ENDPOINT, CA, "10.100.0.10")
    expected_kubelet = {k: v for k, v in node.kubelet.config().items() if k != "clusterDNS"}
    assert read.kubelet == expected_kubelet
    # kubelet refuses kubernetes.io labels in --node-labels: karpy sets those on the Node object.
    expected_labels = {k: v for k, v in node.labels.items() if "kubernetes.io" not in k}
    if family == nc.BOTTLEROCKET and case == "custom-user-data":
        expected_labels = {"team": "from-user", "mine": "kept", **expected_labels}  # merged, karpy's win
    assert read.labels == expected_labels
    assert read.taints == {(t.key, t.value, t.effect) for t in node.taints}
    if case == "custom-user-data":
        expected_custom = "qps=30 admin={'enabled': True}" if family == nc.BOTTLEROCKET else "echo custom"
        assert expected_custom in read.custom
    else:
        assert read.custom in ("", "qps=None admin=None")


def test_custom_family_passes_the_user_data_through() -> None:
    node = node_for(nc.AL2, "custom-user-data")
    assert render(nc.CUSTOM, node) == node.user_data
    assert render(nc.CUSTOM, node_for(nc.AL2, "plain")) == ""


def test_al2023_takes_a_bare_node_config_as_its_own_part_before_karpys() -> None:
    mine = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [--v=4]\n"
    node = NodeBootstrap(
        cluster_name="demo", endpoint=ENDPOINT, ca_bundle=CA, cluster_cidr=CIDR, user_data=mine
    )
    parts = _mime(render(nc.AL2023, node))
    assert [p.get_content_type() for p in parts] == ["application/node.eks.aws"] * 2
    assert yaml.safe_load(parts[0].get_payload())["spec"]["kubelet"]["flags"] == ["--v=4"]


def test_bootstrap_sh_quotes_hostile_values() -> None:
    node = NodeBootstrap(cluster_name="demo; rm -rf /", endpoint=ENDPOINT)
    assert "'demo; rm -rf /'" in render(nc.AL2, node)


def test_ipv6_cluster_dns_selects_the_ipv6_family() -> None:
    node = NodeBootstrap(
        cluster_name="demo", endpoint=ENDPOINT, kubelet=KubeletConfiguration(cluster_dns=("fd00::a",))
    )
    assert "--ip-family ipv6" in render(nc.AL2, node)


# --- allocatable: what packing uses is what those rendered settings make the kubelet report -----

M5_LARGE = InstanceType.build(name="m5.large", cpu=2, memory=8 * GIB, arch="amd64", max_pods=29)


def _bytes(value: Any) -> float:
    return parse_quantity(str(value))


def kubelet_allocatable(read: Read, family: str, volume: float) -> dict[str, float]:
    """capacity - kubeReserved - systemReserved - evictionHard from the rendered settings alone;
    where a setting is absent, the AMI's own default (EKS/Bottlerocket formulas)."""
    k = read.kubelet
    memory = 8 * GIB * (1 - 0.075)  # karpy's estimate of the node's memory capacity
    pods = k.get("maxPods", 29)
    reserve_pods = pods if family == nc.BOTTLEROCKET else 29  # EKS AMIs reserve for the ENI limit
    kube = {"cpu": 0.07, "memory": (11 * reserve_pods + 255) * MIB, "ephemeral-storage": 1 * GIB}
    kube.update({r: _bytes(v) for r, v in k.get("kubeReserved", {}).items()})
    system = {"cpu": 0.1, "memory": 100 * MIB}  # karpy's default margin
    system.update({r: _bytes(v) for r, v in k.get("systemReserved", {}).items()})
    hard = k.get("evictionHard", {})
    evict_memory = _bytes(hard.get("memory.available", "100Mi"))
    nodefs = hard.get("nodefs.available", "10%")
    evict_disk = math.ceil(volume * float(nodefs[:-1]) / 100) if nodefs.endswith("%") else _bytes(nodefs)
    return {
        "cpu": 2 - kube["cpu"] - system["cpu"],
        "memory": memory - kube["memory"] - system["memory"] - evict_memory,
        "pods": pods,
        "ephemeral-storage": volume
        - kube["ephemeral-storage"]
        - system.get("ephemeral-storage", 0)
        - evict_disk,
    }


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("family", FAMILIES)
def test_packing_allocatable_is_what_the_rendered_settings_imply(family: str, case: str) -> None:
    node = node_for(family, case)
    node_class = nc.NodeClass(ami_family=family)
    planned = M5_LARGE.for_node(NodeSettings.of(node.kubelet, node_class)).allocatable
    expected = kubelet_allocatable(
        READERS[family](render(family, node)), family, node_class.ephemeral_storage()
    )
    for resource, amount in expected.items():
        assert planned.get(resource) == pytest.approx(amount), resource


def test_bottlerocket_ephemeral_storage_is_its_data_volume() -> None:
    assert nc.NodeClass(ami_family=nc.BOTTLEROCKET).ephemeral_storage() == 20 * GIB
    bigger = nc.NodeClass(
        ami_family=nc.BOTTLEROCKET,
        block_device_mappings=(
            nc.BlockDeviceMapping("/dev/xvda", nc.EBS(volume_size=4 * GIB)),
            nc.BlockDeviceMapping("/dev/xvdb", nc.EBS(volume_size=100 * GIB)),
        ),
    )
    assert bigger.ephemeral_storage() == 100 * GIB
    node = M5_LARGE.for_node(NodeSettings.of(KubeletConfiguration(), bigger))
    assert node.capacity.get("ephemeral-storage") == 100 * GIB
    assert node.allocatable.get("ephemeral-storage") == 100 * GIB - 1 * GIB - 10 * GIB


def test_root_volume_flag_and_custom_family_pick_the_nodefs_volume() -> None:
    mappings = (
        nc.BlockDeviceMapping("/dev/xvda", nc.EBS(volume_size=30 * GIB)),
        nc.BlockDeviceMapping("/dev/xvdc", nc.EBS(volume_size=200 * GIB), root_volume=True),
    )
    assert nc.NodeClass(block_device_mappings=mappings).ephemeral_storage() == 200 * GIB
    assert nc.NodeClass(block_device_mappings=mappings[:1]).ephemeral_storage() == 30 * GIB
    custom = nc.NodeClass(ami_family=nc.CUSTOM, block_device_mappings=(mappings[0], mappings[0]))
    assert custom.ephemeral_storage() == 30 * GIB


def test_pods_per_core_caps_pods_except_on_bottlerocket() -> None:
    kubelet = KubeletConfiguration(pods_per_core=4)
    assert M5_LARGE.for_node(NodeSettings.of(kubelet, nc.NodeClass())).allocatable.get("pods") == 8
    bottlerocket = nc.NodeClass(ami_family=nc.BOTTLEROCKET)
    assert M5_LARGE.for_node(NodeSettings.of(kubelet, bottlerocket)).allocatable.get("pods") == 29


def test_default_settings_leave_the_catalog_entry_alone() -> None:
    assert M5_LARGE.for_node(NodeSettings.of(KubeletConfiguration(), nc.NodeClass())) is M5_LARGE


@pytest.mark.parametrize("family", FAMILIES)
def test_instance_store_raid0_stripes_the_local_disks_in_every_familys_user_data(family: str) -> None:
    """instanceStorePolicy RAID0 as Karpenter's AWS families render it: AL2/Ubuntu bootstrap.sh
    `--local-disks raid0`, AL2023 nodeadm `instance.localStorage.strategy: RAID0`, Bottlerocket the
    `000-mount-instance-storage` bootstrap command (apiclient ephemeral-storage init/bind)."""
    from dataclasses import replace

    node = node_for(family, "custom-user-data")
    assert not READERS[family](render(family, node)).raid0
    read = READERS[family](render(family, replace(node, instance_store_raid0=True)))
    assert read.raid0 and read.custom == READERS[family](render(family, node)).custom
