"""A reserved launch as CreateFleet sends it and moto stores its launch template (moto in server
mode, no control plane), through the declared-file fallback (moto 5.2.5 has no
DescribeCapacityReservations; tests/integration/test_capacity_reservations.py records its answer).

Karpenter AWS v1.14.1 `pkg/providers/instance/types.go` defaultTargetCapacityType (a capacity block
is launched as `capacity-block`, an ODCR as `on-demand`) and `pkg/providers/launchtemplate/types.go`
(capacity-reservations-only into the reservation; a block's market type `capacity-block`).
moto launches nothing for a `capacity-block` fleet (no instance, no error): that launch ends in
InsufficientCapacityError, and the reservation is then counted as full.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.api import capacity_reservations as cr
from extender.api.nodeclass import NodeClass
from extender.api.provisioner import Provisioner
from extender.cloud.aws.instancetypes import CatalogProvider
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.aws.session import Clients
from extender.cloud.types import InsufficientCapacityError, LaunchRequest
from extender.settings import Settings

pytestmark = pytest.mark.integration


def test_a_capacity_block_launch_targets_its_block(
    settings: Settings,
    clients: Clients,
    shared_catalog: CatalogProvider,
    clock: Any,
    launch: Callable[..., LaunchRequest],
    aws: Any,
    tmp_path: Path,
) -> None:
    zone, run = sorted(aws.subnets)[0], uuid.uuid4().hex[:8]
    block_id = f"cr-{uuid.uuid4().hex[:17]}"
    path = tmp_path / "reservations.yaml"
    end = datetime.now(UTC) + timedelta(days=1)
    path.write_text(
        yaml.safe_dump(
            [
                {
                    "id": block_id,
                    "instanceType": "m5.large",
                    "availabilityZone": zone,
                    "totalInstanceCount": 1,
                    "reservationType": "capacity-block",
                    "endDate": end.isoformat(),
                    "tags": {"run": run},
                }
            ]
        )
    )
    provider = AWSCloudProvider(
        settings=replace(settings, aws=replace(settings.aws, capacity_reservations=str(path))),
        clients=clients,
        catalog=shared_catalog,
        timer=clock,
    )
    node_class = NodeClass(
        instance_profile="karpy-node", capacity_reservation_selector=(cr.ReservationTerm(tags={"run": run}),)
    )
    pool = Provisioner(name=f"blocks-{run}", provider=node_class)
    (found,) = provider.capacity_reservations(node_class.capacity_reservation_selector)
    assert (found.id, found.is_block, found.state, found.available) == (block_id, True, cr.ACTIVE, 1)
    assert provider.reservations.source == f"declared file {path}"

    fleets: list[dict[str, Any]] = []
    clients.ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: fleets.append(params)
    )
    request = launch(
        ["m5.large"],
        provisioner=pool,
        zones=[zone],
        capacity_types=["reserved"],
        capacity_reservation_id=block_id,
        labels={"run": run},
    )
    with pytest.raises(InsufficientCapacityError):
        provider.create(request)  # moto: no instance for a capacity-block fleet

    (fleet,) = fleets
    assert fleet["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    (config,) = fleet["LaunchTemplateConfigs"]
    assert [(o["InstanceType"], o["AvailabilityZone"]) for o in config["Overrides"]] == [("m5.large", zone)]
    name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
    (version,) = clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)[
        "LaunchTemplateVersions"
    ]
    data = version["LaunchTemplateData"]
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": block_id},
    }
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    tags = {t["Key"]: t["Value"] for t in fleet["TagSpecifications"][0]["Tags"]}
    assert tags["karpenter.k8s.aws/capacity-reservation-id"] == block_id
    assert tags["karpenter.k8s.aws/capacity-reservation-type"] == "capacity-block"
    # EC2 refused the block for capacity: karpy plans no node into it until the next answer.
    assert provider.capacity_reservations(node_class.capacity_reservation_selector)[0].available == 0
