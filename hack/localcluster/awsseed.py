"""Run moto_server on loopback and seed it like an EKS account, for karpy's AWS provider.

What ``seed()`` creates (region default us-west-2, cluster name default ``karpy``):

- a VPC 10.0.0.0/16 tagged ``Name=<cluster>-vpc``;
- one private subnet per zone (default ``<region>a/b/c``), 10.0.<32*i>.0/19 each, tagged
  ``kubernetes.io/cluster/<cluster>=owned``, ``karpenter.sh/discovery=<cluster>``,
  ``kubernetes.io/role/internal-elb=1`` and ``Name=<cluster>-private-<zone>``;
- a node security group ``<cluster>-node`` in that VPC with the same two discovery tags;
- one AMI per AMI family x architecture x accelerator registered with ``ec2.register_image``,
  tagged ``karpy.sh/ami-family=<family>``, and the SSM parameter each family publishes for it
  (type String, DataType aws:ec2:image), mirroring ``/aws/service`` under ``ssm_root`` (default
  ``/karpy-test``, because moto refuses writes under ``/aws/service``); see ``AMI_PARAMETERS``:
  AL2023 ``eks/optimized-ami/<k8s>/amazon-linux-2023/<x86_64|arm64>/<standard|nvidia|neuron>/
  recommended/image_id``, Bottlerocket ``bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/latest/image_id``,
  Ubuntu ``canonical/ubuntu/eks/20.04/<k8s>/stable/current/<amd64|arm64>/hvm/ebs-gp2/ami-id``, all
  with ``<k8s>`` the seed's version (like ``1.37``), and AL2
  ``eks/optimized-ami/1.32/amazon-linux-2[-arm64|-gpu]/recommended/image_id`` (AWS publishes no AL2
  AMI after 1.32). ``amis`` keys: ``amd64``, ``arm64``, ``gpu`` are the AL2023 images karpy boots by
  default; the rest are ``<family>/<shape>``. moto ignores the Architecture of a registered image
  (it reports x86_64 for all); the SSM path, not DescribeImages, is what says arm64/gpu;
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
DEFAULT_SSM_ROOT = "/karpy-test"
DEFAULT_K8S_VERSION = "1.37"
#: The last Kubernetes version AWS published EKS AL2 AMIs for.
AL2_K8S_VERSION = "1.32"
#: The cluster's service CIDR and DNS Service IP, as an EKS cluster's defaults.
SERVICE_CIDR = "10.100.0.0/16"
CLUSTER_DNS = "10.100.0.10"
TEST_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

#: amis key -> (AMI family, EC2 architecture, SSM parameter under the root; {k} = k8s version), as
#: each family publishes them (written out here, not taken from karpy, so tests check karpy's paths).
_AL2023 = "eks/optimized-ami/{k}/amazon-linux-2023"
_AL2 = f"eks/optimized-ami/{AL2_K8S_VERSION}"
_UBUNTU = "canonical/ubuntu/eks/20.04/{k}/stable/current"
AMI_PARAMETERS = {
    "amd64": ("AL2023", "x86_64", f"{_AL2023}/x86_64/standard/recommended/image_id"),
    "arm64": ("AL2023", "arm64", f"{_AL2023}/arm64/standard/recommended/image_id"),
    "gpu": ("AL2023", "x86_64", f"{_AL2023}/x86_64/nvidia/recommended/image_id"),
    "AL2023/neuron": ("AL2023", "x86_64", f"{_AL2023}/x86_64/neuron/recommended/image_id"),
    "AL2023/arm64-nvidia": ("AL2023", "arm64", f"{_AL2023}/arm64/nvidia/recommended/image_id"),
    "AL2/amd64": ("AL2", "x86_64", f"{_AL2}/amazon-linux-2/recommended/image_id"),
    "AL2/arm64": ("AL2", "arm64", f"{_AL2}/amazon-linux-2-arm64/recommended/image_id"),
    "AL2/gpu": ("AL2", "x86_64", f"{_AL2}/amazon-linux-2-gpu/recommended/image_id"),
    "Bottlerocket/amd64": ("Bottlerocket", "x86_64", "bottlerocket/aws-k8s-{k}/x86_64/latest/image_id"),
    "Bottlerocket/arm64": ("Bottlerocket", "arm64", "bottlerocket/aws-k8s-{k}/arm64/latest/image_id"),
    "Bottlerocket/amd64-nvidia": (
        "Bottlerocket",
        "x86_64",
        "bottlerocket/aws-k8s-{k}-nvidia/x86_64/latest/image_id",
    ),
    "Bottlerocket/arm64-nvidia": (
        "Bottlerocket",
        "arm64",
        "bottlerocket/aws-k8s-{k}-nvidia/arm64/latest/image_id",
    ),
    "Ubuntu/amd64": ("Ubuntu", "x86_64", f"{_UBUNTU}/amd64/hvm/ebs-gp2/ami-id"),
    "Ubuntu/arm64": ("Ubuntu", "arm64", f"{_UBUNTU}/arm64/hvm/ebs-gp2/ami-id"),
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

#: Who may assume the node role: EC2 instances.
NODE_TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
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
    ssm_root: str
    k8s_version: str
    vpc_id: str
    subnets: Mapping[str, str]  # zone -> subnet id
    security_group_id: str
    amis: Mapping[str, str]  # AMI_PARAMETERS key -> ami id
    ssm_parameters: Mapping[str, str]  # parameter name -> ami id
    queue_url: str
    queue_arn: str
    rules: tuple[str, ...] = field(default=())
    #: The nodes' instance profile (role KarpenterNodeRole-<cluster>), what Karpenter's getting-started
    #: install sets as its default instance profile (KARPY_AWS_DEFAULT_INSTANCE_PROFILE).
    instance_profile: str = ""

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
            "ssm_root": self.ssm_root,
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


def ssm_image_path(root: str, k8s_version: str, key: str) -> str:
    """The seeded SSM parameter of the AMI_PARAMETERS entry `key`."""
    return f"{root.rstrip('/')}/{AMI_PARAMETERS[key][2].format(k=k8s_version)}"


def publish_ami(ssm: Any, root: str, k8s_version: str, key: str, ami: str) -> str:
    """Point the parameter of `key` at `ami` (as AWS does when it releases an AMI); its name."""
    name = ssm_image_path(root, k8s_version, key)
    ssm.put_parameter(Name=name, Value=ami, Type="String", DataType="aws:ec2:image", Overwrite=True)
    return name


def seed(
    endpoint_url: str,
    *,
    cluster_name: str = DEFAULT_CLUSTER,
    region: str = DEFAULT_REGION,
    ssm_root: str = DEFAULT_SSM_ROOT,
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
    for key, (family, arch, _path) in AMI_PARAMETERS.items():
        shape = key.rpartition("/")[2]
        ami = ec2.register_image(
            Name=f"karpy-test-{family.lower()}-{shape}-{k8s_version}",
            Description=f"EKS optimized {family} {shape} stand-in for karpy tests",
            Architecture=arch,
            RootDeviceName="/dev/xvda",
        )["ImageId"]
        # register_image drops TagSpecifications in moto, so tag afterwards.
        ec2.create_tags(Resources=[ami], Tags=_tags({"karpy.sh/ami-family": family, **discovery}))
        amis[key] = ami
        parameters[publish_ami(ssm, ssm_root, k8s_version, key, ami)] = ami

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

    # Karpenter v0.31's getting-started CloudFormation: KarpenterNodeRole-<cluster> in
    # KarpenterNodeInstanceProfile-<cluster>, installed as settings.aws.defaultInstanceProfile.
    iam = aws_client("iam", endpoint_url, region)
    role = f"KarpenterNodeRole-{cluster_name}"
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(NODE_TRUST_POLICY))
    instance_profile = f"KarpenterNodeInstanceProfile-{cluster_name}"
    iam.create_instance_profile(InstanceProfileName=instance_profile)
    iam.add_role_to_instance_profile(InstanceProfileName=instance_profile, RoleName=role)

    return AwsSeed(
        endpoint_url=endpoint_url,
        region=region,
        cluster_name=cluster_name,
        ssm_root=ssm_root,
        k8s_version=k8s_version,
        vpc_id=vpc_id,
        subnets=subnets,
        security_group_id=sg_id,
        amis=amis,
        ssm_parameters=parameters,
        queue_url=queue_url,
        queue_arn=queue_arn,
        rules=tuple(rules),
        instance_profile=instance_profile,
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
    parser.add_argument("--ssm-root", default=DEFAULT_SSM_ROOT)
    parser.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    args = parser.parse_args(argv)
    result = seed(
        args.endpoint_url,
        cluster_name=args.cluster_name,
        region=args.region,
        ssm_root=args.ssm_root,
        k8s_version=args.k8s_version,
    )
    print(json.dumps(result.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
