"""Run one benchmark function of this checkout against another tree's karpy, in a fresh interpreter.

The function comes from this checkout's benchmark file (so both trees get the same workload code) but
imports `extender` from `tree` (`PYTHONPATH=<tree>`, first on sys.path); it returns JSON-able data.
A benchmark file run this way must import `extender` only inside the function or at module level, and
nothing of `benchmarks` that the other tree may lack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

_SCRIPT = (
    "import json, runpy, sys; sys.path.insert(0, sys.argv[1]);"
    "m = runpy.run_path(sys.argv[2]);"
    "print(json.dumps(m[sys.argv[3]](*json.loads(sys.argv[4]))))"
)


def run_in_tree(tree: Path, file: str, function: str, *args: Any, timeout: float = 600) -> Any:
    """`function(*args)` of benchmark `file`, run in a fresh interpreter importing `tree`'s karpy."""
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tree), file, function, json.dumps(args)],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
