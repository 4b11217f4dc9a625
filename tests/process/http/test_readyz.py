"""/readyz says when the controller has warmed up (issue 26): a real gunicorn server (the controller's
options, tests/process/http/warmserver.py) answers 503 naming the warm-up steps still running, in
order, while /healthz answers 200 as before; 200 "ok" once every step is done. Before the warm-up,
/readyz answered 200 as soon as the pending-pod watch had synced."""

from __future__ import annotations

import time
from pathlib import Path

import requests

from extender.provisioning.warmup import STEPS
from hack.localcluster.procs import free_port
from tests.process.http.slowserver import running


def _readyz_once(url: str, status: int, body: object, seconds: float = 10.0) -> None:
    """Wait until /readyz answers `status` with `body` (JSON for 503, text for 200)."""
    deadline = time.monotonic() + seconds
    while True:
        answer = requests.get(url, timeout=5)
        seen = (answer.status_code, answer.json() if answer.status_code == 503 else answer.text)
        if seen == (status, body):
            return
        assert time.monotonic() < deadline, f"/readyz still answers {seen}"
        time.sleep(0.05)


def test_readyz_names_the_steps_still_warming_then_answers_ok(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{base}/healthz", timeout=1).ok
        except requests.RequestException:
            return False

    with running([str(port), str(tmp_path)], up, module="tests.process.http.warmserver"):
        first = requests.get(f"{base}/readyz", timeout=5)
        assert first.status_code == 503
        assert first.json() == {"status": "warming up", "waiting": list(STEPS)}

        for step in STEPS[:2]:
            (tmp_path / step).touch()
        _readyz_once(f"{base}/readyz", 503, {"status": "warming up", "waiting": list(STEPS[2:])})
        health = requests.get(f"{base}/healthz", timeout=5)
        assert (health.status_code, health.text) == (200, "ok")

        for step in STEPS[2:]:
            (tmp_path / step).touch()
        _readyz_once(f"{base}/readyz", 200, "ok")
        assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
