"""`karpy plan` refuses input that would hang it or slip past its checks (issue 13, Found 8).

Before issue 13, `replicas: 100000000` expanded for minutes (no bound) and a `.nan` CPU request
was planned as if it fitted anywhere: both tests failed on the unfixed code.
"""

from __future__ import annotations

import time

import pytest

from extender.cli import plan
from extender.cli.main import main
from tests.unit.scheduling.builders import DATA


def _run(tmp_path, capsys, pods_yaml: str) -> tuple[int, str]:
    path = tmp_path / "pods.yaml"
    path.write_text(pods_yaml)
    code = main(["plan", "--pods", str(path), "--instance-types", str(DATA / "instance-types.json")])
    return code, capsys.readouterr().err


def test_huge_replica_count_exits_2_at_once(tmp_path, capsys) -> None:
    started = time.monotonic()
    code, err = _run(
        tmp_path,
        capsys,
        "kind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 100000000\n"
        "  template: {spec: {containers: [{name: c}]}}\n",
    )
    assert code == 2 and f"more than {plan.MAX_PODS} pods" in err and "spec.replicas" in err
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_quantity_exits_2_naming_the_field(tmp_path, capsys, value: str) -> None:
    code, err = _run(
        tmp_path,
        capsys,
        f"kind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n"
        f"  - name: c\n    resources: {{requests: {{cpu: {value}}}}}\n",
    )
    assert code == 2
    assert "spec.containers[0].resources.requests.cpu: not a finite number" in err


def test_boolean_replicas_is_a_usage_error(tmp_path, capsys) -> None:
    code, err = _run(
        tmp_path,
        capsys,
        "kind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: true\n"
        "  template: {spec: {containers: [{name: c}]}}\n",
    )
    assert code == 2 and "spec.replicas: must be a non-negative integer" in err
