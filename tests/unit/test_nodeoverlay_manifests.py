"""The NodeOverlay CRD and RBAC karpy ships: the chart installs the same CRD file as manifests/crd,
the schema declares every spec field the loader reads, and the controller may watch NodeOverlays
and write their status (both RBAC copies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from extender.api.nodeoverlay import NodeOverlaySpecSchema

REPO = Path(__file__).resolve().parents[2]
NAME = "nodeoverlays.karpenter.sh.yaml"


def test_chart_crd_is_the_manifest_crd() -> None:
    assert (REPO / "charts/karpy/crds" / NAME).read_bytes() == (REPO / "manifests/crd" / NAME).read_bytes()


def test_crd_is_karpenters_v1alpha1_kind_with_every_field_the_loader_reads() -> None:
    crd = yaml.safe_load((REPO / "manifests/crd" / NAME).read_text())
    assert crd["spec"]["names"]["kind"] == "NodeOverlay" and crd["spec"]["scope"] == "Cluster"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["properties"]) == set(NodeOverlaySpecSchema().fields)
    assert spec["required"] == ["requirements"]


def _rules(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    # The chart's template: only its RBAC rules matter here, the Go template lines are left out.
    kept = "\n".join(line for line in text.splitlines() if "{{" not in line)
    return [rule for doc in yaml.safe_load_all(kept) if doc for rule in doc.get("rules") or []]


def test_controller_rbac_watches_nodeoverlays_and_patches_their_status() -> None:
    for path in (
        REPO / "manifests/rbac/controller.yaml",
        REPO / "charts/karpy/templates/controller/rbac.yaml",
    ):
        rules = _rules(path)
        verbs = {
            resource: set(rule["verbs"])
            for rule in rules
            if "karpenter.sh" in rule.get("apiGroups", ())
            for resource in rule["resources"]
        }
        assert {"list", "watch"} <= verbs["nodeoverlays"], path
        assert "patch" in verbs["nodeoverlays/status"], path
