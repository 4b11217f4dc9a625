"""`karpy plan` end to end on files: JSON shape, exit 2 on bad quantity and unknown kind."""

import json

import pytest

from extender.cli.main import main
from tests.unit.scheduling.builders import DATA, PRICES

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 5
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""


def run(tmp_path, capsys, pods_yaml, *extra):
    path = tmp_path / "pods.yaml"
    path.write_text(pods_yaml)
    args = ["plan", "--pods", str(path), "--instance-types", str(DATA / "instance-types.json"), *extra]
    if PRICES.exists():
        args += ["--prices", str(PRICES)]
    code = main(args)
    return code, capsys.readouterr()


def test_json_output_has_the_contract_shape(tmp_path, capsys):
    code, out = run(tmp_path, capsys, DEPLOYMENT, "-o", "json")
    assert code == 0
    result = json.loads(out.out)
    assert {"nodes", "unschedulable", "totalPricePerHour", "lowerBoundPricePerHour", "elapsedSeconds"} <= set(
        result
    )
    node = result["nodes"][0]
    assert {"provisioner", "instanceType", "options", "zone", "capacityType", "pricePerHour", "pods"} <= set(
        node
    )
    assert sorted(node["pods"]) == [f"shop/web-{i}" for i in range(5)]
    assert node["instanceType"] == node["options"][0]


def test_table_output_prints_karpenter_log_lines(tmp_path, capsys):
    code, out = run(tmp_path, capsys, DEPLOYMENT)
    assert code == 0 and "Computed packing for 5 pod(s) with instance type option(s) [" in out.out


def test_malformed_quantity_exits_2_naming_pod_and_field(tmp_path, capsys):
    bad = (
        "kind: Pod\nmetadata: {name: bad}\nspec:\n"
        "  containers: [{name: c, resources: {requests: {cpu: 1x}}}]\n"
    )
    code, out = run(tmp_path, capsys, bad)
    assert code == 2
    assert "default/bad" in out.err and "spec.containers[0].resources.requests.cpu" in out.err


def test_unknown_kind_exits_2(tmp_path, capsys):
    code, out = run(tmp_path, capsys, "kind: Service\nmetadata: {name: s}\n")
    assert code == 2 and "unknown kind 'Service'" in out.err


def test_invalid_provisioner_exits_2(tmp_path, capsys):
    prov = tmp_path / "prov.yaml"
    prov.write_text("kind: Provisioner\nmetadata: {name: p}\nspec: {taints: [{key: a, effect: Sometimes}]}\n")
    code, out = run(tmp_path, capsys, DEPLOYMENT, "--provisioner", str(prov))
    assert code == 2 and "Provisioner p" in out.err


def test_pod_that_fits_nothing_is_reported_and_rest_planned(tmp_path, capsys):
    huge = (
        DEPLOYMENT
        + "---\nkind: Pod\nmetadata: {name: huge}\nspec:\n"
        + "  containers: [{name: c, resources: {requests: {cpu: '999'}}}]\n"
    )
    code, out = run(tmp_path, capsys, huge, "-o", "json")
    result = json.loads(out.out)
    assert code == 0 and result["unschedulable"][0]["pod"] == "default/huge" and result["nodes"]


@pytest.mark.parametrize("sort_key", ["cpu", "memory", "euclidean"])
def test_sort_keys_accepted(tmp_path, capsys, sort_key):
    assert run(tmp_path, capsys, DEPLOYMENT, "--sort-key", sort_key, "-o", "json")[0] == 0
