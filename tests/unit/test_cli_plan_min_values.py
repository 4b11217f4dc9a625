"""`karpy plan` with a NodePool + EC2NodeClass honours the NodePool's minValues (it loads through
the same loader as the controller): every planned node offers at least that many instance types."""

from __future__ import annotations

import json

import pytest

from extender.cli.main import main
from tests.unit.scheduling.builders import DATA

NODE_CLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
PODS = """
kind: Deployment
metadata: {name: web}
spec:
  replicas: 40
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: "3", memory: 6Gi}}}]}}
"""


def _plan(tmp_path, capsys, min_values: str) -> dict:
    pool = f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: spread}}
spec:
  template:
    spec:
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: node.kubernetes.io/instance-type, operator: Exists{min_values}}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
---{NODE_CLASS}"""
    (tmp_path / "pool.yaml").write_text(pool)
    (tmp_path / "pods.yaml").write_text(PODS)
    args = ["plan", "--pods", str(tmp_path / "pods.yaml"), "--provisioner", str(tmp_path / "pool.yaml")]
    code = main([*args, "--instance-types", str(DATA / "instance-types.json"), "-o", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_plan_keeps_min_values_options_per_node(tmp_path, capsys) -> None:
    free = _plan(tmp_path, capsys, "")
    plan = _plan(tmp_path, capsys, ", minValues: 12")
    assert min(len(n["options"]) for n in free["nodes"]) < 12
    assert all(len(n["options"]) >= 12 for n in plan["nodes"])
    assert sum(len(n["pods"]) for n in plan["nodes"]) == 40 and len(plan["nodes"]) > len(free["nodes"])


@pytest.mark.parametrize("value", ["0", "51"])
def test_plan_refuses_min_values_out_of_range(tmp_path, capsys, value: str) -> None:
    (tmp_path / "pool.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n"
        f"      requirements: [{{key: kubernetes.io/arch, operator: Exists, minValues: {value}}}]\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n---" + NODE_CLASS
    )
    (tmp_path / "pods.yaml").write_text(PODS)
    args = ["plan", "--pods", str(tmp_path / "pods.yaml"), "--provisioner", str(tmp_path / "pool.yaml")]
    code = main([*args, "--instance-types", str(DATA / "instance-types.json")])
    err = capsys.readouterr().err
    assert code == 2 and "spec.template.spec.requirements[0].minValues: must be between 1 and 50" in err
