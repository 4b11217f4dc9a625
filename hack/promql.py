"""Build promtool and promql-selectors (github.com/prometheus/prometheus) into karpy's tool cache.

Uses hack/localcluster/build's cached, stamped, locked builds; the module pinning the version is
hack/promqlbuild/go.mod. The live-metrics test reads every dashboard and alert expression with
Prometheus's own parser (``selectors``) and runs the alerts with ``promtool test rules``.

Usage: ``python -m hack.promql`` (``make promtool``) prints the binaries' folder, building them if needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hack.localcluster import build
from hack.localcluster.procs import ComponentError

MODULE_DIR = Path(__file__).resolve().parent / "promqlbuild"


PROMQL = build.Component(
    "promql",
    "github.com/prometheus/prometheus",
    "prometheus",
    {
        "promtool": "github.com/prometheus/prometheus/cmd/promtool",
        "promql-selectors": "karpy.local/promqlbuild/selectors",
    },
    module_dir=MODULE_DIR,
)


def binary(name: str) -> Path:
    """Path of promtool or promql-selectors, built on first use (a few minutes; then cached)."""
    build.build(PROMQL)
    return build.bin_dir(PROMQL) / name


def analyse(expressions: list[str]) -> list[dict[str, Any]]:
    """Each expression's selectors and grouping labels, as Prometheus's parser reads them."""
    stdin = "".join(json.dumps(e) + "\n" for e in expressions)
    result = subprocess.run(
        [str(binary("promql-selectors"))], input=stdin, capture_output=True, text=True, timeout=60, check=True
    )
    return [json.loads(line) for line in result.stdout.splitlines()]


def main() -> int:
    try:
        print(binary("promtool").parent)
    except ComponentError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
