"""`karpy plan` reads capacity reservations (issue 35): `--capacity-reservations FILE`, or the
KARPY_AWS_CAPACITY_RESERVATIONS file the controller's fallback source reads, selected per pool by its
EC2NodeClass's capacityReservationSelectorTerms; before, the offline plan never showed reserved nodes."""

from __future__ import annotations

import json

from extender.cli.main import main
from tests.unit.scheduling.builders import DATA
from tests.unit.test_cli_plan_min_values import NODE_CLASS

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---"""
# The min-values test's EC2NodeClass, selecting one reservation.
POOL += NODE_CLASS + "  capacityReservationSelectorTerms: [{id: cr-0abc}]\n"
RESERVATIONS = """
- {id: cr-0abc, instanceType: m5.large, availabilityZone: us-west-2a, totalInstanceCount: 2}
- {id: cr-0other, instanceType: m5.large, availabilityZone: us-west-2a, totalInstanceCount: 5}
"""
PODS = """
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1500m"}}}]}}
"""


def _plan(tmp_path, capsys, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "pool.yaml").write_text(POOL)
    (tmp_path / "pods.yaml").write_text(PODS)
    args = ["plan", "--pods", str(tmp_path / "pods.yaml"), "--provisioner", str(tmp_path / "pool.yaml")]
    code = main([*args, "--instance-types", str(DATA / "instance-types.json"), "-o", "json", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _kinds(out: str) -> list[tuple[str, str]]:
    return sorted((n["capacityType"], n.get("capacityReservationId", "")) for n in json.loads(out)["nodes"])


def test_plan_launches_into_the_selected_reservation_then_on_demand(tmp_path, capsys) -> None:
    (tmp_path / "cr.yaml").write_text(RESERVATIONS)
    code, out, err = _plan(tmp_path, capsys, "--capacity-reservations", str(tmp_path / "cr.yaml"))
    assert code == 0, err
    # cr-0other is not selected by the EC2NodeClass: never used.
    assert _kinds(out) == [("on-demand", ""), ("reserved", "cr-0abc"), ("reserved", "cr-0abc")]


def test_plan_reads_the_controllers_variable_by_default(tmp_path, capsys, monkeypatch) -> None:
    (tmp_path / "cr.yaml").write_text(RESERVATIONS)
    monkeypatch.setenv("KARPY_AWS_CAPACITY_RESERVATIONS", str(tmp_path / "cr.yaml"))
    code, out, err = _plan(tmp_path, capsys)
    assert code == 0, err
    assert [k for k, _ in _kinds(out)].count("reserved") == 2


def test_plan_without_reservations_plans_on_demand(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("KARPY_AWS_CAPACITY_RESERVATIONS", raising=False)
    code, out, err = _plan(tmp_path, capsys)
    assert code == 0, err
    assert _kinds(out) == [("on-demand", "")] * 3


def test_plan_refuses_a_bad_reservation_file_naming_the_field(tmp_path, capsys) -> None:
    (tmp_path / "cr.yaml").write_text(
        "- {id: cr-0abc, instanceType: m5.large, availabilityZone: us-west-2a}\n"
    )
    code, _, err = _plan(tmp_path, capsys, "--capacity-reservations", str(tmp_path / "cr.yaml"))
    assert code == 2 and "[0].totalInstanceCount: missing required field" in err
