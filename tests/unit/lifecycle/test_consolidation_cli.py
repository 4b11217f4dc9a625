"""`karpy plan --existing FILE --consolidate` prints the actions and takes none."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial
from typing import Any

import yaml

from extender.api import labels as wk
from extender.cli.main import main
from tests import builders
from tests.unit.scheduling.builders import DATA

PROVISIONER = """
kind: Provisioner
metadata: {name: default}
spec:
  consolidation: {enabled: true}
  disruption: {nodes: "100%"}
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"""


#: A karpy node of 4 CPU, 16Gi (3920m, 14Gi allocatable); the instance type follows the name.
cli_node = partial(
    builders.launched_node_manifest,
    created=datetime(2026, 1, 1, tzinfo=UTC),
    instance=None,
    allocatable={"cpu": "3920m", "memory": "14Gi", "pods": "58"},
    capacity={"cpu": "4", "memory": "16Gi", "pods": "58"},
)
#: A Running pod of a ReplicaSet `rs` asking 1 CPU; give it `node_name`.
cli_pod = partial(builders.running_pod_manifest, uid="", image=None, owner_name="rs", cpu="1")


def run(tmp_path, capsys, docs: list[dict[str, Any]], *extra: str):
    (tmp_path / "existing.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "prov.yaml").write_text(PROVISIONER)
    (tmp_path / "pods.yaml").write_text("")
    args = [
        "plan",
        "--pods",
        str(tmp_path / "pods.yaml"),
        "--provisioner",
        str(tmp_path / "prov.yaml"),
        "--instance-types",
        str(DATA / "instance-types.json"),
        "--existing",
        str(tmp_path / "existing.yaml"),
        "--consolidate",
        *extra,
    ]
    return main(args), capsys.readouterr()


def test_three_half_empty_nodes_are_consolidated_on_paper(tmp_path, capsys):
    docs = [
        d
        for i in range(3)
        for d in (
            cli_node(f"n{i}"),
            cli_pod(f"p{i}", node_name=f"n{i}"),
        )
    ]
    code, out = run(tmp_path, capsys, docs)
    assert code == 0, out.err
    lines = out.out.splitlines()
    assert lines[0].startswith("Consolidating ") and "→" in lines[0]
    assert lines[-1].endswith("(nothing was changed)")
    code, out = run(tmp_path, capsys, docs, "-o", "json")
    actions = json.loads(out.out)
    assert sum(len(a["nodes"]) for a in actions) >= 2
    assert all(a["priceAfterPerHour"] < a["priceBeforePerHour"] for a in actions)


def test_do_not_evict_pods_keep_their_nodes_on_paper_too(tmp_path, capsys):
    docs = [
        d
        for i in range(3)
        for d in (
            cli_node(f"n{i}"),
            cli_pod(f"p{i}", node_name=f"n{i}", annotations={wk.DO_NOT_EVICT_ANNOTATION: "true"}),
        )
    ]
    code, out = run(tmp_path, capsys, docs, "-o", "json")
    assert code == 0 and json.loads(out.out) == []


def test_a_node_replanned_into_two_is_described_with_both(tmp_path, capsys):
    docs = [
        cli_node("n", "c5a.2xlarge"),
        cli_pod("a", node_name="n", cpu="500m"),
        cli_pod("b", node_name="n", cpu="500m"),
        cli_pod("c", node_name="n", cpu="3"),
    ]
    code, out = run(tmp_path, capsys, docs)
    assert code == 0, out.err
    assert out.out.splitlines()[0].startswith("Consolidating 1 node(s) into 2 node(s): ")
    code, out = run(tmp_path, capsys, docs, "-o", "json")
    [action] = json.loads(out.out)
    assert action["method"] == "re-plan" and action["nodes"] == ["n"]
    assert len(action["replacements"]) == 2
    assert sorted(p for r in action["replacements"] for p in r["pods"]) == sorted(action["pods"])
    assert action["priceAfterPerHour"] < action["priceBeforePerHour"]
