"""User data per AMI family: what boots a node and joins it to the cluster with karpy's settings.

| family | format | module |
|---|---|---|
| AL2023 | MIME multi-part with nodeadm NodeConfig YAML (last part) | nodeadm |
| AL2, Ubuntu | MIME multi-part with the /etc/eks/bootstrap.sh script (last part) | eksbootstrap |
| Bottlerocket | TOML settings | bottlerocket |
| Custom | the node configuration's user data, unchanged | - |
"""

from __future__ import annotations

from extender.api import nodeclass as nc
from extender.cloud.aws.bootstrap import bottlerocket, eksbootstrap, nodeadm
from extender.cloud.aws.bootstrap.node import NodeBootstrap


def render(family: str, node: NodeBootstrap) -> str:
    if family == nc.AL2023:
        return nodeadm.render(node)
    if family in (nc.AL2, nc.UBUNTU):
        return eksbootstrap.render(node)
    if family == nc.BOTTLEROCKET:
        return bottlerocket.render(node)
    if family == nc.CUSTOM:
        return node.user_data or ""
    raise ValueError(f"unknown AMI family {family!r}")


__all__ = ["NodeBootstrap", "render"]
