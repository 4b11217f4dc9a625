"""Build the Helm CLI (helm.sh/helm/v4 cmd/helm) from the Go module proxy into karpy's tool cache.

Uses hack/localcluster/build's cached, stamped, locked builds; the module pinning the version is
hack/helmbuild/go.mod. Tests render charts/karpy with it (`helm template`, `helm lint`).

Usage: ``python -m hack.helm`` (``make helm``) prints the binary's path, building it if needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hack.localcluster import build
from hack.localcluster.procs import ComponentError

MODULE_DIR = Path(__file__).resolve().parent / "helmbuild"


HELM = build.Component(
    "helm", "helm.sh/helm/v4", "helm", {"helm": "helm.sh/helm/v4/cmd/helm"}, module_dir=MODULE_DIR
)


def binary() -> Path:
    """Path of the helm binary, built on first use (a few minutes; then cached)."""
    build.build(HELM)
    return build.bin_dir(HELM) / "helm"


def main() -> int:
    try:
        print(binary())
    except ComponentError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
