"""Build the control-plane binaries from Go modules once, into a cache keyed by version.

Components (each a small module under hack/localcluster/gobuild/, kept apart where deps clash):
  kube  k8s.io/kubernetes  -> kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
  etcd  go.etcd.io/etcd/server/v3 -> etcd
  kwok  sigs.k8s.io/kwok/cmd/kwok -> kwok
  provisioner  karpy.local/provisioner (gobuild/provisioner/main.go, on
        sigs.k8s.io/sig-storage-lib-external-provisioner) -> karpy-provisioner: a dynamic
        provisioner for WaitForFirstConsumer classes, volumes pinned to the selected node's zone

Cache: ``$KARPY_CACHE_DIR`` (default ``~/.cache/karpy``), one folder per component and version
(``bin-v1.37.2/``, ``etcd-v3.6.16/``, ``kwok-v0.8.0/``). A binary counts as built only when its
``.<name>.stamp`` (the build flags) matches, so a half-written or differently-built binary is redone.
Wall times are appended to ``<cache>/build-times.json``.

Usage: ``python -m hack.localcluster.build [kube|etcd|kwok|provisioner ...]`` (default: all).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hack.localcluster.procs import ComponentError

GOBUILD = Path(__file__).resolve().parent / "gobuild"


@dataclass(frozen=True)
class Component:
    name: str
    module: str  # the upstream module whose version keys the cache
    folder: str  # cache folder prefix
    packages: dict[str, str]  # binary name -> Go package
    #: The Go module pinning the version, when it is not gobuild/<name> (hack/helmbuild, hack/promqlbuild).
    module_dir: Path | None = None

    @property
    def workdir(self) -> Path:
        return self.module_dir or GOBUILD / self.name

    def version(self) -> str:
        text = (self.workdir / "go.mod").read_text()
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(self.module)}\s+(v\S+)", text, re.M)
        if not match:
            raise ComponentError(f"build {self.name}", f"{self.module} not required in {self.workdir}/go.mod")
        return match.group(1)


COMPONENTS = {
    "kube": Component(
        "kube",
        "k8s.io/kubernetes",
        "bin",
        {
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            "kubectl": "k8s.io/kubernetes/cmd/kubectl",
        },
    ),
    "etcd": Component("etcd", "go.etcd.io/etcd/server/v3", "etcd", {"etcd": "go.etcd.io/etcd/server/v3"}),
    "kwok": Component("kwok", "sigs.k8s.io/kwok", "kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
    "provisioner": Component(
        "provisioner",
        "sigs.k8s.io/sig-storage-lib-external-provisioner/v13",
        "provisioner",
        {"karpy-provisioner": "karpy.local/provisioner"},
    ),
}


def cache_root() -> Path:
    return Path(os.environ.get("KARPY_CACHE_DIR") or Path.home() / ".cache" / "karpy")


def bin_dir(component: Component) -> Path:
    return cache_root() / f"{component.folder}-{component.version()}"


def binary(name: str) -> Path:
    """Path of a cached binary by its name (kube-apiserver, etcd, kwok, kubectl, ...)."""
    for component in COMPONENTS.values():
        if name in component.packages:
            return bin_dir(component) / name
    raise KeyError(name)


def _ldflags(component: Component) -> str:
    if component.name != "kube":
        return ""
    # Without these the binaries report v0.0.0-master, and anything reading /version (AMI SSM
    # paths are keyed by the cluster's minor version) would see a bogus cluster version.
    version = component.version()
    major, minor = version.lstrip("v").split(".")[:2]
    pairs = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    flags = [
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in pairs.items()
    ]
    return " ".join(flags)


def _stamp(component: Component, name: str) -> str:
    return json.dumps({"package": component.packages[name], "ldflags": _ldflags(component)}, sort_keys=True)


def missing(component: Component) -> list[str]:
    out = bin_dir(component)
    result = []
    for name in component.packages:
        stamp = out / f".{name}.stamp"
        if not (out / name).is_file() or not stamp.is_file() or stamp.read_text() != _stamp(component, name):
            result.append(name)
    return result


def go_binary() -> str:
    found = shutil.which("go")
    if not found:
        raise ComponentError(
            "go toolchain", "`go` not found on PATH; install Go >= 1.26 (e.g. /usr/local/go/bin)"
        )
    return found


@contextmanager
def _lock(component: Component) -> Iterator[None]:
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".build-{component.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _log(message: str) -> None:
    print(message, flush=True)


def build(component: Component) -> float | None:
    """Build what is missing for one component; returns wall seconds, or None if cached."""
    if not missing(component):
        return None
    go = go_binary()
    with _lock(component):
        todo = missing(component)  # another process may have built it while we waited
        if not todo:
            return None
        out = bin_dir(component)
        out.mkdir(parents=True, exist_ok=True)
        log_path = cache_root() / f"build-{component.name}.log"
        env = {**os.environ, "GOTOOLCHAIN": "local"}
        packages = [component.packages[n] for n in todo]
        total = _count_deps(go, packages, component.workdir, env)
        _log(
            f"[build {component.name}] {component.module} {component.version()}: {', '.join(todo)} "
            f"({total or '?'} packages; log {log_path})"
        )
        started = time.monotonic()
        staging = out / ".staging"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        argv = [go, "build", "-v", "-o", f"{staging}/"]
        if _ldflags(component):
            argv += ["-ldflags", _ldflags(component)]
        _run_with_progress(
            component.name, [*argv, *packages], component.workdir, env, log_path, total, started
        )
        for name in todo:
            # Rename into place so a binary is either absent or complete.
            os.replace(staging / _go_output_name(component.packages[name]), out / name)
            (out / f".{name}.stamp").write_text(_stamp(component, name))
        shutil.rmtree(staging, ignore_errors=True)
        seconds = time.monotonic() - started
        _record(component, todo, seconds)
        _log(f"[build {component.name}] done in {seconds:.0f}s -> {out}")
        return seconds


def _go_output_name(package: str) -> str:
    """The file name `go build -o dir/` gives a main package (a /vN major suffix is skipped)."""
    parts = package.split("/")
    if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]):
        return parts[-2]
    return parts[-1]


def _count_deps(go: str, packages: Sequence[str], workdir: Path, env: dict[str, str]) -> int | None:
    try:
        result = subprocess.run(
            [go, "list", "-deps", *packages],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        return None
    return len(result.stdout.split()) if result.returncode == 0 else None


def _run_with_progress(
    name: str,
    argv: list[str],
    workdir: Path,
    env: dict[str, str],
    log_path: Path,
    total: int | None,
    started: float,
) -> None:
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=log, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        last = 0.0
        for compiled, line in enumerate(proc.stderr, start=1):
            log.write(line)
            now = time.monotonic()
            if now - last >= 15:
                last = now
                of = f"/{total}" if total else ""
                _log(f"[build {name}] {compiled}{of} packages compiled ({now - started:.0f}s)")
        code = proc.wait()
    if code != 0:
        raise ComponentError(f"build {name}", f"go build failed with exit code {code}", log_path)


def _record(component: Component, binaries: list[str], seconds: float) -> None:
    path = cache_root() / "build-times.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = []
    data.append(
        {
            "component": component.name,
            "version": component.version(),
            "binaries": binaries,
            "seconds": round(seconds, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
    )
    path.write_text(json.dumps(data, indent=2) + "\n")


def ensure(names: Sequence[str] = tuple(COMPONENTS)) -> None:
    for name in names:
        build(COMPONENTS[name])


def main(argv: Sequence[str] | None = None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or list(COMPONENTS)
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        print(f"build: unknown component(s) {unknown}; choose from {sorted(COMPONENTS)}", file=sys.stderr)
        return 2
    try:
        for name in names:
            if build(COMPONENTS[name]) is None:
                _log(f"[build {name}] cached in {bin_dir(COMPONENTS[name])}")
    except ComponentError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
