"""Issue 6's proofs on the local control plane + moto: lifecycle, provisioning and the extender run
in this process against the real kube-apiserver/kube-scheduler/controller-manager/kwok and moto.

Every test uses its own Provisioner and namespace. Short TTLs and a short GC grace stand in for
Karpenter's defaults; the code paths are the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from kubernetes import client

from extender.api import labels as wk
from extender.cluster.boundpods import BoundPods
from extender.lifecycle import metrics
from extender.lifecycle.leader import LeaderElector
from extender.provisioning.controller import ProvisioningController
from extender.settings import (
    LeaderElectionSettings,
)
from extender.state import ClusterState
from tests.integration import lifecycle_harness
from tests.integration.helpers import (
    all_bound,
    controller_env,
    free_port,
    pod_manifest,
    unique,
    wait_for,
)
from tests.integration.lifecycle_harness import (
    GC_GRACE,
    Karpy,
    available,
    deployment,
    instance_of,
    instance_state,
    live_pods,
    messages,
    moved_off,
    node_or_none,
    provisioner,
    ready_untainted,
)

pytestmark = pytest.mark.integration

# The harness's fixtures, used by name in the tests below.
karpy = lifecycle_harness.karpy
lifecycle_log = lifecycle_harness.lifecycle_log

# -- proofs ----------------------------------------------------------------------------------------


def test_empty_node_is_annotated_then_terminated_after_ttl(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    prov = unique("empty")
    provisioner(
        karpy.kube,
        prov,
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
        ttlSecondsAfterEmpty=5,
    )
    deployment(apps_v1, namespace, "inflate", prov, 2)
    pods = wait_for(
        lambda: (
            (ps := live_pods(core_v1, namespace, "inflate"))
            and len(ps) == 2
            and all(p.spec.node_name for p in ps)
            and ps
        ),
        90,
        "inflate bound",
    )
    node = pods[0].spec.node_name
    wait_for(lambda: ready_untainted(core_v1, node), 60, "not-ready taint removed once Ready")
    instance = instance_of(core_v1.read_node(node))

    def status_cpu() -> str | None:
        obj = client.CustomObjectsApi(karpy.kube).get_cluster_custom_object(
            "karpenter.sh", "v1alpha5", "provisioners", prov
        )
        return ((obj.get("status") or {}).get("resources") or {}).get("cpu")

    wait_for(lambda: status_cpu() not in (None, "0"), 30, "provisioner status counting the node")
    apps_v1.delete_namespaced_deployment("inflate", namespace)
    annotated = wait_for(
        lambda: (
            (n := node_or_none(core_v1, node))
            and (n.metadata.annotations or {}).get(wk.EMPTINESS_TIMESTAMP_ANNOTATION)
        ),
        60,
        "emptiness annotation",
    )
    seen_at = time.monotonic()
    assert annotated.endswith("Z")
    wait_for(lambda: node_or_none(core_v1, node) is None, 60, "empty node deleted")
    assert time.monotonic() - seen_at >= 3.5, "terminated before the 5s TTL ran out"
    wait_for(lambda: instance_state(karpy, instance) == "terminated", 30, "instance terminated in moto")
    wait_for(lambda: status_cpu() == "0", 30, "provisioner status no longer counting the deleted node")
    log = messages(lifecycle_log)
    for line in (
        f"Added TTL to empty node {node}",
        f"Triggering termination after 5s for empty node {node}",
        f"Cordoned node {node}",
        f"Deleted node {node}",
    ):
        assert line in log, line


def test_drain_respects_pdb_and_do_not_evict_holds_the_node(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    from kubernetes import client

    prov = unique("drain")
    # One node for the three pods: without a type requirement, three t1.micro ($0.02/h each) are
    # cheaper than any one node that holds them, and the solver splits (issue 15's split rule).
    provisioner(
        karpy.kube, prov, [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c5.large", "c5.xlarge"]}]
    )
    deployment(apps_v1, namespace, "web", prov, 3, cpu="500m")
    wait_for(lambda: available(core_v1, namespace, "web") == 3, 90, "3 web pods available")
    nodes = {p.spec.node_name for p in live_pods(core_v1, namespace, "web")}
    assert len(nodes) == 1
    node = nodes.pop()
    instance = instance_of(core_v1.read_node(node))
    client.PolicyV1Api(karpy.kube).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    keeper = pod_manifest("keeper", "100m")
    keeper["metadata"]["labels"] = {"app": "keeper"}
    keeper["metadata"]["annotations"] = {wk.DO_NOT_EVICT_ANNOTATION: "true"}
    keeper["spec"]["nodeName"] = node
    core_v1.create_namespaced_pod(namespace, keeper)
    wait_for(
        lambda: core_v1.read_namespaced_pod("keeper", namespace).status.phase == "Running",
        30,
        "keeper running",
    )
    wait_for(
        lambda: (
            client.PolicyV1Api(karpy.kube)
            .read_namespaced_pod_disruption_budget("web", namespace)
            .status.disruptions_allowed
            == 1
        ),
        30,
        "PDB allows one disruption",
    )

    minimum = [3]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            minimum[0] = min(minimum[0], available(core_v1, namespace, "web"))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    core_v1.delete_node(node)
    # The do-not-evict pod holds the whole drain: nothing is evicted, the node stays (cordoned).
    wait_for(
        lambda: (
            f"Unable to drain node {node}, pod {namespace}/keeper has do-not-evict annotation"
            in messages(lifecycle_log)
        ),
        30,
        "do-not-evict logged",
    )
    time.sleep(3)
    held = core_v1.read_node(node)
    assert held.spec.unschedulable and held.metadata.deletion_timestamp is not None
    assert len([p for p in live_pods(core_v1, namespace, "web") if p.spec.node_name == node]) == 3
    assert (node, "FailedDraining") in {(n, r) for n, r, _ in karpy.recorder.published}
    events = core_v1.list_namespaced_event("default", field_selector=f"involvedObject.name={node}").items
    assert any(e.reason == "FailedDraining" for e in events)
    core_v1.delete_namespaced_pod("keeper", namespace, grace_period_seconds=0)
    wait_for(lambda: node_or_none(core_v1, node) is None, 180, "drained node deleted")
    sampling.set()
    sampler.join(5)
    wait_for(lambda: available(core_v1, namespace, "web") == 3, 90, "web back to 3 on a new node")
    assert minimum[0] >= 2, f"PDB violated: only {minimum[0]} available during the drain"
    assert instance_state(karpy, instance) == "terminated"
    assert any("due to PDB violation" in m for m in messages(lifecycle_log)), "PDB never pushed back"
    print(f"\nPDB minimum available during drain: {minimum[0]} (minAvailable 2 of 3)")


def test_spot_interruption_via_eventbridge_replaces_node_and_malformed_is_dropped(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    prov = unique("spot")
    provisioner(karpy.kube, prov, [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}])
    deployment(apps_v1, namespace, "app", prov, 2)
    wait_for(lambda: available(core_v1, namespace, "app") == 2, 90, "2 app pods available")
    node = live_pods(core_v1, namespace, "app")[0].spec.node_name
    old = core_v1.read_node(node)
    instance = instance_of(old)
    seed = karpy.settings.aws
    events = karpy.cloud.clients.ec2._endpoint
    assert seed.endpoint_url and events is not None
    import boto3

    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=seed.region
    )
    eventbridge = session.client("events", endpoint_url=seed.endpoint_url)
    sqs = session.client("sqs", endpoint_url=seed.endpoint_url)
    malformed_before = metrics.INTERRUPTION_RECEIVED.labels(message_type="malformed")._value.get()
    sqs.send_message(QueueUrl=seed.interruption_queue, MessageBody="{not json")
    resp = eventbridge.put_events(
        Entries=[
            {
                "Source": "aws.ec2",
                "DetailType": "EC2 Spot Instance Interruption Warning",
                "Detail": json.dumps({"instance-id": instance, "instance-action": "terminate"}),
                "Resources": [f"arn:aws:ec2:{seed.region}:123456789012:instance/{instance}"],
            }
        ]
    )
    assert resp["FailedEntryCount"] == 0
    wait_for(lambda: node_or_none(core_v1, node) is None, 120, "interrupted node gone")
    pods = wait_for(moved_off(core_v1, namespace, "app", node), 120, "pods rebound elsewhere")
    assert {p.spec.node_name for p in pods}.isdisjoint({node})
    assert instance_state(karpy, instance) == "terminated"
    log = messages(lifecycle_log)
    assert f"Cordoned node {node}" in log
    assert any(m.startswith("Launched") and f"for interrupted node {node}" in m for m in log)
    key = (old.metadata.labels[wk.INSTANCE_TYPE], old.metadata.labels[wk.ZONE], "spot")
    assert any((k.instance_type, k.zone, k.capacity_type) == key for k in karpy.controller.unavailable)
    wait_for(
        lambda: (
            metrics.INTERRUPTION_RECEIVED.labels(message_type="malformed")._value.get() > malformed_before
        ),
        30,
        "malformed message counted",
    )
    wait_for(
        lambda: (
            sqs.get_queue_attributes(QueueUrl=seed.interruption_queue, AttributeNames=["All"])["Attributes"][
                "ApproximateNumberOfMessages"
            ]
            == "0"
        ),
        30,
        "queue drained (malformed deleted, not redelivered)",
    )


def test_expired_node_is_replaced_before_it_is_drained(
    karpy: Karpy, core_v1: Any, apps_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    prov = unique("expire")
    provisioner(karpy.kube, prov, [], ttlSecondsUntilExpired=25)
    deployment(apps_v1, namespace, "old", prov, 2)
    wait_for(lambda: available(core_v1, namespace, "old") == 2, 90, "2 pods available")
    node = live_pods(core_v1, namespace, "old")[0].spec.node_name
    instance = instance_of(core_v1.read_node(node))
    pending_seen = [0]
    done = threading.Event()

    def watch_pending() -> None:
        while not done.is_set():
            pending = [p for p in live_pods(core_v1, namespace, "old") if not p.spec.node_name]
            pending_seen[0] = max(pending_seen[0], len(pending))
            time.sleep(0.1)

    threading.Thread(target=watch_pending, daemon=True).start()
    wait_for(lambda: node_or_none(core_v1, node) is None, 120, "expired node gone")
    pods = wait_for(moved_off(core_v1, namespace, "old", node), 60, "pods on the new node")
    done.set()
    assert instance_state(karpy, instance) == "terminated"
    log = messages(lifecycle_log)
    assert any(m.startswith(f"Triggering termination for expired node {node} after 25s") for m in log)
    replacement = next(m for m in log if f"for expired node {node}" in m and m.startswith("Launched"))
    assert pods[0].spec.node_name in replacement
    assert all(p.spec.node_name is not None for p in pods)
    print(
        f"\nexpiry: pods pending at most {pending_seen[0]} at a time while moving (evicted pods are "
        "recreated and bound by kube-scheduler onto the already-Ready replacement)"
    )


def test_gc_terminates_orphan_instances_and_deletes_nodes_without_instances(
    karpy: Karpy, core_v1: Any, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    from extender.api.provisioner import default_provisioner
    from extender.cloud.types import LaunchRequest
    from extender.cluster.nodes import create_node

    prov = default_provisioner(unique("gc"))
    launched = karpy.cloud.create(
        LaunchRequest(
            provisioner=prov,
            instance_types=("m5.large",),
            zones=("us-west-2a",),
            capacity_types=("on-demand",),
            count=2,
            labels={},
            taints=(),
            launch_id=unique("launch"),
        )
    )
    orphan, doomed = launched.instances
    # A Node for `doomed`, whose instance then disappears behind karpy's back.
    name = unique("gc-node")
    create_node(
        karpy.kube,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {wk.PROVISIONER_NAME: prov.name},
                "finalizers": [wk.TERMINATION_FINALIZER],
            },
            "spec": {"providerID": doomed.provider_id},
        },
    )
    karpy.ec2.terminate_instances(InstanceIds=[doomed.id])
    started = time.monotonic()
    wait_for(lambda: instance_state(karpy, orphan.id) == "terminated", GC_GRACE + 30, "orphan collected")
    assert time.monotonic() - started >= GC_GRACE - 3, "orphan collected before its grace"
    wait_for(lambda: node_or_none(core_v1, name) is None, GC_GRACE + 30, "node without instance deleted")
    log = messages(lifecycle_log)
    assert any(m.startswith(f"Garbage collecting instance {orphan.id} with no node") for m in log)
    assert f"Garbage collecting node {name} whose instance is gone" in log
    print("\nGC: orphans found 1 / cleaned 1; nodes without instance found 1 / deleted 1")


def test_instance_launched_before_a_crash_is_adopted_on_leadership_and_gets_the_pods(
    karpy: Karpy, core_v1: Any, namespace: str, lifecycle_log: pytest.LogCaptureFixture
) -> None:
    from extender.cloud.types import LaunchRequest
    from extender.cluster.pool_resources import list_provisioners

    name = unique("adopt")
    provisioner(karpy.kube, name, [])
    (prov,) = [
        p for p in list_provisioners(karpy.kube, cluster_name=karpy.settings.cluster_name) if p.name == name
    ]
    karpy.leading.clear()  # the replica that "crashed" after CreateFleet; this one follows meanwhile
    try:
        for i in range(2):
            core_v1.create_namespaced_pod(
                namespace, pod_manifest(f"a{i}", "1", selector={wk.PROVISIONER_NAME: name})
            )
        request = LaunchRequest(
            provisioner=prov,
            instance_types=("m5.xlarge",),
            zones=("us-west-2a",),
            capacity_types=("on-demand",),
            count=1,
            labels={},
            taints=(),
            launch_id=unique("launch"),
        )
        (instance,) = karpy.cloud.create(request).instances
        time.sleep(2.5)  # a batch window: the follower parks the pods and launches nothing
        assert not any(p.spec.node_name for p in core_v1.list_namespaced_pod(namespace).items)
    finally:
        karpy.leading.set()
    started = time.monotonic()
    pods = wait_for(all_bound(core_v1, namespace, 2), 20, "pods bound to the adopted node")
    bound_after = time.monotonic() - started
    node = instance.private_dns_name.lower()
    assert {p.spec.node_name for p in pods} == {node}
    reservations = karpy.ec2.describe_instances(
        Filters=[{"Name": f"tag:{wk.PROVISIONER_NAME}", "Values": [name]}]
    )["Reservations"]
    assert [i["InstanceId"] for r in reservations for i in r["Instances"]] == [instance.id]
    log = messages(lifecycle_log)
    assert f"Adopted instance {instance.id} of an interrupted launch as node {node}" in log
    assert sum(m.startswith("Adopted instance ") for m in log) == 1, "adopted twice (two recovery paths)"
    print(
        f"\nadoption: instance without a node adopted, 2 parked pods bound {bound_after:.1f}s after "
        "leadership, 0 extra launches"
    )


FOLLOWER_SCRIPT = """
import sys, time, threading, logging
from extender.cluster.client import load
from extender.lifecycle.leader import LeaderElector
from extender.settings import Settings, LeaderElectionSettings
s = Settings(kubeconfig=sys.argv[1])
le = LeaderElectionSettings(enabled=True, namespace="kube-system", lease_name=sys.argv[2],
                            lease_duration_seconds=4, renew_deadline_seconds=3, retry_period_seconds=0.5)
e = LeaderElector(kube=load(s), settings=le, identity="subprocess-leader")
stop = threading.Event()
e.start(stop)
while not e.is_leader():
    time.sleep(0.05)
print("LEADING", flush=True)
stop.wait()
"""


def test_leader_killed_other_replica_takes_over_and_provisions(
    karpy: Karpy, cluster: Any, core_v1: Any, namespace: str
) -> None:
    from kubernetes import client

    lease = unique("karpy-lease")
    le = LeaderElectionSettings(
        enabled=True,
        namespace="kube-system",
        lease_name=lease,
        lease_duration_seconds=4,
        renew_deadline_seconds=3,
        retry_period_seconds=0.5,
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER_SCRIPT, cluster.kubeconfig, lease], stdout=subprocess.PIPE, text=True
    )
    try:
        assert leader.stdout is not None and leader.stdout.readline().strip() == "LEADING"
        karpy.leading.clear()  # the module's replica stands aside; `follower` is the other replica
        # No on_started hook: the controller itself re-queues the pods it parked while following.
        follower = LeaderElector(kube=karpy.kube, settings=le, identity="follower")
        bound = BoundPods()
        pc = ProvisioningController(
            settings=karpy.settings,
            kube=karpy.kube,
            cloud=karpy.cloud,
            state=ClusterState(),
            bound=bound,
            is_leader=follower.is_leader,
        )
        stop = threading.Event()
        bound.start(karpy.kube, stop)
        pc.start(stop)
        follower.start(stop)
        time.sleep(1.5)
        assert not follower.is_leader()
        holder = client.CoordinationV1Api(karpy.kube).read_namespaced_lease(lease, "kube-system")
        assert holder.spec.holder_identity == "subprocess-leader"
        prov = unique("failover")
        provisioner(karpy.kube, prov, [])
        selector = {wk.PROVISIONER_NAME: prov}
        core_v1.create_namespaced_pod(namespace, pod_manifest("p0", "500m", selector=selector))
        time.sleep(2)
        assert not core_v1.read_namespaced_pod("p0", namespace).spec.node_name, "a follower launched"
        killed = time.monotonic()
        leader.kill()  # SIGKILL: no release, the lease must expire
        leader.wait(5)
        wait_for(follower.is_leader, 15, "follower leads")
        failover = time.monotonic() - killed
        wait_for(all_bound(core_v1, namespace, 1), 15 - failover, "pod provisioned by the new leader")
        provisioned = time.monotonic() - killed
        holder = client.CoordinationV1Api(karpy.kube).read_namespaced_lease(lease, "kube-system")
        assert holder.spec.holder_identity == "follower"
        assert holder.spec.lease_transitions >= 1
        print(f"\nfailover: lease acquired {failover:.1f}s after kill -9, pod bound {provisioned:.1f}s after")
        stop.set()
    finally:
        if leader.poll() is None:
            leader.kill()
        karpy.leading.set()


# The controller's workers and its extender app in one process (what `karpy controller` runs under
# gunicorn), so kill -9 takes both down at once.
REPLICA_SCRIPT = """
import logging, threading
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
from werkzeug.serving import make_server
from extender.http.app import create_app
from extender.main import start
from extender.settings import from_env
settings = from_env()
controller = start(settings, threading.Event())
host, port = settings.extender.bind.rsplit(":", 1)
app = create_app(settings, controller.state, controller.provisioning.enqueue)
server = make_server(host, int(port), app, threaded=True)
print("STARTED", flush=True)
server.serve_forever()
"""


def replica_env(cluster: Any, port: int | None = None) -> dict[str, str]:
    """A `karpy controller` environment (benchmarks.provisioning) plus the lifecycle's short GC;
    its extender on `port` (the one kube-scheduler calls) or on a free one."""
    return {
        **controller_env(cluster.state, f"127.0.0.1:{port or free_port()}"),
        "KARPY_AWS_KUBERNETES_VERSION": cluster.aws.k8s_version,
        "KARPY_LIFECYCLE_GC_GRACE_SECONDS": str(GC_GRACE),
        "KARPY_LIFECYCLE_GC_INTERVAL_SECONDS": "2",
    }


def history(
    core: Any, namespace: str, nodes: list[Any], instances: list[Any], names: list[str], logs: Any
) -> str:
    """Where each extra node came from: its instance's launch, the log lines naming it, who bound what."""
    by_id = {i["InstanceId"]: i for i in instances}
    lines = []
    for node in nodes:
        if node.metadata.name not in names:
            continue
        iid = instance_of(node)
        tags = {t["Key"]: t["Value"] for t in by_id.get(iid, {}).get("Tags", [])}
        lines.append(
            f"node {node.metadata.name} created {node.metadata.creation_timestamp} instance {iid} "
            f"launched {by_id.get(iid, {}).get('LaunchTime')} launch id {tags.get(wk.LAUNCH_ID_TAG)}"
        )
        for path in sorted(logs.glob("replica-*.log")):
            lines.extend(
                f"  {path.name}: {line}"
                for line in path.read_text().splitlines()
                if node.metadata.name in line or iid in line or str(tags.get(wk.LAUNCH_ID_TAG)) in line
            )
    for event in core.list_namespaced_event(namespace).items:
        if event.reason == "Scheduled":
            lines.append(f"  {event.source.component or event.reporting_component}: {event.message}")
    return "\n".join(lines)


@pytest.mark.slow
# The race this once lost about 1 run in 3: a restarted replica untaints the node a killed one
# created or it adopts, kube-scheduler binds the pending pods there while the batch plans them, and
# the batch's new node came up empty. Claims and the drop of pods bound meanwhile close it.
def test_kill_9_during_launches_leaves_no_duplicates_and_no_orphans(
    karpy: Karpy, cluster: Any, core_v1: Any, namespace: str, tmp_path: Any
) -> None:
    import random
    from collections import Counter

    rng = random.Random(6)
    prov = unique("crash")
    provisioner(karpy.kube, prov, [])
    selector = {wk.PROVISIONER_NAME: prov}
    karpy.leading.clear()  # only the replica under test may launch
    kills = 0
    phases: Counter[str] = Counter()
    # Each replica serves the extender kube-scheduler calls, so its claims keep kube-scheduler off
    # the pods it is placing; between replicas the extender is down and kube-scheduler ignores it.
    with karpy.extender.handed_over() as port:
        env = replica_env(cluster, port)
        try:
            for round_ in range(20):
                round_names = [f"r{round_}-{i}" for i in range(2)]
                for name in round_names:
                    core_v1.create_namespaced_pod(namespace, pod_manifest(name, "1", selector=selector))
                log_path = tmp_path / f"replica-{round_}.log"
                with open(log_path, "w") as log_file:
                    replica = subprocess.Popen(
                        [sys.executable, "-c", REPLICA_SCRIPT],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=log_file,
                        text=True,
                    )
                    assert replica.stdout is not None
                    replica.stdout.readline()  # STARTED: watches up, the first batch window opens
                    # Kill at a random point shortly after the plan: fleet call, Node create or binds.
                    # A batch whose pods were all bound meanwhile (to a node adopted from the last
                    # kill) plans nothing: then the kill comes once the round's pods are bound.
                    deadline = time.monotonic() + 30
                    polls = 0
                    while "Computed packing" not in log_path.read_text() and time.monotonic() < deadline:
                        polls += 1
                        if polls % 50 == 0 and round_bound(core_v1, namespace, round_names):  # 0.5 s
                            break
                        time.sleep(0.01)
                    time.sleep(rng.uniform(0.0, 0.3))
                    replica.kill()
                    replica.wait(10)
                kills += 1
                text = log_path.read_text()
                phases[
                    (
                        "bound"
                        if "Bound " in text
                        else "launched"
                        if "Launched instance" in text
                        else "planned"
                        if "Computed packing" in text
                        else "batching"
                    )
                ] += 1
            with open(tmp_path / "replica-final.log", "w") as final_log:
                final = subprocess.Popen(
                    [sys.executable, "-c", REPLICA_SCRIPT],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=final_log,
                )
                try:
                    wait_for(all_bound(core_v1, namespace, 40), 120, "all 40 pods bound after the kills")
                    # Let GC see every instance left without a Node: one grace and a few of its
                    # passes past the newest instance or node.
                    time.sleep(max(0.0, newest_launch(karpy, core_v1, prov) + GC_GRACE + 6 - time.time()))
                    nodes = [
                        n
                        for n in core_v1.list_node(label_selector=f"{wk.PROVISIONER_NAME}={prov}").items
                        if n.metadata.deletion_timestamp is None
                    ]
                    node_instances = {instance_of(n) for n in nodes}
                    instances = provisioner_instances(karpy, prov)
                    live = {
                        i["InstanceId"] for i in instances if i["State"]["Name"] in ("pending", "running")
                    }
                    orphans = live - node_instances
                    used = {p.spec.node_name for p in core_v1.list_namespaced_pod(namespace).items}
                    empty_nodes = [n.metadata.name for n in nodes if n.metadata.name not in used]
                    collected = len(instances) - len(live)
                    logs = "".join(path.read_text() for path in tmp_path.glob("replica-*.log"))
                    adopted = logs.count("Adopted instance ")
                    relaunches_found = logs.count("already running")
                    meanwhile = logs.count("bound meanwhile")
                    print(
                        f"\nkill -9 x{kills}: instances launched {len(instances)}, live {len(live)}, "
                        f"nodes {len(nodes)}, orphans left {len(orphans)}, "
                        f"orphans collected by GC {collected}, "
                        f"nodes without pods (duplicate capacity) {len(empty_nodes)}; "
                        f"instances adopted after a kill {adopted}, "
                        f"launches found by launch id {relaunches_found}, "
                        f"batches that dropped pods bound meanwhile {meanwhile}; killed after: {dict(phases)}"
                    )
                    assert not orphans, f"instances without a Node after GC: {orphans}"
                    assert collected + len(empty_nodes) == 0, (
                        f"{collected} instance(s) launched twice for the same pods (collected by GC) and "
                        f"{len(empty_nodes)} empty node(s)\n"
                        + history(core_v1, namespace, nodes, instances, empty_nodes, tmp_path)
                    )
                finally:
                    final.kill()
                    final.wait(10)
        finally:
            karpy.leading.set()


def round_bound(core: Any, namespace: str, names: list[str]) -> bool:
    return all(core.read_namespaced_pod(name, namespace).spec.node_name for name in names)


def provisioner_instances(karpy: Karpy, prov: str) -> list[dict[str, Any]]:
    reservations = karpy.ec2.describe_instances(
        Filters=[{"Name": f"tag:{wk.PROVISIONER_NAME}", "Values": [prov]}]
    )["Reservations"]
    return [i for r in reservations for i in r["Instances"]]


def newest_launch(karpy: Karpy, core: Any, prov: str) -> float:
    """When the provisioner's newest instance launched or its newest node was created (epoch s):
    what GC's grace counts from (extender/lifecycle/gc.py)."""
    stamps = [i["LaunchTime"] for i in provisioner_instances(karpy, prov)]
    stamps += [
        n.metadata.creation_timestamp
        for n in core.list_node(label_selector=f"{wk.PROVISIONER_NAME}={prov}").items
    ]
    return max(stamp.timestamp() for stamp in stamps)
