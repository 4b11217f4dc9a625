"""`karpy plan` resolves claims from its input files as the controller does (issue 24).

PersistentVolumeClaims, PersistentVolumes and StorageClasses in `--pods` or `--existing` go through
`extender.cluster.volumes.parse_pod`, the controller's own parse: pods whose claims kube-scheduler
binds (WaitForFirstConsumer) are planned and listed under `boundByScheduler` / "BOUND BY
KUBE-SCHEDULER", apart from the pods karpy binds. Before, every pod with a claim was reported
unmodelled and got no node.
"""

from __future__ import annotations

import json
from typing import Any

from extender.cli.main import main
from tests.unit.scheduling.builders import DATA
from tests.unit.scheduling.test_cli_plan import DEPLOYMENT  # shop/web, 5 replicas

GP3 = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: topology.ebs.csi.aws.com/zone, values: [us-west-2b]}]
"""

STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  replicas: 3
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  volumeClaimTemplates:
    - metadata: {name: pgdata}
      spec:
        storageClassName: gp3
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 10Gi}}
"""


def _plan(tmp_path, capsys, pods_yaml: str, *extra: str) -> tuple[int, str]:
    path = tmp_path / "pods.yaml"
    path.write_text(pods_yaml)
    code = main(["plan", "--pods", str(path), "--instance-types", str(DATA / "instance-types.json"), *extra])
    return code, capsys.readouterr().out


def _json(tmp_path, capsys, pods_yaml: str, *extra: str) -> dict[str, Any]:
    code, out = _plan(tmp_path, capsys, pods_yaml, *extra, "-o", "json")
    assert code == 0
    return json.loads(out)


def test_statefulset_on_wait_for_first_consumer_claims_is_bound_by_kube_scheduler(tmp_path, capsys):
    """A StatefulSet's volumeClaimTemplates on a WaitForFirstConsumer gp3 class: each replica's claim
    <template>-<set>-<i> is implied (the StatefulSet controller creates it), the replicas get nodes in
    the class's zone and are listed as bound by kube-scheduler; the Deployment's pods are not."""
    docs = "---".join([GP3, STATEFULSET, DEPLOYMENT])
    result = _json(tmp_path, capsys, docs)
    assert not result["unschedulable"]
    bound = {item["pod"]: item for item in result["boundByScheduler"]}
    assert sorted(bound) == ["data/db-0", "data/db-1", "data/db-2"]
    for i in range(3):
        (why,) = bound[f"data/db-{i}"]["notEvaluated"]
        assert f"claim pgdata-db-{i}" in why and "WaitForFirstConsumer" in why
    nodes = {f"planned-{i}": n for i, n in enumerate(result["nodes"])}
    assert {nodes[item["node"]]["zone"] for item in bound.values()} == {"us-west-2b"}
    placed = {p for n in result["nodes"] for p in n["pods"]}
    assert {*(f"shop/web-{i}" for i in range(5)), *bound} <= placed

    code, text = _plan(tmp_path, capsys, docs)
    assert code == 0
    section = text.split("BOUND BY KUBE-SCHEDULER")[1].split("\n\n")[0]
    listed = [line.split()[0] for line in section.splitlines()[2:]]
    assert listed == ["data/db-0", "data/db-1", "data/db-2"]
    assert "shop/web" not in section


def test_a_bound_claim_pins_the_zone_and_karpy_binds(tmp_path, capsys):
    """A claim bound to a PersistentVolume in us-west-2c: its pod gets a node there and nothing is
    left to kube-scheduler (the claim needs no binding)."""
    docs = """
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2c]}]
---
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec: {volumeName: pv-1, storageClassName: "", accessModes: [ReadWriteOnce]}
status: {phase: Bound}
---
kind: Pod
metadata: {name: app, namespace: shop}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
"""
    result = _json(tmp_path, capsys, docs)
    assert result["boundByScheduler"] == [] and not result["unschedulable"]
    (node,) = result["nodes"]
    assert node["pods"] == ["shop/app"] and node["zone"] == "us-west-2c"


EXISTING = """
kind: List
items:
  - kind: Node
    metadata:
      name: ours
      labels:
        karpy.sh/managed: "true"
        topology.kubernetes.io/zone: us-west-2b
        kubernetes.io/hostname: ours
    status:
      allocatable: {cpu: "16", memory: 64Gi, pods: "58"}
      capacity: {cpu: "16", memory: 64Gi, pods: "58"}
  - kind: CSINode
    metadata: {name: ours}
    spec:
      drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 3}}]
  - kind: Pod
    metadata: {name: holder, namespace: data}
    spec:
      nodeName: ours
      containers: [{name: c}]
      volumes: [{name: v, persistentVolumeClaim: {claimName: held}}]
    status: {phase: Running}
  - kind: PersistentVolumeClaim
    metadata: {name: held, namespace: data}
    spec: {storageClassName: gp3}
"""


def test_claims_and_csinodes_from_the_existing_file(tmp_path, capsys):
    """Claims and classes given only in --existing resolve the pending pods' claims; the existing
    node's CSINode allows 3 EBS volumes, one held by its running pod, so two of the four pending
    pods (one claim each) join it and the others get a new node."""
    existing = tmp_path / "existing.yaml"
    existing.write_text(
        EXISTING
        + "  - kind: StorageClass\n    metadata: {name: gp3}\n    provisioner: ebs.csi.aws.com\n"
        + "    volumeBindingMode: WaitForFirstConsumer\n"
        + "".join(
            f"  - kind: PersistentVolumeClaim\n    metadata: {{name: c{i}, namespace: data}}\n"
            "    spec: {storageClassName: gp3}\n"
            for i in range(4)
        )
    )
    pods = "---".join(
        f"""
kind: Pod
metadata: {{name: p{i}, namespace: data}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]
  volumes: [{{name: v, persistentVolumeClaim: {{claimName: c{i}}}}}]
"""
        for i in range(4)
    )
    result = _json(tmp_path, capsys, pods, "--existing", str(existing))
    assert not result["unschedulable"]
    assert len(result["existing"]["ours"]) == 2
    assert sum(len(n["pods"]) for n in result["nodes"]) == 2
    assert len(result["boundByScheduler"]) == 4


def test_a_missing_claim_is_reported_with_its_reason(tmp_path, capsys):
    """A claim in no file cannot be placed: the pod is listed unmodelled with the controller's reason
    (its UnmodelledRule Event), and the rest is planned."""
    docs = DEPLOYMENT + (
        "---\nkind: Pod\nmetadata: {name: db}\nspec:\n"
        "  containers: [{name: c}]\n  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]\n"
    )
    result = _json(tmp_path, capsys, docs)
    (item,) = result["unschedulable"]
    assert item == {
        "pod": "default/db",
        "reason": "not provisioning for this pod, spec.volumes[0]: claim data does not exist",
        "invalid": False,
        "unmodelled": True,
    }
    assert sorted(p for n in result["nodes"] for p in n["pods"]) == [f"shop/web-{i}" for i in range(5)]
    code, text = _plan(tmp_path, capsys, docs)
    assert code == 0 and "Unable to schedule pod default/db, not provisioning for this pod" in text
