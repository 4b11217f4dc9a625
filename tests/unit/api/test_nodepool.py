"""karpenter.sh/v1 NodePool and karpenter.k8s.aws/v1 EC2NodeClass load into the one Provisioner
type (extender/api/nodepool.py, ec2nodeclass.py): the field mapping of Karpenter's v1 migration
guide, the CRD defaults, refusals naming what karpy does not implement, and the solver treating a
NodePool as it treats a Provisioner, with `karpenter.sh/nodepool` as the owner label."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from marshmallow import ValidationError

from extender.api import labels as wk
from extender.api import nodeclass as nc
from extender.api.disruption import Budget
from extender.api.ec2nodeclass import load_ec2nodeclass
from extender.api.node import Node
from extender.api.nodepool import duration_seconds, load_nodepool
from extender.api.provisioner_hash import provisioner_hash
from extender.cloud.aws.amifamily import ssm_path
from extender.cluster.pool_resources import without_clashes
from extender.scheduling.solver import solve
from tests import builders
from tests.builders import nodepool_manifest
from tests.unit.scheduling.builders import catalog, make_provisioner

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "karpenter-examples" / "v1"


def example(name: str, kind: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d and d["kind"] == kind]
    return docs[0]


def node_class(**spec: Any) -> dict[str, Any]:
    base = {
        "role": "KarpenterNodeRole-demo",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    }
    base.update(spec)
    base = {k: v for k, v in base.items() if v is not None}
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": base,
    }


def refusals(load: Any, obj: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as err:
        load(obj)
    return list(err.value.messages)


def test_general_purpose_example_maps_field_for_field() -> None:
    # aws/karpenter-provider-aws examples/v1/general-purpose.yaml
    loaded_class = load_ec2nodeclass(example("general-purpose.yaml", "EC2NodeClass"), cluster_name="demo")
    prov = load_nodepool(example("general-purpose.yaml", "NodePool"), {"default": loaded_class})
    assert prov.kind == "NodePool" and prov.name == "general-purpose"
    assert prov.owner_label == wk.NODEPOOL
    assert [(r.key, r.operator, r.values) for r in prov.requirements][-1] == (
        wk.INSTANCE_GENERATION,
        "Gt",
        ("2",),
    )
    # CRD defaults: expireAfter 720h, consolidateAfter 0s under WhenEmptyOrUnderutilized, budget 10%.
    assert prov.ttl_seconds_until_expired == 720 * 3600
    assert prov.consolidation and prov.consolidate_after == 0 and prov.ttl_seconds_after_empty is None
    assert prov.budgets == (Budget(nodes="10%"),)
    assert prov.provider.family == nc.AL2023 and prov.provider.ami_selector == {}
    assert prov.provider.subnet_selector == (
        nc.SelectorTerm(tags={"karpenter.sh/discovery": "${CLUSTER_NAME}"}),
    )
    assert prov.provider.role == "KarpenterNodeRole-${CLUSTER_NAME}"
    # No instance profile: karpy's default, else the role's name.
    assert prov.provider.launch_profile("") == "KarpenterNodeRole-${CLUSTER_NAME}"
    assert prov.provider.launch_profile("Default") == "Default"
    # v1 IMDS default: hop limit 1.
    assert prov.provider.metadata_options.http_put_response_hop_limit == 1


def test_getting_started_nodepool_limits_disruption_and_pinned_alias() -> None:
    # Karpenter getting-started step12-add-nodepool.sh: limits cpu 1000, WhenEmptyOrUnderutilized 1m,
    # alias al2023@${ALIAS_VERSION} (a pinned release such as v20240625).
    obj = nodepool_manifest(
        limits={"cpu": 1000},
        disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
    )
    klass = load_ec2nodeclass(
        node_class(amiSelectorTerms=[{"alias": "al2023@v20240625"}]), cluster_name="demo"
    )
    prov = load_nodepool(obj, {"default": klass})
    assert prov.limits.cpu == 1000 and "cpu" in prov.limited
    assert prov.consolidation and prov.consolidate_after == 60
    assert prov.provider.ami_version == "v20240625"
    assert ssm_path("/aws/service", nc.AL2023, "1.30", "amd64", "standard", "v20240625") == (
        "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/"
        "amazon-eks-node-al2023-x86_64-standard-1.30-v20240625/image_id"
    )
    assert ssm_path("/aws/service", nc.BOTTLEROCKET, "1.30", "arm64", "standard", "v1.20.1") == (
        "/aws/service/bottlerocket/aws-k8s-1.30/arm64/1.20.1/image_id"
    )


def test_when_empty_maps_to_the_empty_ttl_and_never_to_none() -> None:
    prov = load_nodepool(
        nodepool_manifest(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
    )
    assert prov.ttl_seconds_after_empty == 30 and not prov.consolidation
    never = load_nodepool(
        nodepool_manifest(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    )
    assert never.ttl_seconds_after_empty is None and not never.consolidation
    off = load_nodepool(nodepool_manifest(disruption={"consolidateAfter": "Never"}))
    assert not off.consolidation and off.consolidate_after is None
    spec = {
        **nodepool_manifest()["spec"]["template"]["spec"],
        "expireAfter": "Never",
        "terminationGracePeriod": "1h30m",
    }
    forever = load_nodepool(nodepool_manifest(template_spec=spec))
    assert forever.ttl_seconds_until_expired is None and forever.termination_grace_period == 5400


def test_budgets_with_schedule_and_reasons() -> None:
    budgets = [
        {"nodes": "0", "schedule": "@daily", "duration": "10m0s", "reasons": ["Drifted"]},
        {"nodes": "5"},
    ]
    prov = load_nodepool(nodepool_manifest(disruption={"consolidateAfter": "0s", "budgets": budgets}))
    assert prov.budgets == (
        Budget(nodes="0", schedule="@daily", duration=600, reasons=frozenset({"Drifted"})),
        Budget(nodes="5"),
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"requirements": [{"key": wk.INSTANCE_CPU, "operator": "Gte", "values": ["4"]}]},
            "spec.template.spec.requirements[0].operator: operator Gte is not supported by karpy",
        ),
        (
            {"requirements": [], "startupTaints": [{"key": "a", "effect": "NoBind"}]},
            'spec.template.spec.startupTaints[0].effect: "NoBind" not in',
        ),
        (
            {"requirements": [{"key": wk.NODEPOOL, "operator": "In", "values": ["x"]}]},
            'spec.template.spec.requirements[0].key: label "karpenter.sh/nodepool" is restricted',
        ),
        (
            {"requirements": [{"key": "karpenter.sh/foo", "operator": "Exists"}]},
            'spec.template.spec.requirements[0].key: label domain "karpenter.sh" is restricted',
        ),
    ],
)
def test_template_features_karpy_lacks_are_refused_by_name(spec: dict[str, Any], expected: str) -> None:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    messages = refusals(load_nodepool, nodepool_manifest(template_spec={"nodeClassRef": ref, **spec}))
    assert any(m.startswith(expected) for m in messages), messages


def test_pool_level_features_karpy_lacks_are_refused_by_name() -> None:
    assert refusals(
        load_nodepool, nodepool_manifest(disruption={"budgets": [{"nodes": "1", "schedule": "@daily"}]})
    ) == ["spec.disruption.budgets[0].schedule: 'schedule' must be set with 'duration'"]


def test_an_unknown_node_class_is_named() -> None:
    assert refusals(lambda o: load_nodepool(o, {}), nodepool_manifest()) == [
        'spec.template.spec.nodeClassRef.name: EC2NodeClass "default" not found'
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"cpuOptions": {"coreCount": 2}},
            "spec.cpuOptions: cpuOptions is not supported by karpy",
        ),
        (
            {"subnetSelectorTerms": [{"id": "subnet-1", "tags": {"a": "b"}}]},
            "spec.subnetSelectorTerms[0].id: 'id' is mutually exclusive",
        ),
        (
            {"securityGroupSelectorTerms": [{"tags": {"a": "b"}}, {"name": "sg", "tags": {"a": "b"}}]},
            "spec.securityGroupSelectorTerms[1].name: 'name' is mutually exclusive",
        ),
        (
            {"amiSelectorTerms": [{"alias": "windows2022@latest"}]},
            'spec.amiSelectorTerms[0].alias: "windows2022@latest"',
        ),
        (
            {"amiSelectorTerms": [{"id": "ami-1"}]},
            "spec.amiFamily: must specify amiFamily if amiSelectorTerms does not contain an alias",
        ),
        ({"instanceProfile": "p"}, "spec: must specify exactly one of ['role', 'instanceProfile']"),
        ({"role": None}, "spec: must specify exactly one of ['role', 'instanceProfile']"),
        (
            {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "0"}}]},
            "spec.blockDeviceMappings[0].ebs.volumeSize",
        ),
    ],
)
def test_node_class_refusals_name_the_field(spec: dict[str, Any], expected: str) -> None:
    messages = refusals(lambda o: load_ec2nodeclass(o, cluster_name="demo"), node_class(**spec))
    assert any(m.startswith(expected) for m in messages), messages


@pytest.mark.parametrize("value", [True, False, None])
def test_associate_public_ip_address_is_kept_for_the_launch_template(value: bool | None) -> None:
    """EC2NodeClass `associatePublicIPAddress` (*bool, AWS@v1.0.0 pkg/apis/v1/ec2nodeclass.go): set,
    it reaches the NodePool's node configuration; unset, it stays None (the subnet decides)."""
    klass = load_ec2nodeclass(node_class(associatePublicIPAddress=value), cluster_name="demo")
    assert (
        load_nodepool(nodepool_manifest(), {"default": klass}).provider.associate_public_ip_address is value
    )


def test_associate_public_ip_address_drifts_nodes_only_when_set() -> None:
    """Karpenter hashes it as a static EC2NodeClass field (AWS@v1.14.1 pkg/cloudprovider/drift.go,
    NodeClassDrift): set, the node-shaping hash changes; unset, the hash is the one main computed
    before the field existed, so no node drifts on upgrade."""
    unset, on = (
        load_nodepool(
            nodepool_manifest(),
            {"default": load_ec2nodeclass(node_class(associatePublicIPAddress=v), cluster_name="demo")},
        )
        for v in (None, True)
    )
    assert provisioner_hash(unset) == "77a565247d16a2d3"
    assert provisioner_hash(on) != provisioner_hash(unset)


def test_associate_public_ip_address_must_be_a_boolean() -> None:
    messages = refusals(
        lambda o: load_ec2nodeclass(o, cluster_name="demo"), node_class(associatePublicIPAddress="yes")
    )
    assert messages == ['spec.associatePublicIPAddress: "yes" is not a boolean']


def test_ami_terms_become_the_v1alpha5_selector() -> None:
    # examples/v1/al2-custom-ami.yaml: two id terms; a tag term with an owner.
    ids = load_ec2nodeclass(example("al2-custom-ami.yaml", "EC2NodeClass"), cluster_name="demo")
    assert ids.node_class.family == nc.AL2 and ids.node_class.ami_selector == {"aws::ids": "ami-123,ami-456"}
    tagged = load_ec2nodeclass(
        node_class(amiFamily="AL2023", amiSelectorTerms=[{"tags": {"team": "a"}, "owner": "self"}]),
        cluster_name="demo",
    )
    assert tagged.node_class.ami_selector == {"team": "a", "aws::owners": "self"}


def test_kubelet_moves_from_the_node_class_onto_the_pool() -> None:
    klass = load_ec2nodeclass(
        node_class(kubelet={"maxPods": 20, "systemReserved": {"cpu": "100m"}}), cluster_name="demo"
    )
    prov = load_nodepool(nodepool_manifest(), {"default": klass})
    assert prov.kubelet.max_pods == 20 and prov.kubelet.system_reserved == {"cpu": "100m"}
    bad = refusals(lambda o: load_ec2nodeclass(o, cluster_name="demo"), node_class(kubelet={"maxPods": 0}))
    assert bad == ["spec.kubelet.maxPods: must be between 1 and 2147483647"]


def test_durations() -> None:
    assert duration_seconds("1h30m") == 5400 and duration_seconds("720h") == 2592000
    assert duration_seconds("Never") is None
    with pytest.raises(ValueError):
        duration_seconds("1d")


def test_solver_plans_a_nodepool_and_labels_its_nodes_with_the_nodepool_key() -> None:
    np_prov = load_nodepool(nodepool_manifest(name="v1pool", weight=10))
    old = make_provisioner("old")
    selected = solve(
        [builders.pod("a", cpu="1", nodeSelector={wk.NODEPOOL: "v1pool"})], [old, np_prov], catalog()
    )
    (node,) = selected.nodes
    assert node.provisioner == "v1pool"
    assert node.labels[wk.NODEPOOL] == "v1pool" and wk.PROVISIONER_NAME not in node.labels
    # Selecting a Provisioner by the NodePool key (or the reverse) matches nothing.
    wrong = solve(
        [
            builders.pod("b", cpu="1", nodeSelector={wk.NODEPOOL: "old"}),
            builders.pod("c", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "v1pool"}),
        ],
        [old, np_prov],
        catalog(),
    )
    assert not wrong.nodes and len(wrong.unschedulable) == 2
    # The higher weight picks the NodePool for a pod that names neither.
    (free,) = solve([builders.pod("d", cpu="1")], [old, np_prov], catalog()).nodes
    assert free.provisioner == "v1pool"


def test_nodes_of_either_kind_name_their_owner() -> None:
    manifest = {
        "metadata": {"name": "n", "labels": {wk.NODEPOOL: "v1pool"}},
        "status": {"capacity": {"cpu": "2"}},
    }
    assert Node.from_manifest(manifest).provisioner == "v1pool"
    old = copy.deepcopy(manifest)
    old["metadata"]["labels"] = {wk.PROVISIONER_NAME: "old"}
    assert Node.from_manifest(old).provisioner == "old"


def test_a_nodepool_named_as_a_provisioner_is_left_out() -> None:
    same = load_nodepool(nodepool_manifest(name="default"))
    other = load_nodepool(nodepool_manifest(name="other"))
    kept = without_clashes([make_provisioner("default")], [same, other])
    assert [(p.name, p.kind) for p in kept] == [("default", "Provisioner"), ("other", "NodePool")]


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        # Karpenter's CRD (karpenter.sh_nodepools.yaml): minValues minimum 1, maximum 50, and its CEL
        # rule that an In requirement lists at least minValues values (v1 nodepool_validation_cel_test.go
        # "should error when minValues is zero/negative/more than 50/greater than the number of
        # unique values").
        ({"operator": "Exists", "minValues": 0}, "minValues: must be between 1 and 50"),
        ({"operator": "Exists", "minValues": -1}, "minValues: must be between 1 and 50"),
        ({"operator": "Exists", "minValues": 51}, "minValues: must be between 1 and 50"),
        (
            {"operator": "In", "values": ["c5", "m5"], "minValues": 3},
            "minValues: requirements with 'minValues' must have at least that many values",
        ),
    ],
)
def test_invalid_min_values_are_refused_with_the_field(requirement: dict[str, Any], expected: str) -> None:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    spec = {"nodeClassRef": ref, "requirements": [{"key": wk.INSTANCE_FAMILY, **requirement}]}
    messages = refusals(load_nodepool, nodepool_manifest(template_spec=spec))
    assert len(messages) == 1 and messages[0].startswith("spec.template.spec.requirements[0]." + expected), (
        messages
    )


def test_min_values_are_kept() -> None:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    requirements = [
        {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["c5", "m5"], "minValues": 2},
        {"key": wk.INSTANCE_CPU, "operator": "Gt", "values": ["3"], "minValues": 50},
        {"key": wk.ARCH, "operator": "Exists"},
    ]
    loaded = load_nodepool(
        nodepool_manifest(template_spec={"nodeClassRef": ref, "requirements": requirements})
    )
    assert [r.min_values for r in loaded.requirements] == [2, 50, None]


def test_min_values_drift_no_node() -> None:
    """Karpenter pkg/apis/v1/nodeclaim.go: NodeClaimTemplate `Requirements ... hash:"ignore"`, so a
    minValues change leaves the nodepool-hash (and every node) as it was."""
    from extender.api.provisioner_hash import provisioner_hash

    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    family = {"key": wk.INSTANCE_FAMILY, "operator": "Exists"}
    hashes = {
        provisioner_hash(
            load_nodepool(nodepool_manifest(template_spec={"nodeClassRef": ref, "requirements": [req]}))
        )
        for req in (family, {**family, "minValues": 2}, {**family, "minValues": 5})
    }
    assert len(hashes) == 1
