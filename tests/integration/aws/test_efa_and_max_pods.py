"""EFA interfaces and maxPods in the launch templates moto holds, read back after CreateFleet.

EFA (issue 35): moto accepts CreateLaunchTemplate with `NetworkInterfaces` of InterfaceType "efa"
and CreateFleet from such a template (it keeps the interfaces in the template but gives the
instance only its primary interface, as it drops the template's security groups), so the route
that runs is the one Karpenter takes: attach the interfaces. Sources: Karpenter AWS v1.14.1
`pkg/providers/launchtemplate/launchtemplate.go` generateNetworkInterfaces and
`pkg/providers/amifamily/resolver.go` Resolve (one template per AMI, maxPods and EFA count).

maxPods: every family's user data carries the type's pod capacity, read back with the real parser
of its format (tests/unit/cloud/test_userdata.py READERS), equal to the Node's pods capacity.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from extender.api import nodeclass as nc
from extender.api.provisioner import Provisioner
from extender.api.resources import PODS
from extender.cloud.aws.instancetypes import CatalogProvider
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.types import LaunchRequest
from extender.scheduling.poddensity import PodDensity
from extender.scheduling.pricing import PriceBook
from extender.settings import Settings
from tests.integration.aws.test_node_families import FAMILIES, templates_of
from tests.unit.cloud.test_userdata import READERS

pytestmark = pytest.mark.integration


def efa_request(launch: Callable[..., LaunchRequest], *, efa: bool) -> LaunchRequest:
    # A label of its own: templates created by this run even on a reused moto.
    return launch(
        ["p4d.24xlarge", "c5n.18xlarge"],
        capacity_types=["on-demand"],
        labels={"run": uuid.uuid4().hex[:8]},
        efa=efa,
    )


def test_pods_requesting_efa_get_every_efa_interface_of_their_type_in_the_template(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any
) -> None:
    templates = templates_of(provider, efa_request(launch, efa=True))
    catalog = {t.name: t for t in provider.get_instance_types()}
    for name, cards in (("p4d.24xlarge", 4), ("c5n.18xlarge", 1)):
        assert catalog[name].extended.get("vpc.amazonaws.com/efa") == cards
        data = templates[name]
        assert data["NetworkInterfaces"] == [
            {
                "NetworkCardIndex": card,
                "DeviceIndex": 0 if card == 0 else 1,
                "InterfaceType": "efa",
                "Groups": [aws.security_group_id],
            }
            for card in range(cards)
        ], name
        # Security groups ride on the interfaces: EC2 refuses them on both.
        assert "SecurityGroupIds" not in data
    # Different EFA counts (and maxPods): different templates.
    assert templates["p4d.24xlarge"] != templates["c5n.18xlarge"]


def test_pods_without_efa_launch_the_same_types_without_efa_interfaces(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any
) -> None:
    templates = templates_of(provider, efa_request(launch, efa=False))
    for name in ("p4d.24xlarge", "c5n.18xlarge"):
        assert "NetworkInterfaces" not in templates[name]
        assert templates[name]["SecurityGroupIds"] == [aws.security_group_id]


def max_pods_in(family: str, data: dict[str, Any]) -> int:
    read = READERS[family](base64.b64decode(data["UserData"]).decode())
    return int(read.kubelet["maxPods"])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_familys_user_data_carries_each_types_max_pods_one_template_per_value(
    family: str,
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
) -> None:
    version, _ = FAMILIES[family]
    provider = provider_at(version)
    provisioner = Provisioner(name=f"pods-{family.lower()}", provider=nc.NodeClass(ami_family=family))
    types = ["m5.large", "c5.large", "m5.xlarge"]
    templates = templates_of(
        provider,
        launch(
            types,
            provisioner=provisioner,
            capacity_types=["on-demand"],
            labels={"run": uuid.uuid4().hex[:8]},
        ),
    )
    catalog = {t.name: t for t in provider.get_instance_types()}
    found = {name: max_pods_in(family, templates[name]) for name in types}
    # The Node's pods capacity is the same figure (launcher writes itype.capacity).
    assert found == {name: int(catalog[name].capacity.get(PODS)) for name in types}
    assert found == {"m5.large": 29, "c5.large": 29, "m5.xlarge": 58}
    # Grouped by maxPods: the two 29-pod types share a template, the 58-pod type has its own.
    assert templates["m5.large"] == templates["c5.large"] != templates["m5.xlarge"]


def test_reserved_enis_lower_max_pods_in_user_data_and_in_the_catalog(
    settings: Settings,
    provider_at: Callable[..., AWSCloudProvider],
    launch: Callable[..., LaunchRequest],
    clients: Any,
) -> None:
    """Karpenter's RESERVED_ENIS (KARPY_AWS_RESERVED_ENIS): m5.large has 3 ENIs x 10 IPv4; with one
    reserved, (3 - 1) x 9 + 2 = 20 pods."""
    reserved = replace(settings, aws=replace(settings.aws, reserved_enis=1))
    provider = AWSCloudProvider(settings=reserved, clients=clients)
    assert isinstance(provider.catalog, CatalogProvider)
    m5 = next(t for t in provider.get_instance_types() if t.name == "m5.large")
    assert m5.capacity.get(PODS) == 20
    (data,) = templates_of(
        provider,
        launch(["m5.large"], capacity_types=["on-demand"], labels={"run": uuid.uuid4().hex[:8]}),
    ).values()
    assert max_pods_in(nc.AL2023, data) == 20
    # The same catalog built directly with the density gives the same figure.
    direct = CatalogProvider(clients.ec2, price_book=PriceBook, density=PodDensity(reserved_enis=1))
    assert next(t for t in direct.get(["us-west-2a"]) if t.name == "m5.large").max_pods == 20
