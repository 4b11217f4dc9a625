"""The Prometheus Operator's published CRDs (ServiceMonitor, PodMonitor, PrometheusRule), from its Go
module's zip on the module proxy, cached in karpy's tool cache.

The module github.com/prometheus-operator/prometheus-operator ships them as
example/prometheus-operator-crd/monitoring.coreos.com_*.yaml (the files its releases publish). The
proxy serves the root module at VERSION (later ones, e.g. v0.95.x, are refused with 403 "not
available"; only pkg/apis/monitoring is served there, without CRD YAML). The live-metrics test
installs them on the local API server and applies the chart's monitoring objects against them.

Usage: ``python -m hack.monitoring_crds`` prints the folder, downloading on first use.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from hack.localcluster import build
from hack.localcluster.procs import ComponentError

MODULE = "github.com/prometheus-operator/prometheus-operator"
VERSION = "v0.85.0"
CRDS = ("servicemonitors", "podmonitors", "prometheusrules")


def folder() -> Path:
    return build.cache_root() / f"prometheus-operator-crds-{VERSION}"


def files() -> list[Path]:
    """The three CRD files, fetched once."""
    out = folder()
    wanted = [out / f"monitoring.coreos.com_{name}.yaml" for name in CRDS]
    if all(p.is_file() for p in wanted):
        return wanted
    build.cache_root().mkdir(parents=True, exist_ok=True)
    with open(build.cache_root() / ".prometheus-operator-crds.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all(p.is_file() for p in wanted):
            _fetch(out)
    return wanted


def _fetch(out: Path) -> None:
    go = build.go_binary()
    argv = [go, "mod", "download", "-json", f"{MODULE}@{VERSION}"]
    with tempfile.TemporaryDirectory() as empty:  # outside any module: no go.mod is consulted
        result = subprocess.run(
            argv,
            cwd=empty,
            env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"},
            capture_output=True,
            text=True,
            timeout=600,
        )
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or info.get("Error") or not info.get("Zip"):
        why = info.get("Error") or result.stderr
        raise ComponentError("prometheus-operator CRDs", f"{' '.join(argv)}: {why}")
    staging = out.with_name(out.name + ".staging")
    staging.mkdir(parents=True, exist_ok=True)
    prefix = f"{MODULE}@{VERSION}/example/prometheus-operator-crd/"
    with zipfile.ZipFile(info["Zip"]) as archive:
        for name in CRDS:
            member = f"{prefix}monitoring.coreos.com_{name}.yaml"
            (staging / Path(member).name).write_bytes(archive.read(member))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(staging, out)


def main() -> int:
    try:
        files()
    except ComponentError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(folder())
    return 0


if __name__ == "__main__":
    sys.exit(main())
