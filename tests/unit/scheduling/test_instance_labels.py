"""karpenter.k8s.aws/* instance-type labels: derivation from DescribeInstanceTypes, requirements on
them in Provisioners and pods (In/NotIn/Exists/DoesNotExist/Gt/Lt), validation, and `karpy plan`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from marshmallow import ValidationError

from extender.api import labels as wk
from extender.api.provisioner_schema import validate_provisioner
from extender.cli.main import main
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.builders import DATA, catalog, make_provisioner, moto_catalog


def labels_of(name: str) -> dict[str, str]:
    return dict(next(t for t in catalog() if t.name == name).type_labels)


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def options(plan: Any) -> set[str]:
    return {t.name for node in plan.nodes for t in node.options}


def test_labels_follow_karpenters_derivation() -> None:
    m5 = labels_of("m5.large")
    assert m5[wk.INSTANCE_CATEGORY] == "m" and m5[wk.INSTANCE_GENERATION] == "5"
    assert m5[wk.INSTANCE_FAMILY] == "m5" and m5[wk.INSTANCE_SIZE] == "large"
    assert m5[wk.INSTANCE_CPU] == "2" and m5[wk.INSTANCE_MEMORY] == "8192"
    assert m5[wk.INSTANCE_CPU_MANUFACTURER] == "intel" and m5[wk.INSTANCE_HYPERVISOR] == "nitro"
    assert m5[wk.INSTANCE_ENCRYPTION_IN_TRANSIT] == "false"
    # Baseline Mbit/s, Karpenter's generated table's figure: m5.large 750, p4d (4 cards) 400000.
    assert m5[wk.INSTANCE_NETWORK_BANDWIDTH] == "750"
    assert labels_of("p4d.24xlarge")[wk.INSTANCE_NETWORK_BANDWIDTH] == "400000"
    assert m5[wk.INSTANCE_EBS_BANDWIDTH] == "4750"
    # No GPU, no instance store, no accelerator: no label (DoesNotExist holds).
    absent = {
        wk.INSTANCE_GPU_NAME,
        wk.INSTANCE_GPU_COUNT,
        wk.INSTANCE_LOCAL_NVME,
        wk.INSTANCE_ACCELERATOR_NAME,
    }
    assert not absent & set(m5)
    g4 = labels_of("g4dn.xlarge")
    assert (g4[wk.INSTANCE_GPU_NAME], g4[wk.INSTANCE_GPU_MANUFACTURER]) == ("t4", "nvidia")
    assert (g4[wk.INSTANCE_GPU_COUNT], g4[wk.INSTANCE_GPU_MEMORY]) == ("1", "16384")
    assert g4[wk.INSTANCE_LOCAL_NVME] == "125" and g4[wk.INSTANCE_ENCRYPTION_IN_TRANSIT] == "true"
    assert labels_of("p4d.24xlarge")[wk.INSTANCE_GPU_COUNT] == "8"
    inf = labels_of("inf1.xlarge")
    assert (inf[wk.INSTANCE_ACCELERATOR_NAME], inf[wk.INSTANCE_ACCELERATOR_MANUFACTURER]) == (
        "inferentia",
        "aws",
    )
    assert labels_of("c6g.medium")[wk.INSTANCE_CPU_MANUFACTURER] == "aws"
    assert labels_of("c5a.large")[wk.INSTANCE_CPU_MANUFACTURER] == "amd"


def test_category_and_generation_gt_select_only_newer_r_types_on_motos_catalog() -> None:
    prov = make_provisioner(
        requirements=[req(wk.INSTANCE_CATEGORY, "In", "r"), req(wk.INSTANCE_GENERATION, "Gt", "5")]
    )
    plan = solve([builders.pod(f"p{i}", cpu="1", memory="8Gi") for i in range(6)], [prov], moto_catalog())
    assert plan.nodes and not plan.unschedulable
    chosen = options(plan)
    assert chosen and all(name.startswith(("r6", "r7", "r8")) for name in chosen), chosen
    for node in plan.nodes:
        labels = node.node_labels()
        assert labels[wk.INSTANCE_CATEGORY] == "r" and int(labels[wk.INSTANCE_GENERATION]) > 5
    # The fixture catalog has r5 only: nothing the Provisioner allows.
    assert not solve([builders.pod("p", cpu="1")], [prov], catalog()).nodes


def test_pod_selectors_on_type_labels() -> None:
    prov = make_provisioner()
    # nodeSelector on a numeric label, with a GPU pod: single-GPU types only.
    gpu = builders.pod("g", cpu="1", gpu=1, nodeSelector={wk.INSTANCE_GPU_COUNT: "1"})
    assert options(solve([gpu], [prov], catalog())) <= {"g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge"}
    # Lt / NotIn in node affinity.
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            req(wk.INSTANCE_CPU, "Lt", "5"),
                            req(wk.INSTANCE_CPU_MANUFACTURER, "NotIn", "intel"),
                        ]
                    }
                ]
            }
        }
    }
    chosen = options(solve([builders.pod("a", cpu="500m", affinity=affinity)], [prov], catalog()))
    assert chosen and all(int(labels_of(n)[wk.INSTANCE_CPU]) < 5 for n in chosen)
    assert all(labels_of(n)[wk.INSTANCE_CPU_MANUFACTURER] != "intel" for n in chosen)


def test_a_label_a_type_lacks_is_doesnotexist_for_it() -> None:
    prov = make_provisioner()
    # Exists on a GPU label for a CPU pod: only GPU types carry it, and they serve GPU pods only.
    exists = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [req(wk.INSTANCE_GPU_NAME, "Exists")]}]
            }
        }
    }
    plan = solve([builders.pod("a", cpu="1", affinity=exists)], [prov], catalog())
    assert not plan.nodes and plan.unschedulable
    # A value no type has: nothing.
    assert not solve(
        [builders.pod("b", cpu="1", nodeSelector={wk.INSTANCE_HYPERVISOR: "xen"})], [prov], catalog()
    ).nodes
    # DoesNotExist on NVMe in the Provisioner: every option lacks instance storage.
    no_nvme = make_provisioner(requirements=[req(wk.INSTANCE_LOCAL_NVME, "DoesNotExist")])
    chosen = options(solve([builders.pod("c", cpu="3")], [no_nvme], moto_catalog()))
    assert chosen and all(wk.INSTANCE_LOCAL_NVME not in labels_of_moto(n) for n in chosen)
    # Gt on NVMe: every option has more than 100 GB of it.
    nvme = make_provisioner(requirements=[req(wk.INSTANCE_LOCAL_NVME, "Gt", "100")])
    chosen = options(solve([builders.pod("d", cpu="3")], [nvme], moto_catalog()))
    assert chosen and all(int(labels_of_moto(n)[wk.INSTANCE_LOCAL_NVME]) > 100 for n in chosen)


def labels_of_moto(name: str) -> dict[str, str]:
    return dict(next(t for t in moto_catalog() if t.name == name).type_labels)


def provisioner_errors(spec: dict[str, Any]) -> list[str]:
    return validate_provisioner({"metadata": {"name": "p"}, "spec": spec})


def test_validation_accepts_the_keys_with_every_operator_and_checks_values() -> None:
    ok = [
        req(wk.INSTANCE_CATEGORY, "In", "c", "m", "r"),
        req(wk.INSTANCE_FAMILY, "NotIn", "t3"),
        req(wk.INSTANCE_GENERATION, "Gt", "5"),
        req(wk.INSTANCE_CPU, "Lt", "33"),
        req(wk.INSTANCE_GPU_NAME, "DoesNotExist"),
        req(wk.INSTANCE_LOCAL_NVME, "Exists"),
    ]
    assert provisioner_errors({"requirements": ok}) == []
    assert provisioner_errors({"requirements": [req(wk.INSTANCE_GENERATION, "Gt", "-1")]}) == [
        "spec.requirements[0].values: operator Gt takes exactly one non-negative integer value"
        " up to 9223372036854775807"
    ]
    assert provisioner_errors({"requirements": [req(wk.INSTANCE_CPU, "Lt", "4", "8")]})
    # An unknown key of the AWS domain is refused, as a label in that domain is.
    (unknown,) = provisioner_errors({"requirements": [req("karpenter.k8s.aws/instance-pets", "In", "x")]})
    assert unknown.startswith('spec.requirements[0].key: "karpenter.k8s.aws/instance-pets" not in [')
    (label,) = provisioner_errors({"labels": {"karpenter.k8s.aws/instance-pets": "x"}})
    assert "label domain not allowed" in label
    assert provisioner_errors({"labels": {wk.INSTANCE_FAMILY: "m5"}}) == []
    with pytest.raises(ValidationError):
        make_provisioner(requirements=[req(wk.INSTANCE_CPU, "Gt", "x")])


def test_karpy_plan_shows_the_labels_in_json_and_table(tmp_path: Any, capsys: Any) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "kind: Pod\nmetadata: {name: a}\nspec:\n"
        f"  nodeSelector: {{{wk.INSTANCE_CATEGORY}: c}}\n"
        "  containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n"
    )
    args = ["plan", "--pods", str(pods), "--instance-types", str(DATA / "instance-types.json")]
    assert main([*args, "-o", "json"]) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert node["labels"][wk.INSTANCE_CATEGORY] == "c"
    assert node["labels"][wk.INSTANCE_TYPE] == node["instanceType"]
    assert node["labels"][wk.INSTANCE_CPU] == labels_of(node["instanceType"])[wk.INSTANCE_CPU]
    assert main(args) == 0
    table = capsys.readouterr().out
    line = next(x for x in table.splitlines() if x.startswith(f"planned-0 {node['instanceType']}:"))
    assert "instance-category=c" in line and f"instance-family={node['instanceType'].split('.')[0]}" in line


def test_topology_spread_on_a_type_label_puts_pods_on_different_categories() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": wk.INSTANCE_CATEGORY,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "s"}},
        }
    ]
    pods = [
        builders.pod(f"s{i}", cpu="1", labels={"app": "s"}, topologySpreadConstraints=spread)
        for i in range(3)
    ]
    # Domains come from the types' labels, with or without a Provisioner requirement on the key.
    for prov in (
        make_provisioner(),
        make_provisioner(requirements=[req(wk.INSTANCE_CATEGORY, "In", "c", "m")]),
    ):
        plan = solve(pods, [prov], catalog())
        categories = [n.node_labels()[wk.INSTANCE_CATEGORY] for n in plan.nodes]
        assert not plan.unschedulable and len(set(categories)) >= 2
        assert max(map(categories.count, categories)) - min(map(categories.count, categories)) <= 1
