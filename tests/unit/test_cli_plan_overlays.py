"""`karpy plan` reads NodeOverlays beside the NodePools (--provisioner files) and plans as the
controller does: a price overlay changes the type planned, a conflicting one is said on stderr."""

from __future__ import annotations

import json

from extender.cli.main import main
from tests.unit.scheduling.builders import DATA
from tests.unit.test_cli_plan_min_values import NODE_CLASS

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: web}
spec:
  template:
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""
PODS = """
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
"""


def overlay(name: str, price: str) -> str:
    return f"""
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: {name}}}
spec:
  requirements:
    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
    - {{key: karpenter.sh/nodepool, operator: In, values: [web]}}
  price: "{price}"
"""


def plan(tmp_path, capsys, *overlays: str) -> tuple[dict, str]:
    (tmp_path / "pods.yaml").write_text(PODS)
    (tmp_path / "pools.yaml").write_text("---".join([NODE_CLASS, POOL, *overlays]))
    args = ["plan", "--pods", str(tmp_path / "pods.yaml"), "--provisioner", str(tmp_path / "pools.yaml")]
    assert main([*args, "--instance-types", str(DATA / "instance-types.json"), "-o", "json"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out)["nodes"][0], out.err


def test_a_price_overlay_changes_the_planned_type(tmp_path, capsys) -> None:
    before, _ = plan(tmp_path, capsys)
    assert before["instanceType"] == "c5.large"
    after, _ = plan(tmp_path, capsys, overlay("savings", "0.01"))
    assert after["instanceType"] == "m5.large" and after["pricePerHour"] == 0.01


def test_a_conflicting_overlay_is_left_out_and_said(tmp_path, capsys) -> None:
    node, err = plan(tmp_path, capsys, overlay("b-wins", "0.01"), overlay("a-loses", "0.02"))
    assert node["pricePerHour"] == 0.01
    assert "NodeOverlay a-loses: conflict with another overlay, not applied" in err
