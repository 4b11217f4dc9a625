"""AL2 and Ubuntu: the EKS AMI's /etc/eks/bootstrap.sh, as the last part of a MIME archive.

Arguments in the order Karpenter's AWS provider emits them (bootstrap/eksbootstrap.go), the
kubelet settings as --kubelet-extra-args flags.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Mapping

from extender.cloud.aws.bootstrap import mime
from extender.cloud.aws.bootstrap.node import NodeBootstrap


def _pairs(values: Mapping[str, str], sep: str = "=") -> str:
    return ",".join(f"{k}{sep}{v}" for k, v in sorted(values.items()))


def kubelet_args(node: NodeBootstrap) -> list[str]:
    k = node.kubelet
    args = []
    if labels := node.kubelet_labels():
        args.append(f'--node-labels="{_pairs(labels)}"')
    if node.taints:
        taints = (
            f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
            for t in node.sorted_taints()
        )
        args.append(f'--register-with-taints="{",".join(taints)}"')
    maps = [
        ("system-reserved", _pairs(k.system_reserved)),
        ("kube-reserved", _pairs(k.kube_reserved)),
        ("eviction-hard", _pairs(k.eviction_hard, "<")),
        ("eviction-soft", _pairs(k.eviction_soft, "<")),
        ("eviction-soft-grace-period", _pairs(k.eviction_soft_grace_period)),
    ]
    scalars = [
        ("max-pods", k.max_pods),
        ("pods-per-core", k.pods_per_core),
        ("eviction-max-pod-grace-period", k.eviction_max_pod_grace_period),
        ("image-gc-high-threshold", k.image_gc_high_threshold_percent),
        ("image-gc-low-threshold", k.image_gc_low_threshold_percent),
        ("cpu-cfs-quota", None if k.cpu_cfs_quota is None else str(k.cpu_cfs_quota).lower()),
    ]
    args += [f"--{name}={value}" for name, value in scalars[:2] if value is not None]
    args += [f'--{name}="{value}"' for name, value in maps if value]
    args += [f"--{name}={value}" for name, value in scalars[2:] if value is not None]
    return args


def script(node: NodeBootstrap) -> str:
    first = f"/etc/eks/bootstrap.sh {shlex.quote(node.cluster_name)}"
    if node.endpoint:
        first += f" --apiserver-endpoint {shlex.quote(node.endpoint)}"
    if node.ca_bundle:
        first += f" --b64-cluster-ca {shlex.quote(node.ca_bundle)}"
    command = [first]
    dns = node.kubelet.cluster_dns
    if dns:
        if ipaddress.ip_address(dns[0]).version == 6:
            command.append("--ip-family ipv6")
        command.append(f"--dns-cluster-ip {shlex.quote(dns[0])}")
    if node.kubelet.max_pods is not None:
        # Otherwise bootstrap.sh writes its own (ENI-limited) maxPods over the flag's.
        command.append("--use-max-pods false")
    if args := kubelet_args(node):
        command.append(f"--kubelet-extra-args {shlex.quote(' '.join(args))}")
    if node.instance_store_raid0:
        command.append("--local-disks raid0")
    return "\n".join(
        [
            "#!/bin/bash -xe",
            "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
            " \\\n".join(command),
            "",
        ]
    )


def render(node: NodeBootstrap) -> str:
    return mime.archive([*mime.split(node.user_data), (mime.SHELL_SCRIPT, script(node))])
