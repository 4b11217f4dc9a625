"""Proof that the local proving ground is the real thing: moto seeded like EKS, a control plane
whose controller-manager, scheduler (with extender) and kwok really act, and a clean `down`."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from hack.localcluster import awsseed, procs
from tests.integration.helpers import guarded

pytestmark = pytest.mark.integration


def _by_tag(key: str, value: str) -> list[dict[str, object]]:
    return [{"Name": f"tag:{key}", "Values": [value]}]


def test_seeded_account_is_discoverable_by_tag(aws: awsseed.AwsSeed) -> None:
    ec2 = aws.client("ec2")
    key, value = aws.discovery_tag
    subnets = ec2.describe_subnets(Filters=_by_tag(key, value))["Subnets"]
    assert {s["AvailabilityZone"]: s["SubnetId"] for s in subnets} == dict(aws.subnets)
    assert set(aws.subnets) == {"us-west-2a", "us-west-2b", "us-west-2c"}
    assert all(s["VpcId"] == aws.vpc_id for s in subnets)
    by_discovery = ec2.describe_subnets(Filters=_by_tag("karpenter.sh/discovery", aws.cluster_name))
    assert len(by_discovery["Subnets"]) == 3
    groups = ec2.describe_security_groups(Filters=_by_tag(key, value))["SecurityGroups"]
    assert [g["GroupId"] for g in groups] == [aws.security_group_id]


def test_ami_parameters_follow_each_familys_published_layout(aws: awsseed.AwsSeed) -> None:
    ssm = aws.client("ssm")
    k = aws.k8s_version
    for key, path in (
        ("amd64", f"eks/optimized-ami/{k}/amazon-linux-2023/x86_64/standard/recommended/image_id"),
        ("arm64", f"eks/optimized-ami/{k}/amazon-linux-2023/arm64/standard/recommended/image_id"),
        ("gpu", f"eks/optimized-ami/{k}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"),
        ("AL2/amd64", "eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id"),
        ("Bottlerocket/amd64", f"bottlerocket/aws-k8s-{k}/x86_64/latest/image_id"),
        ("Ubuntu/arm64", f"canonical/ubuntu/eks/20.04/{k}/stable/current/arm64/hvm/ebs-gp2/ami-id"),
    ):
        name = f"{aws.ssm_root}/{path}"
        assert ssm.get_parameter(Name=name)["Parameter"]["Value"] == aws.amis[key]
    images = aws.client("ec2").describe_images(ImageIds=list(aws.amis.values()))["Images"]
    assert {i["ImageId"] for i in images} == set(aws.amis.values())


def test_create_fleet_with_seeded_ami_and_launch_template(aws: awsseed.AwsSeed) -> None:
    ec2 = aws.client("ec2")
    name = f"lc-test-{uuid.uuid4().hex[:8]}"
    ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": aws.amis["amd64"], "SecurityGroupIds": [aws.security_group_id]},
    )
    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-west-2b"]}],
            }
        ],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "karpy.sh/launch-id", "Value": name}]}
        ],
    )
    ids = [i for entry in fleet["Instances"] for i in entry["InstanceIds"]]
    assert len(ids) == 1
    instance = ec2.describe_instances(InstanceIds=ids)["Reservations"][0]["Instances"][0]
    assert instance["ImageId"] == aws.amis["amd64"]
    assert instance["SubnetId"] == aws.subnets["us-west-2b"]
    assert instance["InstanceType"] == "m5.large"
    ec2.terminate_instances(InstanceIds=ids)


def test_moto_validates_amis_and_instance_types(aws: awsseed.AwsSeed) -> None:
    ec2 = aws.client("ec2")
    with pytest.raises(botocore.exceptions.ClientError) as bad_ami:
        ec2.run_instances(
            ImageId="ami-00000000000000000",
            InstanceType="m5.large",
            MinCount=1,
            MaxCount=1,
            SubnetId=aws.subnets["us-west-2a"],
        )
    assert "InvalidAMIID" in bad_ami.value.response["Error"]["Code"]
    with pytest.raises(botocore.exceptions.ClientError) as bad_type:
        ec2.run_instances(
            ImageId=aws.amis["amd64"],
            InstanceType="zz9.huge",
            MinCount=1,
            MaxCount=1,
            SubnetId=aws.subnets["us-west-2a"],
        )
    assert "InvalidInstanceType" in bad_type.value.response["Error"]["Code"] or "zz9.huge" in str(
        bad_type.value
    )


def test_interruption_rules_route_to_the_queue(aws: awsseed.AwsSeed) -> None:
    events, sqs = aws.client("events"), aws.client("sqs")
    instance_id = f"i-{uuid.uuid4().hex[:17]}"
    events.put_events(
        Entries=[
            {
                "Source": "aws.ec2",
                "DetailType": "EC2 Spot Instance Interruption Warning",
                "Detail": json.dumps({"instance-id": instance_id, "instance-action": "terminate"}),
            }
        ]
    )
    seen = []
    for _ in range(5):
        reply = sqs.receive_message(
            QueueUrl=aws.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=0
        )
        for message in reply.get("Messages", []):
            body = json.loads(message["Body"])
            if body.get("detail", {}).get("instance-id") == instance_id:
                seen.append(body)
                sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=message["ReceiptHandle"])
        if seen:
            break
    assert [b["detail-type"] for b in seen] == ["EC2 Spot Instance Interruption Warning"]
    rules = {r["Name"] for r in events.list_rules(NamePrefix=aws.cluster_name)["Rules"]}
    assert rules == set(aws.rules)


# --- control plane -------------------------------------------------------------------------------


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


@pytest.fixture
def kwok_node(core_v1: Any, namespace: str) -> Iterator[str]:
    """A node kwok manages (label karpy.sh/managed=true), labelled so only this test's pods fit."""
    from kubernetes import client

    name = f"kwok-{namespace}"
    labels = {"karpy.sh/managed": "true", "lc-test": namespace, "kubernetes.io/hostname": name}
    core_v1.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    _wait(lambda: _ready(core_v1.read_node(name)), 60, f"kwok to make node {name} Ready")
    yield name
    core_v1.delete_node(name)


def _ready(node: Any) -> bool:
    conditions = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions) and not any(
        t.key == "node.kubernetes.io/not-ready" for t in node.spec.taints or []
    )


def _pods(core_v1: Any, namespace: str, selector: str) -> list[Any]:
    return core_v1.list_namespaced_pod(namespace, label_selector=selector).items


def test_deployment_runs_on_a_kwok_node_and_its_pods_go_with_it(
    cluster: Any, namespace: str, kwok_node: str, core_v1: Any, apps_v1: Any
) -> None:
    from kubernetes import client

    labels = {"app": "proof"}
    container = client.V1Container(name="app", image="registry.invalid/proof:1")
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels),
        spec=client.V1PodSpec(containers=[container], node_selector={"lc-test": namespace}),
    )
    apps_v1.create_namespaced_deployment(
        namespace,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="proof"),
            spec=client.V1DeploymentSpec(
                replicas=3, selector=client.V1LabelSelector(match_labels=labels), template=template
            ),
        ),
    )

    def running() -> list[Any]:
        pods = _pods(core_v1, namespace, "app=proof")
        ok = [p for p in pods if p.status.phase == "Running" and p.spec.node_name == kwok_node]
        return ok if len(ok) == 3 else []

    pods = _wait(running, 120, "3 Running pods on the kwok node")
    assert all(p.status.pod_ip for p in pods)
    assert all(p.metadata.owner_references[0].kind == "ReplicaSet" for p in pods)

    apps_v1.delete_namespaced_deployment("proof", namespace, propagation_policy="Foreground")
    _wait(lambda: not _pods(core_v1, namespace, "app=proof"), 120, "the deployment's pods to be deleted")


class _StubExtender(ThreadingHTTPServer):
    """Records what kube-scheduler POSTs and accepts every node."""

    def __init__(self, port: int) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        super().__init__(("127.0.0.1", port), _StubHandler)


class _StubHandler(BaseHTTPRequestHandler):
    server: _StubExtender

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        self.server.requests.append((self.path, body))
        names = body.get("NodeNames") or []
        if self.path.rstrip("/").endswith("filter"):
            reply: Any = {"NodeNames": names, "FailedNodes": {}, "Error": ""}
        else:
            reply = [{"Host": n, "Score": 0} for n in names]
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_scheduler_calls_the_extender_at_the_configured_url(
    cluster: Any, namespace: str, kwok_node: str, core_v1: Any
) -> None:
    try:
        stub = _StubExtender(cluster.extender_port)
    except OSError as exc:
        pytest.fail(f"extender port {cluster.extender_port} is taken by another process: {exc}")
    thread = threading.Thread(target=stub.serve_forever, daemon=True)
    thread.start()
    try:
        # Requesting karpy.sh/guarded: the shipped config sends kube-scheduler's filter for it.
        pod = guarded(
            {
                "metadata": {"name": "extended"},
                "spec": {
                    "containers": [{"name": "app", "image": "registry.invalid/proof:1"}],
                    "nodeSelector": {"lc-test": namespace},
                },
            }
        )
        core_v1.create_namespaced_pod(namespace, pod)

        def filter_call() -> dict[str, Any] | None:
            for path, body in list(stub.requests):
                meta = (body.get("Pod") or {}).get("metadata", {})
                if (
                    path == "/filter"
                    and meta.get("name") == "extended"
                    and meta.get("namespace") == namespace
                ):
                    return body
            return None

        body = _wait(filter_call, 60, "a filter call for the pod at the stub extender")
        assert {"Pod", "Nodes", "NodeNames"} <= set(body)
        assert body["Nodes"] is None  # nodeCacheCapable: names only
        assert body["NodeNames"] == [kwok_node]
        bound = _wait(
            lambda: core_v1.read_namespaced_pod("extended", namespace).spec.node_name, 60, "binding"
        )
        assert bound == kwok_node
    finally:
        stub.shutdown()
        stub.server_close()


def test_cluster_moto_is_seeded(cluster: Any) -> None:
    aws = cluster.aws
    key, value = aws.discovery_tag
    subnets = aws.client("ec2").describe_subnets(Filters=_by_tag(key, value))["Subnets"]
    assert sorted(s["SubnetId"] for s in subnets) == sorted(aws.subnet_ids)
    assert cluster.state["processes"]["moto"]["port"] == int(aws.endpoint_url.rsplit(":", 1)[1])


def test_apiserver_serves_tls_from_the_local_ca_and_requires_auth(cluster: Any) -> None:
    context = ssl.create_default_context(cafile=cluster.state["pki"]["ca_cert"])
    with urllib.request.urlopen(f"{cluster.apiserver_url}/readyz", context=context, timeout=5) as resp:
        assert resp.read() == b"ok"
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(f"{cluster.apiserver_url}/api/v1/nodes", context=context, timeout=5)
    assert denied.value.code in (401, 403)
    host, port = urllib.parse.urlsplit(cluster.apiserver_url).netloc.split(":")
    assert host == "127.0.0.1" and int(port) == cluster.state["ports"]["kube-apiserver"]


# --- lifecycle and faults ------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str], timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_down_after_a_crash_leaves_no_process_and_no_port(cluster: Any, tmp_path: Path) -> None:
    # A second, short-lived instance, so the session's cluster is untouched.
    env = {
        **os.environ,
        "KARPY_RUN_DIR": str(tmp_path / "run"),
        "KARPY_EXTENDER_PORT": str(procs.free_port()),
    }
    started = _cli("hack.localcluster.cluster", "up", env=env)
    assert started.returncode == 0, started.stderr
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    recorded = state["processes"]
    assert set(recorded) == {
        "moto",
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    }
    assert all(procs.is_same_process(p["pid"], p["ticks"]) for p in recorded.values())
    assert state["ports"]["kube-apiserver"] != cluster.state["ports"]["kube-apiserver"]

    again = _cli("hack.localcluster.cluster", "up", env=env, timeout=60)
    assert again.returncode == 1
    assert "already running" in again.stderr and len(again.stderr.strip().splitlines()) == 1

    os.kill(recorded["kube-scheduler"]["pid"], signal.SIGKILL)  # a crashed component
    report = _cli("hack.localcluster.cluster", "status", env=env, timeout=60)
    assert report.returncode == 3
    assert re.search(r"kube-scheduler\s+\d+\s+\d+\s+-\s+stopped", report.stdout)

    stopped = _cli("hack.localcluster.cluster", "down", env=env, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    for name, entry in recorded.items():
        assert not procs.pid_alive(entry["pid"]), f"{name} (pid {entry['pid']}) survived down"
        assert entry["port"] is None or not procs.listening(entry["port"]), f"{name} port still listening"


def test_missing_go_toolchain_is_one_clear_line(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin", "KARPY_CACHE_DIR": str(tmp_path / "cache")}
    result = _cli("hack.localcluster.build", "etcd", env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "go toolchain: `go` not found on PATH; install Go >= 1.26 (e.g. /usr/local/go/bin)"
    ]


def test_moto_on_a_taken_port_names_component_and_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = tmp_path / "moto.log"
        started = time.monotonic()
        with pytest.raises(procs.ComponentError) as error:
            awsseed.start_moto(log, port=port, timeout=10)
    assert time.monotonic() - started < 10
    assert str(error.value) == f"moto: port {port} on 127.0.0.1 is already in use (log: {log})"


def test_a_component_that_fails_to_start_is_named_and_nothing_is_left(cluster: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "etcd-data").write_text("not a directory")  # etcd cannot use its data dir
    env = {**os.environ, "KARPY_RUN_DIR": str(run), "KARPY_EXTENDER_PORT": str(procs.free_port())}
    started = time.monotonic()
    result = _cli("hack.localcluster.cluster", "up", env=env, timeout=120)
    assert time.monotonic() - started < 60
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"etcd: exited before healthy (log: {run}/logs/etcd.log)"]
    recorded = json.loads((run / "state.json").read_text())["processes"]
    assert {"moto", "etcd"} <= set(recorded)
    assert not [name for name, p in recorded.items() if procs.pid_alive(p["pid"])]
