"""`karpy controller` replicas forked from one pre-imported parent, for tests that kill -9 many.

A fresh `python -c` replica spent about 1.5 s of each round importing kubernetes, boto3 and karpy
on a loaded 2-core machine. The parent here imports them once and forks a replica per request, as
gunicorn's --preload does. The fork happens before any client, socket or thread exists (the parent
checks it has one thread), so each replica builds its own kube and AWS clients, watches, batch
window and extender server: kill -9 still hits a separate process holding real connections.

Protocol on the parent's stdin/stdout, one line each:
``fork <log path>`` -> ``FORKED <pid>``, then the replica's own ``STARTED <pid>`` once it serves;
``reap <pid>`` -> ``EXITED <pid> <wait status>`` once the replica is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import IO

# The controller's workers and its extender app in one process (what `karpy controller` runs under
# gunicorn), so kill -9 takes both down at once.
REPLICA = """
def replica():
    import logging, threading
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = from_env()
    controller = start(settings, threading.Event())
    host, port = settings.extender.bind.rsplit(":", 1)
    app = create_app(settings, controller.state, controller.provisioning.enqueue)
    server = make_server(host, int(port), app, threaded=True)
    print("STARTED", os.getpid(), flush=True)
    server.serve_forever()
"""

PARENT = (
    """
import os, sys, threading, traceback
from werkzeug.serving import make_server
from extender.http.app import create_app
from extender.main import start
from extender.scheduling.pricing import built_in
from extender.settings import from_env
built_in()  # the shipped price table: plain data, read once as gunicorn's --preload would
"""
    + REPLICA
    + """
for line in sys.stdin:
    verb, arg = line.split(maxsplit=1)
    if verb == "reap":
        pid = int(arg)
        _, status = os.waitpid(pid, 0)
        print("EXITED", pid, status, flush=True)
        continue
    assert threading.active_count() == 1, "forking with threads running"
    pid = os.fork()
    if pid == 0:
        fd = os.open(arg.strip(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdin.close()
        try:
            replica()
        except BaseException:
            traceback.print_exc()
        os._exit(1)
    print("FORKED", pid, flush=True)
"""
)


class Replicas:
    """The parent process; `fork` starts a replica, `kill` ends one with SIGKILL and reaps it."""

    def __init__(self, parent: subprocess.Popen[str]) -> None:
        self.parent = parent
        assert parent.stdin is not None and parent.stdout is not None
        self._in: IO[str] = parent.stdin
        self._out: IO[str] = parent.stdout
        self.live: set[int] = set()

    def _send(self, line: str) -> None:
        self._in.write(line + "\n")
        self._in.flush()

    def _expect(self, word: str, pid: int | None = None) -> list[str]:
        """The next line starting with `word` (for `pid`); the replicas' and the parent's lines
        arrive in the order written, so a STARTED may come before its FORKED is read."""
        while True:
            line = self._out.readline()
            if not line:
                raise RuntimeError(f"the replica parent exited (status {self.parent.poll()}) before {word}")
            parts = line.split()
            if parts and parts[0] == word and (pid is None or int(parts[1]) == pid):
                return parts

    def fork(self, log_path: os.PathLike[str] | str, *, wait_started: bool = True) -> int:
        """A new replica logging to `log_path`; once it serves, unless `wait_started` is False."""
        self._send(f"fork {os.fspath(log_path)}")
        pid = int(self._expect("FORKED")[1])
        self.live.add(pid)
        if wait_started:
            self._expect("STARTED", pid)
        return pid

    def kill(self, pid: int) -> int:
        """SIGKILL, then wait until the replica is gone; its wait status."""
        os.kill(pid, signal.SIGKILL)
        self._send(f"reap {pid}")
        status = int(self._expect("EXITED", pid)[2])
        self.live.discard(pid)
        return status


@contextmanager
def replica_parent(env: Mapping[str, str]) -> Iterator[Replicas]:
    """The pre-imported parent with `env` (every replica's); kills what is left on exit."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    replicas = Replicas(parent)
    try:
        yield replicas
    finally:
        for pid in list(replicas.live):
            with suppress(OSError, RuntimeError):
                replicas.kill(pid)
        parent.kill()
        parent.wait(10)
