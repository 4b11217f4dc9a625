"""Run moto_server on loopback and seed it like an EKS account, for karpy's AWS provider.

What ``seed()`` creates (region default us-west-2, cluster name default ``karpy``):

- a VPC 10.0.0.0/16 tagged ``Name=<cluster>-vpc``;
- one private subnet per zone (default ``<region>a/b/c``), 10.0.<32*i>.0/19 each, tagged
  ``kubernetes.io/cluster/<cluster>=owned``, ``karpenter.sh/discovery=<cluster>``,
  ``kubernetes.io/role/internal-elb=1`` and ``Name=<cluster>-private-<zone>``;
- a node security group ``<cluster>-node`` in that VPC with the same two discovery tags;
- three AMIs registered with ``ec2.register_image`` (amd64, arm64, gpu), tagged
  ``karpy.sh/ami-family=<family>``. moto ignores the Architecture of a registered image (it
  reports x86_64 for all three); the SSM path, not DescribeImages, is what says arm64/gpu;
- SSM parameters (type String, DataType aws:ec2:image) mirroring
  ``/aws/service/eks/optimized-ami`` under ``ssm_prefix`` (default ``/karpy-test/eks/optimized-ami``,
  because moto refuses writes under ``/aws/service``)::

      <prefix>/<k8s-version>/amazon-linux-2/recommended/image_id         -> amd64 AMI
      <prefix>/<k8s-version>/amazon-linux-2-arm64/recommended/image_id   -> arm64 AMI
      <prefix>/<k8s-version>/amazon-linux-2-gpu/recommended/image_id     -> gpu (x86_64) AMI

  with ``<k8s-version>`` like ``1.37``;
- an SQS queue ``<cluster>-interruption`` and four EventBridge rules targeting it:
  ``<cluster>-spot-interruption`` (aws.ec2 "EC2 Spot Instance Interruption Warning"),
  ``<cluster>-rebalance`` (aws.ec2 "EC2 Instance Rebalance Recommendation"),
  ``<cluster>-instance-state-change`` (aws.ec2 "EC2 Instance State-change Notification"),
  ``<cluster>-scheduled-change`` (aws.health "AWS Health Event").
  moto emits none of these events itself; tests publish them with ``events.put_events``.

``start_moto()`` runs ``python -m moto.server`` on 127.0.0.1 with instance-type and AMI validation
on, so bogus types/AMIs fail as they do on AWS. Seed a fresh server once and never call
``/moto-api/reset`` on a shared one: it wipes the seed.

CLI: ``python -m hack.localcluster.awsseed --endpoint-url http://127.0.0.1:PORT`` seeds a running
server and prints the ids as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from hack.localcluster import procs

DEFAULT_REGION = "us-west-2"
DEFAULT_CLUSTER = "karpy"
DEFAULT_SSM_PREFIX = "/karpy-test/eks/optimized-ami"
DEFAULT_K8S_VERSION = "1.37"
TEST_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

#: SSM path segment per AMI family, as in the real EKS optimized-AMI parameters.
AMI_FAMILIES = {
    "amd64": ("amazon-linux-2", "x86_64"),
    "arm64": ("amazon-linux-2-arm64", "arm64"),
    "gpu": ("amazon-linux-2-gpu", "x86_64"),
}

#: rule suffix -> EventBridge pattern, as in Karpenter's interruption CloudFormation.
INTERRUPTION_RULES: dict[str, dict[str, list[str]]] = {
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
    },
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
}

MOTO_ENV = {
    "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true",
    "MOTO_ENABLE_AMI_VALIDATION": "true",
}


@dataclass(frozen=True)
class AwsSeed:
    """Ids of everything seed() created, plus how to reach the endpoint."""

    endpoint_url: str
    region: str
    cluster_name: str
    ssm_prefix: str
    k8s_version: str
    vpc_id: str
    subnets: Mapping[str, str]  # zone -> subnet id
    security_group_id: str
    amis: Mapping[str, str]  # amd64|arm64|gpu -> ami id
    ssm_parameters: Mapping[str, str]  # parameter name -> ami id
    queue_url: str
    queue_arn: str
    rules: tuple[str, ...] = field(default=())

    @property
    def subnet_ids(self) -> list[str]:
        return list(self.subnets.values())

    @property
    def discovery_tag(self) -> tuple[str, str]:
        return (f"kubernetes.io/cluster/{self.cluster_name}", "owned")

    def aws_settings(self, **overrides: Any) -> Any:  # -> extender.settings.AWSSettings
        """karpy's AWS settings for this seeded account (no Pricing API: moto has none)."""
        from extender.settings import AWSSettings

        values: dict[str, Any] = {
            "region": self.region,
            "endpoint_url": self.endpoint_url,
            "ssm_prefix": self.ssm_prefix,
            "interruption_queue": self.queue_url,
            "pricing_api": False,
            "kubernetes_version": self.k8s_version,
        }
        return AWSSettings(**(values | overrides))

    def client(self, service: str) -> Any:
        """A boto3 client for this endpoint with the dummy test credentials."""
        return aws_client(service, self.endpoint_url, self.region)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["subnets"] = dict(self.subnets)
        data["amis"] = dict(self.amis)
        data["ssm_parameters"] = dict(self.ssm_parameters)
        data["rules"] = list(self.rules)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AwsSeed:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["rules"] = tuple(kwargs.get("rules", ()))
        return cls(**kwargs)


def aws_client(service: str, endpoint_url: str, region: str = DEFAULT_REGION) -> Any:
    return boto3.client(service, endpoint_url=endpoint_url, region_name=region, **TEST_CREDENTIALS)


def _tags(pairs: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in pairs.items()]


def ssm_image_path(prefix: str, k8s_version: str, family: str) -> str:
    segment = AMI_FAMILIES[family][0]
    return f"{prefix.rstrip('/')}/{k8s_version}/{segment}/recommended/image_id"


def seed(
    endpoint_url: str,
    *,
    cluster_name: str = DEFAULT_CLUSTER,
    region: str = DEFAULT_REGION,
    ssm_prefix: str = DEFAULT_SSM_PREFIX,
    k8s_version: str = DEFAULT_K8S_VERSION,
    zones: Sequence[str] | None = None,
) -> AwsSeed:
    """Create the EKS-like account in a fresh moto server and return the ids."""
    zones = list(zones) if zones else [f"{region}{s}" for s in "abc"]
    ec2 = aws_client("ec2", endpoint_url, region)
    discovery = {f"kubernetes.io/cluster/{cluster_name}": "owned", "karpenter.sh/discovery": cluster_name}

    vpc_id = ec2.create_vpc(
        CidrBlock="10.0.0.0/16",
        TagSpecifications=[{"ResourceType": "vpc", "Tags": _tags({"Name": f"{cluster_name}-vpc"})}],
    )["Vpc"]["VpcId"]
    subnets: dict[str, str] = {}
    for index, zone in enumerate(zones):
        tags = {**discovery, "kubernetes.io/role/internal-elb": "1", "Name": f"{cluster_name}-private-{zone}"}
        subnets[zone] = ec2.create_subnet(
            VpcId=vpc_id,
            CidrBlock=f"10.0.{32 * index}.0/19",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": _tags(tags)}],
        )["Subnet"]["SubnetId"]
    sg_id = ec2.create_security_group(
        GroupName=f"{cluster_name}-node",
        Description=f"karpy nodes of {cluster_name}",
        VpcId=vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": _tags(discovery)}],
    )["GroupId"]

    ssm = aws_client("ssm", endpoint_url, region)
    amis: dict[str, str] = {}
    parameters: dict[str, str] = {}
    for family, (segment, arch) in AMI_FAMILIES.items():
        ami = ec2.register_image(
            Name=f"amazon-eks-node-{segment}-{k8s_version}-karpy-test",
            Description=f"EKS optimized {family} stand-in for karpy tests",
            Architecture=arch,
            RootDeviceName="/dev/xvda",
        )["ImageId"]
        # register_image drops TagSpecifications in moto, so tag afterwards.
        ec2.create_tags(Resources=[ami], Tags=_tags({"karpy.sh/ami-family": family, **discovery}))
        name = ssm_image_path(ssm_prefix, k8s_version, family)
        ssm.put_parameter(Name=name, Value=ami, Type="String", DataType="aws:ec2:image", Overwrite=True)
        amis[family] = ami
        parameters[name] = ami

    sqs = aws_client("sqs", endpoint_url, region)
    queue_url = sqs.create_queue(QueueName=f"{cluster_name}-interruption")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = aws_client("events", endpoint_url, region)
    rules: list[str] = []
    for suffix, pattern in INTERRUPTION_RULES.items():
        rule = f"{cluster_name}-{suffix}"
        events.put_rule(Name=rule, EventPattern=json.dumps(pattern), State="ENABLED")
        result = events.put_targets(Rule=rule, Targets=[{"Id": "interruption-queue", "Arn": queue_arn}])
        if result.get("FailedEntryCount"):
            raise RuntimeError(f"moto: put_targets failed for rule {rule}: {result}")
        rules.append(rule)

    return AwsSeed(
        endpoint_url=endpoint_url,
        region=region,
        cluster_name=cluster_name,
        ssm_prefix=ssm_prefix,
        k8s_version=k8s_version,
        vpc_id=vpc_id,
        subnets=subnets,
        security_group_id=sg_id,
        amis=amis,
        ssm_parameters=parameters,
        queue_url=queue_url,
        queue_arn=queue_arn,
        rules=tuple(rules),
    )


@dataclass
class MotoServer:
    """A running moto_server child, stopped by PID."""

    pid: int
    port: int
    log_path: Path
    ticks: int | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{procs.LOOPBACK}:{self.port}"

    def alive(self) -> bool:
        return procs.is_same_process(self.pid, self.ticks)

    def stop(self, timeout: float = 5.0) -> None:
        procs.stop_pid(self.pid, ticks=self.ticks, timeout=timeout)


def start_moto(
    log_path: Path,
    *,
    port: int = 0,
    timeout: float = 30.0,
    die_with_parent: bool = False,
    python: str = sys.executable,
) -> MotoServer:
    """Start moto on 127.0.0.1 (port 0 = a free one) and wait until it answers /moto-api/."""
    explicit = port != 0
    if explicit and procs.port_in_use(port):
        raise procs.ComponentError("moto", f"port {port} on {procs.LOOPBACK} is already in use", log_path)
    env = {**os.environ, **MOTO_ENV}
    # A free port can be taken between probing and binding; retry a couple of times on that race.
    for _attempt in range(3):
        chosen = port if explicit else procs.free_port()
        proc = procs.spawn(
            [python, "-m", "moto.server", "-H", procs.LOOPBACK, "-p", str(chosen)],
            log_path,
            env=env,
            die_with_parent=die_with_parent,
        )
        server = MotoServer(pid=proc.pid, port=chosen, log_path=log_path, ticks=procs.start_ticks(proc.pid))
        try:
            procs.wait_until(
                lambda s=server: procs.http_ok(f"{s.endpoint_url}/moto-api/"),
                timeout=timeout,
                component="moto",
                what="serving /moto-api/",
                log_path=log_path,
                pid=proc.pid,
            )
        except procs.ComponentError:
            server.stop(timeout=2.0)
            if explicit or procs.pid_alive(proc.pid) or not procs.port_in_use(chosen):
                raise
            continue
        return server
    raise procs.ComponentError("moto", "could not bind a free loopback port in 3 tries", log_path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Seed a running moto server like an EKS account.")
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--cluster-name", default=DEFAULT_CLUSTER)
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--ssm-prefix", default=DEFAULT_SSM_PREFIX)
    parser.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = parser.parse_args(argv)
    result = seed(
        args.endpoint_url,
        cluster_name=args.cluster_name,
        region=args.region,
        ssm_prefix=args.ssm_prefix,
        k8s_version=args.k8s_version,
    )
    print(json.dumps(result.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
