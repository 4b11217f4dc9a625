"""Launch groups: deterministic launch ids (crash-safe re-launch) and adoption of Node-less instances."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.pod import Pod
from extender.api.provisioner_hash import HASH_VERSION, provisioner_hash
from extender.api.resources import EFA
from extender.cloud.types import Instance
from extender.provisioning import launcher
from extender.scheduling.solver import solve
from tests import builders
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


#: A pending pod asking 1 CPU in namespace ns; keywords as tests.builders.pod.
ns_pod = partial(builders.pod, namespace="ns", cpu="1", node_name="")


def launch_ids(pods: list[Pod], attempt: int = 0, prov: Any = PROV) -> list[str]:
    plan = solve(pods, [prov], list(catalog()))
    return [g.request.launch_id for g in launcher.group(plan.nodes, {prov.name: prov}, attempt)]


def test_replanning_the_same_pods_gives_the_same_launch_id_whatever_their_order() -> None:
    pods = [ns_pod("p-u1", uid="u1"), ns_pod("p-u2", uid="u2"), ns_pod("p-u3", uid="u3")]
    first = launch_ids(pods)
    assert len(first) == 1 and len(first[0]) <= 64  # an EC2 ClientToken
    assert launch_ids(list(reversed(pods))) == first


def test_other_pods_attempts_or_provisioners_give_other_launch_ids() -> None:
    pods = [ns_pod("p-u1", uid="u1"), ns_pod("p-u2", uid="u2")]
    base = launch_ids(pods)
    assert launch_ids([ns_pod("p-u1", uid="u1"), ns_pod("p-u9", uid="u9")]) != base
    assert launch_ids(pods, attempt=1) != base
    assert launch_ids(pods, prov=team_provisioner("team-b")) != base
    # Replacement capacity for the same pods once bound (expiry, interruption) is a new launch.
    assert (
        launch_ids([ns_pod("p-u1", uid="u1", node_name="n1"), ns_pod("p-u2", uid="u2", node_name="n1")])
        != base
    )


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
    nodes = [
        Node.from_manifest({"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///us-west-2b/i-1"}})
    ]
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


def test_nodes_carry_the_deprecated_label_aliases_kubelet_sets() -> None:
    pods = [ns_pod("p-u1", uid="u1"), ns_pod("p-u2", uid="u2")]
    plan = solve(pods, [PROV], list(catalog()))
    planned = plan.nodes[0]
    launched = instance("i-8", itype=planned.instance_type.name)
    labels = launcher.node_for(launched, planned, PROV, region="us-west-2")["metadata"]["labels"]
    assert (
        labels["beta.kubernetes.io/instance-type"] == labels[wk.INSTANCE_TYPE] == planned.instance_type.name
    )
    assert labels["beta.kubernetes.io/arch"] == labels[wk.ARCH] == planned.instance_type.arch
    assert labels["beta.kubernetes.io/os"] == labels[wk.OS] == "linux"
    assert labels["failure-domain.beta.kubernetes.io/zone"] == labels[wk.ZONE] == "us-west-2b"
    assert labels["failure-domain.beta.kubernetes.io/region"] == labels[wk.REGION] == "us-west-2"
    assert wk.CAPACITY_TYPE_ALIAS not in labels
    # Without a known region neither region label is written.
    itype = next(t for t in catalog() if t.name == "c5.xlarge")
    adopted = launcher.adopted_node(instance("i-9"), itype, PROV)["metadata"]["labels"]
    assert adopted["failure-domain.beta.kubernetes.io/zone"] == "us-west-2b"
    assert wk.REGION not in adopted and "failure-domain.beta.kubernetes.io/region" not in adopted


def test_a_pod_refused_before_binding_gets_a_new_launch_id_the_others_keep_theirs() -> None:
    """An instance found by its launch id may have become a node other pods filled since: the
    refused pod's next node must be a new launch; a crash-restart re-plan must not."""
    pods = [ns_pod("p-u1", uid="u1"), ns_pod("p-u2", uid="u2")]
    plan = solve(pods, [PROV], list(catalog()))

    def ids(retries: dict[str, int] | None) -> list[str]:
        return [g.request.launch_id for g in launcher.group(plan.nodes, {PROV.name: PROV}, 0, retries)]

    assert ids(None) == ids({}) == ids({"ns/unrelated": 3})
    assert ids({"ns/p-u1": 1}) != ids(None)
    assert ids({"ns/p-u1": 2}) != ids({"ns/p-u1": 1})


def test_nodes_carry_the_type_labels_the_ami_and_the_provisioner_hash() -> None:
    plan = solve([ns_pod("p-u1", uid="u1")], [PROV], list(catalog()))
    planned = plan.nodes[0]
    launched = replace(instance("i-5", itype=planned.instance_type.name), image_id="ami-0abc")
    node = launcher.node_for(launched, planned, PROV)
    labels, annotations = node["metadata"]["labels"], node["metadata"]["annotations"]
    assert labels[wk.INSTANCE_FAMILY] == planned.instance_type.name.split(".")[0]
    assert labels[wk.INSTANCE_CPU] == str(int(planned.instance_type.cpu))
    assert annotations[AMI_ID_ANNOTATION] == "ami-0abc" and AMI_ID_ANNOTATION not in labels
    assert annotations[wk.PROVISIONER_HASH_ANNOTATION] == provisioner_hash(PROV)
    assert annotations[wk.PROVISIONER_HASH_VERSION_ANNOTATION] == HASH_VERSION
    # An instance whose AMI the cloud did not report gets no AMI record (no AMI drift for it).
    assert (
        AMI_ID_ANNOTATION not in launcher.node_for(instance("i-6"), planned, PROV)["metadata"]["annotations"]
    )


def test_nodes_record_their_ami_and_the_allocatable_of_their_kubelet_settings() -> None:
    from dataclasses import replace

    from extender.api.kubelet import KubeletConfiguration
    from extender.api.nodeclass import AMI_ID_ANNOTATION

    prov = replace(PROV, kubelet=KubeletConfiguration(max_pods=12, kube_reserved={"cpu": "500m"}))
    plan = solve([ns_pod("p-u1", uid="u1"), ns_pod("p-u2", uid="u2")], [prov], list(catalog()))
    planned = plan.nodes[0]
    launched = replace(instance("i-5", itype=planned.instance_type.name), image_id="ami-0abc")
    node = launcher.node_for(launched, planned, prov)
    # Drift reads the annotation, through the node index's typed Node.
    assert node["metadata"]["annotations"][AMI_ID_ANNOTATION] == "ami-0abc"
    assert Node.from_manifest(node).annotations[AMI_ID_ANNOTATION] == "ami-0abc"
    assert node["status"]["allocatable"]["pods"] == "12"
    itype = next(t for t in catalog() if t.name == planned.instance_type.name)
    adopted = launcher.adopted_node(launched, itype, prov)
    assert adopted["status"]["allocatable"] == node["status"]["allocatable"]
    assert AMI_ID_ANNOTATION not in launcher.adopted_node(instance("i-6"), itype, prov)["metadata"].get(
        "annotations", {}
    )


# --- EFA: a node advertises the EFA interfaces it was launched with, never the type's most ---------

EFA_TYPES = make_provisioner(
    "efa",
    requirements=[
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["p4d.24xlarge"]},
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    ],
)


def efa_pod(uid: str, efa: int) -> Pod:
    # Every EFA type of the fixture catalog is a GPU type, which only GPU pods may use.
    extended = {"nvidia.com/gpu": "1", **({EFA: str(efa)} if efa else {})}
    return builders.pod(
        f"p-{uid}", namespace="ns", uid=uid, image=None, requests={"cpu": "1", **extended}, limits=extended
    )


def test_pods_requesting_efa_launch_with_the_types_interfaces_and_the_node_advertises_them() -> None:
    """Karpenter AWS v1.14.1: the launch template's EFACount is the type's EFA capacity when the
    NodeClaim requests vpc.amazonaws.com/efa, else 0 (`amifamily/resolver.go`), and the NodeClaim
    advertises EFA only when EFACount > 0 (`cloudprovider.go` resourceFilter)."""
    (with_efa,) = solve([efa_pod("e1", 2)], [EFA_TYPES], list(catalog())).nodes
    (without,) = solve([efa_pod("e2", 0)], [EFA_TYPES], list(catalog())).nodes
    assert with_efa.instance_type.name == without.instance_type.name == "p4d.24xlarge"
    ((efa_group,), (plain_group,)) = (
        launcher.group([n], {EFA_TYPES.name: EFA_TYPES}) for n in (with_efa, without)
    )
    assert (efa_group.request.efa, plain_group.request.efa) == (True, False)

    launched = instance("i-1", itype="p4d.24xlarge")
    efa_node = launcher.node_for(launched, with_efa, EFA_TYPES)["status"]
    assert efa_node["capacity"][EFA] == efa_node["allocatable"][EFA] == "4"
    # The same type launched for pods that asked for none has no EFA interface: the device plugin
    # would report 0, so the Node must not promise any to the next EFA pod.
    plain_node = launcher.node_for(launched, without, EFA_TYPES)["status"]
    assert EFA not in plain_node["capacity"] and EFA not in plain_node["allocatable"]


def test_an_adopted_node_advertises_the_efa_interfaces_ec2_reports() -> None:
    itype = next(t for t in catalog() if t.name == "p4d.24xlarge")
    four = replace(instance("i-2", itype="p4d.24xlarge"), efa_interfaces=4)
    assert launcher.adopted_node(four, itype, EFA_TYPES)["status"]["capacity"][EFA] == "4"
    none = launcher.adopted_node(instance("i-3", itype="p4d.24xlarge"), itype, EFA_TYPES)
    assert EFA not in none["status"]["capacity"]
