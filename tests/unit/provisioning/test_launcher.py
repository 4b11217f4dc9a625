"""Launch groups: deterministic launch ids (crash-safe re-launch) and adoption of Node-less instances."""

from __future__ import annotations

from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.cloud.types import Instance
from extender.provisioning import launcher
from extender.scheduling.solver import solve
from tests.unit.scheduling.builders import catalog, make_provisioner


def team_provisioner(name: str) -> Any:
    return make_provisioner(
        name,
        requirements=[
            {"key": "team", "operator": "In", "values": ["a"]},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        ],
        labels={"tier": "web", "team": "a"},
    )


PROV = team_provisioner("team-a")


def pod(uid: str, cpu: str = "1", node: str = "") -> Pod:
    return Pod.from_manifest(
        {
            "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
    )


def launch_ids(pods: list[Pod], attempt: int = 0, prov: Any = PROV) -> list[str]:
    plan = solve(pods, [prov], list(catalog()))
    return [g.request.launch_id for g in launcher.group(plan.nodes, {prov.name: prov}, attempt)]


def test_replanning_the_same_pods_gives_the_same_launch_id_whatever_their_order() -> None:
    pods = [pod("u1"), pod("u2"), pod("u3")]
    first = launch_ids(pods)
    assert len(first) == 1 and len(first[0]) <= 64  # an EC2 ClientToken
    assert launch_ids(list(reversed(pods))) == first


def test_other_pods_attempts_or_provisioners_give_other_launch_ids() -> None:
    pods = [pod("u1"), pod("u2")]
    base = launch_ids(pods)
    assert launch_ids([pod("u1"), pod("u9")]) != base
    assert launch_ids(pods, attempt=1) != base
    assert launch_ids(pods, prov=team_provisioner("team-b")) != base
    # Replacement capacity for the same pods once bound (expiry, interruption) is a new launch.
    assert launch_ids([pod("u1", node="n1"), pod("u2", node="n1")]) != base


def instance(iid: str, tags: dict[str, str] | None = None, itype: str = "c5.xlarge") -> Instance:
    return Instance(
        id=iid,
        instance_type=itype,
        zone="us-west-2b",
        capacity_type="on-demand",
        private_dns_name=f"IP-10-0-0-{iid[-1]}.EC2.INTERNAL",
        provider_id="",
        state="running",
        tags=tags or {},
    )


def test_instances_without_nodes_are_tagged_launches_no_node_points_at() -> None:
    tagged = {wk.LAUNCH_ID_TAG: "l-1"}
    nodes = [{"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///us-west-2b/i-1"}}]
    found = launcher.without_nodes(nodes, [instance("i-1", tagged), instance("i-2", tagged), instance("i-3")])
    assert [i.id for i in found] == ["i-2"]


def test_adopted_node_carries_the_provisioners_labels_type_and_not_ready_taint() -> None:
    itype = next(t for t in catalog() if t.name == "c5.xlarge")
    node = launcher.adopted_node(instance("i-7"), itype, PROV)
    meta, spec = node["metadata"], node["spec"]
    assert meta["name"] == "ip-10-0-0-7.ec2.internal"
    assert spec["providerID"] == "aws:///us-west-2b/i-7"
    assert meta["labels"]["team"] == "a" and meta["labels"]["tier"] == "web"
    assert meta["labels"][wk.PROVISIONER_NAME] == "team-a"
    assert meta["labels"][wk.ZONE] == "us-west-2b" and meta["labels"][wk.INSTANCE_TYPE] == "c5.xlarge"
    assert [t["key"] for t in spec["taints"]] == [wk.NOT_READY_TAINT_KEY]
    assert node["status"]["allocatable"]["cpu"]
