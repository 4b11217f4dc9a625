"""`karpy explain pod` offline, on the files `karpy plan` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extender.cli.main import main
from tests.unit.scheduling.builders import DATA

PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: ok, namespace: shop}
spec:
  tolerations: [{key: dedicated, operator: Exists}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
POOLS = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: arm}
spec:
  requirements: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: gpu}
spec:
  weight: 10
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
  requirements: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]
"""


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "pods.yaml").write_text(PODS)
    (tmp_path / "pools.yaml").write_text(POOLS)
    return [
        "--pods",
        str(tmp_path / "pods.yaml"),
        "--provisioner",
        str(tmp_path / "pools.yaml"),
        "--instance-types",
        str(DATA / "instance-types.json"),
    ]


def test_text_names_each_pool_in_weight_order_and_a_change(files, capsys):
    assert main(["explain", "pod", "shop/web", *files]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Pod shop/web"
    assert (
        out[2]
        == "  Provisioner gpu: taint dedicated=gpu:NoSchedule of Provisioner gpu is not tolerated by the pod"
    )
    assert (
        out[3]
        == "  Provisioner arm: the pod requires kubernetes.io/arch=amd64; Provisioner arm allows only arm64"
    )
    assert out[4].startswith("  change: drop the pod's requirement on kubernetes.io/arch: ")


def test_json_all_pending(files, capsys):
    assert main(["explain", "pod", "--all-pending", "-o", "json", *files]) == 0
    pods = {p["pod"]: p for p in json.loads(capsys.readouterr().out)["pods"]}
    assert pods["shop/ok"]["admitted"] is True and pods["shop/ok"]["change"] is None
    assert pods["shop/ok"]["pools"][0]["rule"] == "launch"
    web = pods["shop/web"]
    assert [p["rule"] for p in web["pools"]] == ["taint", "requirement"]
    assert web["change"]["edit"] == {"op": "dropRequirement", "key": "kubernetes.io/arch"}
    assert web["change"]["placement"]["pricePerHour"] > 0


def test_unknown_pod_and_bad_flags_are_usage_errors(files, capsys):
    assert main(["explain", "pod", "shop/nope", *files]) == 2
    assert "pod shop/nope not found among the pending pods" in capsys.readouterr().err
    assert main(["explain", "pod", *files]) == 2
    assert "give one pod as NAMESPACE/NAME, or --all-pending" in capsys.readouterr().err
