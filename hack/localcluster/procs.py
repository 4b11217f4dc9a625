"""Process and port helpers shared by the local cluster scripts: free ports, bounded waits,
starting a logged child, and stopping by PID (SIGTERM, then SIGKILL).

Every wait here has a deadline; a component that dies or never answers raises ComponentError,
whose message is the one line the CLI prints.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


class ComponentError(RuntimeError):
    """A named component failed; str() is the single line shown to the user."""

    def __init__(self, component: str, message: str, log_path: Path | str | None = None) -> None:
        self.component = component
        self.log_path = str(log_path) if log_path else None
        suffix = f" (log: {self.log_path})" if self.log_path else ""
        super().__init__(f"{component}: {message}{suffix}")


#: Linux's default ip_local_port_range, when /proc does not say.
_EPHEMERAL_DEFAULT = (32768, 60999)
#: The lowest port picked: above the well-known ones and the usual servers' defaults.
_LOWEST_PORT = 10000


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the source ports of outgoing connections (and for bind to port 0)."""
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return _EPHEMERAL_DEFAULT
    return low, high


def free_ports(count: int, exclude: Collection[int] = ()) -> list[int]:
    """`count` distinct loopback ports, free now, outside the kernel's ephemeral range. A port that
    bind(0) hands out lies in that range, and once released an outgoing connection (to etcd, to
    moto) may take it as its source port before the server binds it: "kube-apiserver: port 59689
    on 127.0.0.1 is already in use" in CI. Another process may still pick the same port: callers
    that start together exclude each other's claims (cluster.py)."""
    low, high = ephemeral_range()
    candidates = [p for p in range(_LOWEST_PORT, 65536) if not low <= p <= high and p not in exclude]
    if len(candidates) < count:  # a kernel whose ephemeral range is nearly everything
        candidates = [p for p in range(_LOWEST_PORT, 65536) if p not in exclude]
    chosen: list[int] = []
    for port in random.SystemRandom().sample(candidates, min(len(candidates), 50 + count)):
        if not port_in_use(port):  # sample() repeats none
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise ComponentError("ports", f"found no {count} free loopback ports outside {low}-{high}")


def free_port() -> int:
    """One port as `free_ports` picks them (the caller must tolerate a race)."""
    return free_ports(1)[0]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Without SO_REUSEADDR a port in TIME_WAIT still counts as taken, matching what servers see.
        try:
            sock.bind((LOOPBACK, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
        return False


def listening(port: int) -> bool:
    """Whether any socket is in LISTEN on this TCP port (IPv4 or IPv6), per /proc/net."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours, and check /proc otherwise.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def start_ticks(pid: int) -> int | None:
    """The process start time from /proc (clock ticks since boot): with the pid, its identity."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def is_same_process(pid: int, ticks: int | None) -> bool:
    """True if pid is alive and (when ticks is known) is still the process we recorded."""
    if not pid_alive(pid):
        return False
    return ticks is None or start_ticks(pid) == ticks


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _die_with_parent() -> None:
    # Children of a pytest session must not outlive it when the session is killed.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def spawn(
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    die_with_parent: bool = False,
) -> subprocess.Popen[bytes]:
    """Start argv detached in its own session, stdout+stderr appended to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    component: str,
    what: str,
    log_path: Path | str | None = None,
    pid: int | None = None,
    interval: float = 0.2,
) -> None:
    """Poll check() until true; fail fast if pid dies, fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if pid is not None and not pid_alive(pid):
            raise ComponentError(component, f"exited before {what}", log_path)
        if time.monotonic() >= deadline:
            raise ComponentError(component, f"not {what} after {timeout:.0f}s", log_path)
        time.sleep(interval)


def http_ok(url: str, *, timeout: float = 1.0, context: object = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def stop_pid(pid: int, *, ticks: int | None = None, timeout: float = 10.0) -> bool:
    """SIGTERM the process group led by pid (else the pid), SIGKILL after timeout.

    Returns True if something was running. Safe on a PID that already exited, and, given the
    recorded start ticks, on a PID the kernel has since handed to another process.
    """
    if not is_same_process(pid, ticks):
        return False
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    # Components are started as session leaders, so their pgid equals their pid; signalling the
    # group also reaches helpers they forked. Fall back to the bare pid if the group is gone.
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
            return
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
