"""`karpy webhook --local` as a child process for the tests that need the real server (TLS,
gunicorn, rotation): started on a free port, waited for until it serves /healthz, stopped after."""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from extender.cli.webhook import local_command
from hack.localcluster.procs import free_port

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class LocalWebhook:
    port: int
    cert_dir: Path
    process: subprocess.Popen[bytes]

    def context(self) -> ssl.SSLContext:
        """Trusts the CA bundle as it is on disk now (it grows when the certificate rotates)."""
        return ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))

    def output(self) -> str:
        """Everything the server printed (after it has stopped), when started with capture=True."""
        out = self.process.stdout.read() if self.process.stdout else b""
        return out.decode(errors="replace")


@contextmanager
def local_webhook(
    cert_dir: Path, extra: Sequence[str] = (), *, capture: bool = False
) -> Iterator[LocalWebhook]:
    """The webhook serving on 127.0.0.1 with a self-signed pair in `cert_dir` and no reachable API
    server; yields once /healthz answers over TLS (at most 30 s), terminates it on exit."""
    port = free_port()
    argv = local_command(port=port, cert_dir=cert_dir, extra=[f"--kubeconfig={cert_dir / 'absent'}", *extra])
    output = subprocess.PIPE if capture else subprocess.DEVNULL
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT if capture else output)
    server = LocalWebhook(port, cert_dir, proc)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/healthz", context=server.context(), timeout=2
                ) as reply:
                    reply.read()
                break
            except (OSError, ssl.SSLError):
                assert proc.poll() is None and time.monotonic() < deadline, "webhook did not come up"
                time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        proc.wait(15)
