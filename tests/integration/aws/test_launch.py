"""CreateFleet through AWSCloudProvider.create against moto: what launches, how it is tagged and named,
idempotency by launch id, and capacity errors injected with a botocore after-call hook."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from extender.api.provisioner import AWSProvider, Provisioner, Taint
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.types import InsufficientCapacityError, LaunchRequest, OfferingKey
from extender.settings import Settings

pytestmark = pytest.mark.integration


def test_create_launches_the_cheapest_option_tagged_for_the_cluster(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any, terminate_after: list[str]
) -> None:
    request = launch(["m5.large", "m5.xlarge"], capacity_types=["spot"], count=1)
    result = provider.create(request)
    terminate_after.extend(i.id for i in result.instances)

    [instance] = result.instances
    assert instance.instance_type == "m5.large"
    assert instance.capacity_type == "spot"
    assert instance.zone in aws.subnets
    assert instance.provider_id == f"aws:///{instance.zone}/{instance.id}"
    assert instance.private_dns_name
    assert instance.tags == {
        "Name": "karpenter.sh/cluster/karpy/provisioner/default",
        "kubernetes.io/cluster/karpy": "owned",
        "karpenter.sh/cluster/karpy": "owned",
        "karpenter.sh/provisioner-name": "default",
        "karpy.sh/launch-id": request.launch_id,
        "team": "karpy",
    }
    assert result.unavailable == ()


def test_launch_template_carries_ami_security_group_profile_and_bootstrap(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any, terminate_after: list[str]
) -> None:
    # moto applies only ImageId, tags and UserData of a template to instances, so assert on the template.
    provisioner = Provisioner(name="gpu-free", taints=(Taint("dedicated", "NoSchedule", "ci"),))
    run = uuid.uuid4().hex[:8]  # a template of its own on a shared moto
    request = launch(
        ["m6g.large"],
        provisioner=provisioner,
        capacity_types=["on-demand"],
        labels={"tier": "a", "run": run},
        taints=provisioner.taints,
    )
    fleets: list[dict[str, Any]] = []
    ec2 = provider.clients.ec2
    ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: fleets.append(params)
    )
    result = provider.create(request)
    terminate_after.extend(i.id for i in result.instances)
    assert [i.instance_type for i in result.instances] == ["m6g.large"]
    assert [i.capacity_type for i in result.instances] == ["on-demand"]

    # The template the fleet named (moto lists at most 15 templates, so it is not searched for).
    (config,) = fleets[0]["LaunchTemplateConfigs"]
    name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
    assert name.startswith("karpy-karpy-")
    (template,) = ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"]
    assert {"Key": "karpenter.sh/cluster/karpy", "Value": "owned"} in template["Tags"]
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"]
    data = version["LaunchTemplateData"]
    assert data["ImageId"] == aws.amis["arm64"]
    assert data["SecurityGroupIds"] == [aws.security_group_id]
    assert data["IamInstanceProfile"] == {"Name": "karpy-node"}
    # AL2023 by default: nodeadm's NodeConfig (test_node_families.py reads every family in full).
    script = base64.b64decode(data["UserData"]).decode()
    assert "kind: NodeConfig" in script and "name: karpy" in script
    assert (
        '--node-labels="karpenter.sh/capacity-type=on-demand,karpenter.sh/provisioner-name=gpu-free,'
        f'run={run},tier=a"' in script
    )
    assert "- key: dedicated\n        value: ci\n        effect: NoSchedule" in script


def test_gpu_types_boot_the_accelerated_ami(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any, terminate_after: list[str]
) -> None:
    seen: list[str] = []
    provider.clients.ec2.meta.events.register(
        "provide-client-params.ec2.CreateLaunchTemplate",
        lambda params, **_: seen.append(params["LaunchTemplateData"]["ImageId"]),
    )
    # A label unique to this run gives a launch template of its own, so a reused moto (a running
    # cluster's) still sees it created.
    label = {"gpu": uuid.uuid4().hex[:8]}
    result = provider.create(launch(["g4dn.xlarge"], capacity_types=["on-demand"], labels=label))
    terminate_after.extend(i.id for i in result.instances)
    assert seen == [aws.amis["gpu"]]
    image = provider.clients.ec2.describe_instances(InstanceIds=[result.instances[0].id])
    assert image["Reservations"][0]["Instances"][0]["ImageId"] == aws.amis["gpu"]


def test_same_launch_id_twice_launches_once(
    provider: AWSCloudProvider,
    launch: Callable[..., LaunchRequest],
    settings: Settings,
    terminate_after: list[str],
) -> None:
    request = launch(["c5.large"], count=2)
    first = provider.create(request)
    terminate_after.extend(i.id for i in first.instances)
    # A fresh provider is what a restarted controller has: no memory, only EC2's tags.
    restarted = AWSCloudProvider(
        settings=provider._settings, clients=provider.clients, catalog=provider.catalog
    )
    second = restarted.create(request)
    assert len(first.instances) == 2
    assert sorted(i.id for i in second.instances) == sorted(i.id for i in first.instances)
    assert len(provider.find_launch(request.launch_id)) == 2


def test_moto_create_fleet_client_token_behaviour(provider: AWSCloudProvider, aws: Any) -> None:
    """Records what moto does with a repeated ClientToken (AWS returns the first fleet's result)."""
    ec2 = provider.clients.ec2
    template = f"client-token-{time.time_ns()}"
    ec2.create_launch_template(LaunchTemplateName=template, LaunchTemplateData={"ImageId": aws.amis["amd64"]})
    request = {
        "Type": "instant",
        "ClientToken": f"token-{time.time_ns()}",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Default"},
                "Overrides": [{"InstanceType": "t3.micro", "SubnetId": aws.subnets["us-west-2a"]}],
            }
        ],
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
    }
    first = ec2.create_fleet(**request)
    second = ec2.create_fleet(**request)
    ids = [i for r in (first, second) for entry in r["Instances"] for i in entry["InstanceIds"]]
    ec2.terminate_instances(InstanceIds=ids)
    same = first["FleetId"] == second["FleetId"]
    print(f"\nmoto ClientToken: same fleet={same}, instances launched by two identical calls={len(ids)}")
    # moto 5.2.5 ignores ClientToken: each call is a new fleet. Karpy's launch-id tag check covers it.
    assert len(set(ids)) == 2 and not same


def _inject_capacity_error(provider: AWSCloudProvider, instance_type: str, subnet_id: str) -> list[str]:
    """after-call hook: EC2 had no capacity for (type, subnet); moto's instance there is withdrawn."""
    withdrawn: list[str] = []
    ec2 = provider.clients.ec2

    def after_create_fleet(parsed: dict[str, Any], **_: Any) -> None:
        kept = []
        for entry in parsed.get("Instances", []):
            override = entry["LaunchTemplateAndOverrides"]["Overrides"]
            if override["InstanceType"] == instance_type and override["SubnetId"] == subnet_id:
                withdrawn.extend(entry["InstanceIds"])
                parsed.setdefault("Errors", []).append(
                    {
                        "LaunchTemplateAndOverrides": entry["LaunchTemplateAndOverrides"],
                        "Lifecycle": entry.get("Lifecycle", "spot"),
                        "ErrorCode": "InsufficientInstanceCapacity",
                        "ErrorMessage": "We currently do not have sufficient capacity.",
                    }
                )
            else:
                kept.append(entry)
        parsed["Instances"] = kept
        if withdrawn:
            ec2.terminate_instances(InstanceIds=withdrawn)

    ec2.meta.events.register("after-call.ec2.CreateFleet", after_create_fleet)
    return withdrawn


def test_capacity_error_reports_the_offering_and_the_next_launch_avoids_it(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any, terminate_after: list[str]
) -> None:
    zone = sorted(aws.subnets)[0]
    withdrawn = _inject_capacity_error(provider, "r5.large", aws.subnets[zone])

    with pytest.raises(InsufficientCapacityError) as raised:
        provider.create(launch(["r5.large", "r5.xlarge"], capacity_types=["spot"]))
    refused = OfferingKey("r5.large", zone, "spot")
    assert raised.value.offerings == (refused,)
    assert "InsufficientInstanceCapacity" in str(raised.value)
    assert len(withdrawn) == 1

    catalog = {item.name: item for item in provider.get_instance_types()}
    availability = {(o.zone, o.capacity_type): o.available for o in catalog["r5.large"].offerings}
    assert availability[(zone, "spot")] is False
    assert sum(not available for available in availability.values()) == 1

    result = provider.create(launch(["r5.large", "r5.xlarge"], capacity_types=["spot"]))
    terminate_after.extend(i.id for i in result.instances)
    [instance] = result.instances
    assert (instance.instance_type, instance.capacity_type) == ("r5.large", "spot")
    assert instance.zone != zone


def test_partial_capacity_launches_the_rest_and_reports_the_refused_offering(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any, terminate_after: list[str]
) -> None:
    zone = sorted(aws.subnets)[0]
    ec2 = provider.clients.ec2
    calls = {"n": 0}

    def refuse_first_instance(parsed: dict[str, Any], **_: Any) -> None:
        calls["n"] += 1
        first = parsed["Instances"][0]
        first_id = first["InstanceIds"].pop(0)
        ec2.terminate_instances(InstanceIds=[first_id])
        parsed["Instances"] = [e for e in parsed["Instances"] if e["InstanceIds"]]
        parsed["Errors"] = [
            {
                "LaunchTemplateAndOverrides": first["LaunchTemplateAndOverrides"],
                "Lifecycle": "on-demand",
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "no capacity",
            }
        ]

    ec2.meta.events.register("after-call.ec2.CreateFleet", refuse_first_instance)
    result = provider.create(launch(["c6i.large"], capacity_types=["on-demand"], zones=[zone], count=3))
    terminate_after.extend(i.id for i in result.instances)
    assert calls["n"] == 1
    assert len(result.instances) == 2
    assert result.unavailable == (OfferingKey("c6i.large", zone, "on-demand"),)
    assert result.errors == ("InsufficientInstanceCapacity: no capacity",)


def test_no_offering_left_raises_without_calling_ec2(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest]
) -> None:
    calls: list[str] = []
    provider.clients.ec2.meta.events.register("before-call.ec2.CreateFleet", lambda **_: calls.append("x"))
    provider.mark_unavailable([OfferingKey("m5.2xlarge", "us-west-2a", "on-demand")])
    with pytest.raises(InsufficientCapacityError) as raised:
        provider.create(launch(["m5.2xlarge"], capacity_types=["on-demand"], zones=["us-west-2a"]))
    assert raised.value.code == "NoAvailableOffering"
    assert calls == []


def test_spot_falls_back_to_on_demand_only_when_allowed(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], terminate_after: list[str]
) -> None:
    zones = ["us-west-2b"]
    provider.mark_unavailable([OfferingKey("m5.xlarge", "us-west-2b", "spot")])
    result = provider.create(launch(["m5.xlarge"], zones=zones, capacity_types=["spot", "on-demand"]))
    terminate_after.extend(i.id for i in result.instances)
    assert [i.capacity_type for i in result.instances] == ["on-demand"]
    with pytest.raises(InsufficientCapacityError):
        provider.create(launch(["m5.xlarge"], zones=zones, capacity_types=["spot"]))


def test_provider_launch_template_is_used_verbatim(
    provider: AWSCloudProvider, launch: Callable[..., LaunchRequest], aws: Any, terminate_after: list[str]
) -> None:
    ec2 = provider.clients.ec2
    name = f"custom-{time.time_ns()}"
    ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": aws.amis["amd64"]})
    seen: list[str] = []
    ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: seen.extend(
            c["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in params["LaunchTemplateConfigs"]
        ),
    )
    provisioner = Provisioner(name="custom", provider=AWSProvider(launch_template=name))
    result = provider.create(launch(["t3.medium"], provisioner=provisioner))
    terminate_after.extend(i.id for i in result.instances)
    assert seen == [name]
    assert len(result.instances) == 1
