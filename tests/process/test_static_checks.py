"""The layers and the types as checks in `make test`:

- docs/contracts.md: the import-linter contracts in pyproject.toml ([tool.importlinter]) hold for the
  code as it is (layers, pure api and scheduling, webhook's dependencies, no cycles);
- mypy ([tool.mypy]): strict per-module flags on extender.api and extender.scheduling, clean on the
  rest of extender/ and webhook/.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    tool = Path(sys.executable).with_name(name)
    return subprocess.run([str(tool), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_import_contracts_are_kept() -> None:
    result = run_tool("lint-imports", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_type_checker_passes() -> None:
    result = run_tool("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout
