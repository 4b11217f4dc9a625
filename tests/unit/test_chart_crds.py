"""The chart's CRDs are manifests/crd/, file for file: `charts/karpy/crds/` holds a link to each
CRD in manifests/ (the one source) and nothing else, so a CRD edited in one place and not the
other fails here, before Helm or an API server is involved. (tests/integration/test_manifests.py
also renders the chart with a real Helm and compares the objects.)"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "manifests" / "crd"
CHART = ROOT / "charts" / "karpy" / "crds"


def test_the_chart_installs_exactly_the_crds_of_the_manifests() -> None:
    assert sorted(p.name for p in CHART.iterdir()) == sorted(p.name for p in SOURCE.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(p.name for p in SOURCE.glob("*.yaml")))
def test_each_chart_crd_is_a_link_to_its_manifest(name: str) -> None:
    """A copy, even an identical one, is how they drifted apart unseen: only a link is kept."""
    chart = CHART / name
    assert chart.is_symlink(), f"{chart.relative_to(ROOT)} is a copy; link it to manifests/crd/{name}"
    assert chart.resolve() == (SOURCE / name).resolve()
