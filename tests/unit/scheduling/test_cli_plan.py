"""`karpy plan` end to end on files: JSON shape, exit 2 on bad quantity and unknown kind."""

import json

import pytest

from extender.cli.main import main
from tests.unit.scheduling.builders import DATA

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
    # No --prices: the built-in table prices the plan.
    args = ["plan", "--pods", str(path), "--instance-types", str(DATA / "instance-types.json"), *extra]
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


def test_malformed_quantity_is_reported_naming_pod_and_field_and_the_rest_planned(tmp_path, capsys):
    bad = (
        DEPLOYMENT + "---\nkind: Pod\nmetadata: {name: bad}\nspec:\n"
        "  containers: [{name: c, resources: {requests: {cpu: 1x}}}]\n"
    )
    code, out = run(tmp_path, capsys, bad, "-o", "json")
    result = json.loads(out.out)
    assert code == 0 and result["nodes"]
    (item,) = result["unschedulable"]
    assert item["pod"] == "default/bad" and item["invalid"] and not item["unmodelled"]
    assert "spec.containers[0].resources.requests.cpu" in item["reason"]
    code, out = run(tmp_path, capsys, bad)
    assert code == 0 and "Unable to schedule pod default/bad, " in out.out


def test_a_bad_workload_template_reports_each_replica(tmp_path, capsys):
    bad = DEPLOYMENT.replace('cpu: "1"', "cpu: 1x").replace("replicas: 5", "replicas: 2")
    code, out = run(tmp_path, capsys, bad, "-o", "json")
    result = json.loads(out.out)
    assert code == 0 and result["nodes"] == []
    assert [u["pod"] for u in result["unschedulable"]] == ["shop/web-0", "shop/web-1"]
    assert result["unschedulable"][0]["reason"].startswith("Deployment shop/web (template): ")


def test_unmodelled_pod_is_reported_and_the_rest_planned(tmp_path, capsys):
    pvc = (
        DEPLOYMENT + "---\nkind: Pod\nmetadata: {name: db}\nspec:\n"
        "  containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n"
        "  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]\n"
    )
    code, out = run(tmp_path, capsys, pvc, "-o", "json")
    result = json.loads(out.out)
    assert code == 0 and sorted(result["nodes"][0]["pods"]) == [f"shop/web-{i}" for i in range(5)]
    (item,) = result["unschedulable"]
    assert item["pod"] == "default/db" and item["unmodelled"] and "spec.volumes[0]" in item["reason"]


def test_provisioners_get_the_controllers_defaults(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KARPY_AWS_DEFAULT_INSTANCE_PROFILE", raising=False)
    # No Provisioner: `default` with no spec, defaulted like the controller's: on-demand, amd64.
    code, out = run(tmp_path, capsys, DEPLOYMENT, "-o", "json")
    (node,) = json.loads(out.out)["nodes"]
    assert code == 0 and node["capacityType"] == "on-demand"
    types = {
        t["InstanceType"]: t for t in json.loads((DATA / "instance-types.json").read_text())["InstanceTypes"]
    }
    assert types[node["instanceType"]]["ProcessorInfo"]["SupportedArchitectures"] == ["x86_64"]
    # The Karpenter 0.5 alias is rewritten, as the webhook and controller do.
    prov = tmp_path / "prov.yaml"
    prov.write_text(
        "kind: Provisioner\nmetadata: {name: spot}\n"
        "spec: {requirements: [{key: node.k8s.aws/capacity-type, operator: In, values: [spot]}]}\n"
    )
    code, out = run(tmp_path, capsys, DEPLOYMENT, "--provisioner", str(prov), "-o", "json")
    (node,) = json.loads(out.out)["nodes"]
    assert code == 0 and node["provisioner"] == "spot" and node["capacityType"] == "spot"


EXISTING = """
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata:
      name: ours
      labels:
        karpy.sh/managed: "true"
        topology.kubernetes.io/zone: us-west-2b
        kubernetes.io/hostname: ours
    status:
      allocatable: {cpu: "4", memory: 16Gi, pods: "58"}
      capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: cordoned
      labels: {karpenter.sh/provisioner-name: default, topology.kubernetes.io/zone: us-west-2c}
    spec: {unschedulable: true}
    status:
      allocatable: {cpu: "64", memory: 256Gi, pods: "58"}
      capacity: {cpu: "64", memory: 256Gi, pods: "58"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: theirs
      labels: {topology.kubernetes.io/zone: us-west-2a, kubernetes.io/hostname: theirs}
    status: {allocatable: {cpu: "64", memory: 256Gi, pods: "58"}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: db-0, namespace: data, labels: {app: db}}
    spec: {nodeName: theirs, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata: {name: old, namespace: data, labels: {app: db}}
    spec: {nodeName: ours, containers: [{name: c}]}
    status: {phase: Succeeded}
  - apiVersion: v1
    kind: Namespace
    metadata: {name: data, labels: {tier: storage}}
"""

AWAY_FROM_DB = """
kind: Pod
metadata: {name: away, namespace: shop}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector: {matchLabels: {app: db}}
          namespaceSelector: {matchLabels: {tier: storage}}
---
kind: Pod
metadata: {name: big, namespace: shop}
spec:
  containers: [{name: c, resources: {requests: {cpu: "8"}}}]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector: {matchLabels: {app: db}}
          namespaceSelector: {matchLabels: {tier: storage}}
"""


def test_existing_nodes_pods_and_namespaces_are_planned_around(tmp_path, capsys):
    existing = tmp_path / "existing.yaml"
    existing.write_text(EXISTING)
    code, out = run(tmp_path, capsys, AWAY_FROM_DB, "--existing", str(existing), "-o", "json")
    result = json.loads(out.out)
    assert code == 0, out.err
    # The small pod goes onto karpy's node with room; the big one onto new capacity, neither into
    # zone a (the db pod on the other node, selected through its namespace's labels), and nothing
    # onto the cordoned node.
    assert result["existing"] == {"ours": ["shop/away"]}
    (node,) = result["nodes"]
    assert node["pods"] == ["shop/big"] and node["zone"] != "us-west-2a"
    code, out = run(tmp_path, capsys, AWAY_FROM_DB, "--existing", str(existing))
    assert code == 0 and "Packed 1 pod(s) onto existing node ours" in out.out
    assert any(line.startswith("ours ") and "existing" in line for line in out.out.splitlines())


def test_without_namespaces_a_namespace_selector_is_unmodelled(tmp_path, capsys):
    existing = tmp_path / "existing.yaml"
    existing.write_text(EXISTING.split("  - apiVersion: v1\n    kind: Namespace")[0])
    code, out = run(tmp_path, capsys, AWAY_FROM_DB, "--existing", str(existing), "-o", "json")
    result = json.loads(out.out)
    assert code == 0 and {u["pod"] for u in result["unschedulable"] if u["unmodelled"]} == {
        "shop/away",
        "shop/big",
    }


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


def test_pods_left_to_kube_scheduler_are_planned_and_listed_apart(tmp_path, capsys):
    """Issue 24: a pod with a rule karpy leaves to kube-scheduler (here spec.resourceClaims) gets a
    node; `karpy plan` lists it as bound by kube-scheduler, in JSON and in the table."""
    dra = (
        DEPLOYMENT + "---\nkind: Pod\nmetadata: {name: dra}\nspec:\n"
        "  containers: [{name: c, resources: {requests: {cpu: '1'}}}]\n"
        "  resourceClaims: [{name: gpu, resourceClaimName: gpu}]\n"
    )
    code, out = run(tmp_path, capsys, dra, "-o", "json")
    result = json.loads(out.out)
    assert code == 0 and not result["unschedulable"]
    (item,) = result["boundByScheduler"]
    assert item["pod"] == "default/dra" and item["node"].startswith("planned-")
    assert item["notEvaluated"] == ["spec.resourceClaims: dynamic resource allocation is not evaluated"]
    code, out = run(tmp_path, capsys, dra)
    assert "Leaving pod default/dra to kube-scheduler to bind" in out.out
    assert "default/dra" not in out.out.split("Leaving pod")[0]


def test_plan_counts_pods_per_node_with_the_controllers_reserved_enis(tmp_path, capsys, monkeypatch):
    """KARPY_AWS_RESERVED_ENIS (Karpenter's RESERVED_ENIS) lowers m5.large from 29 pods to 20, in
    `karpy plan` as in the controller's catalog."""
    tiny = DEPLOYMENT.replace("replicas: 5", "replicas: 29").replace('cpu: "1"', 'cpu: "10m"')
    provisioner = tmp_path / "prov.yaml"
    provisioner.write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: default}\nspec:\n"
        "  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]\n"
    )

    def nodes() -> int:
        code, out = run(tmp_path, capsys, tiny, "-o", "json", "--provisioner", str(provisioner))
        assert code == 0
        return len(json.loads(out.out)["nodes"])

    # 29 pods fill one 29-pod m5.large; with 20 pods per node they need two.
    assert nodes() == 1
    monkeypatch.setenv("KARPY_AWS_RESERVED_ENIS", "1")
    assert nodes() == 2
