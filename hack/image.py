"""`make image`: build karpy's container image with whichever engine this machine has.

Engine: docker when an engine answers `docker info`, else podman, else buildah (installed with
apt-get when none is there and we are root). Base: `python:3.11-slim-bookworm` from the registry
when the engine can pull it; otherwise (machines with no registry access) a Debian bookworm minbase
root filesystem with python3 (3.11) made by debootstrap from Debian's package mirror, imported as a
local image and passed to the Dockerfile as its BASE build argument.

Cached under ~/.cache/karpy/image, keyed by a hash of the inputs: the debootstrap tarball
(base-<hash>.tar) and, for buildah, its image store; the image is tagged karpy:<hash> and
karpy:latest, so an unchanged tree builds nothing. image.json records the last build (engine,
reference, store, size) for tests that run the image (tests/integration/test_image.py).

Usage: ``python -m hack.image`` (``make image``) builds if needed and prints the reference;
``--base registry|debootstrap`` forces a base route.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("KARPY_CACHE_DIR", Path.home() / ".cache" / "karpy")) / "image"
NAME = "karpy"
#: The Dockerfile's default BASE, fully qualified (no short-name lookup through registries.conf).
REGISTRY_BASE = "docker.io/library/python:3.11-slim-bookworm"
#: Debian bookworm's python3 is 3.11 (the version karpy supports); ca-certificates for AWS's TLS.
SUITE = "bookworm"
MIRROR = os.environ.get("KARPY_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = ("python3", "python3-venv", "ca-certificates")
#: What the Dockerfile copies; any change rebuilds the image.
INPUTS = ("Dockerfile", "pyproject.toml", "README.md", "extender", "webhook")
#: The uid the image runs as (the Dockerfile's USER, the chart's runAsUser).
UID = 65532


class ImageError(RuntimeError):
    """A build step failed; the message names the command and its output's tail."""


@dataclass(frozen=True)
class Image:
    engine: str  # docker | podman | buildah
    ref: str  # karpy:<hash>
    base: str  # the BASE build argument used
    size_bytes: int
    store: str  # buildah's --root ("" = the engine's default store)
    build_seconds: float

    def engine_argv(self) -> list[str]:
        return [self.engine, *_store_flags(self.store)] if self.engine == "buildah" else [self.engine]


def _run(argv: Sequence[str], *, timeout: float = 1800, quiet: bool = False) -> str:
    if not quiet:
        print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise ImageError(
            f"{' '.join(argv)} exited {result.returncode}:\n{(result.stdout + result.stderr)[-3000:]}"
        )
    return result.stdout


def _answers(argv: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def choose_engine() -> str:
    """docker if its engine answers, else podman, else buildah (apt-get installs it as root)."""
    if shutil.which("docker") and _answers(["docker", "info"]):
        return "docker"
    for engine in ("podman", "buildah"):
        if shutil.which(engine):
            return engine
    if os.geteuid() == 0 and shutil.which("apt-get"):
        _run(["apt-get", "update", "-q"])
        _run(["apt-get", "install", "-y", "-q", "buildah"])
        return "buildah"
    raise ImageError("no container engine: install docker, podman or buildah (apt-get install buildah)")


def _store_flags(store: str) -> list[str]:
    # The store lives in karpy's cache like the Go builds; its folder name is its storage driver.
    if not store:
        return []
    return ["--root", store, "--runroot", f"{store}-run", "--storage-driver", Path(store).name.split("-")[-1]]


def storage_driver() -> str:
    """overlay where the kernel has it and the cache is not itself on overlayfs (a container's
    root: overlay on overlay fails); else vfs, which copies every layer (several times slower)."""
    if forced := os.environ.get("KARPY_IMAGE_STORAGE_DRIVER"):
        return forced
    try:
        kernel = Path("/proc/filesystems").read_text()
    except OSError:
        return "vfs"
    CACHE.mkdir(parents=True, exist_ok=True)
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(CACHE)], capture_output=True, text=True).stdout.strip()
    return "overlay" if "\toverlay" in kernel and fs not in ("overlayfs", "tmpfs") else "vfs"


def digest(paths: Sequence[str], *extra: str) -> str:
    """A hash of the files under `paths` (names and contents) and `extra` strings."""
    h = hashlib.sha256()
    for item in extra:
        h.update(item.encode() + b"\0")
    for top in paths:
        root = REPO / top
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" in path.parts:
                continue
            h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def base_tarball() -> Path:
    """The debootstrap root filesystem as a tarball, made once per package set."""
    key = hashlib.sha256(f"{SUITE} {MIRROR} minbase {PACKAGES}".encode()).hexdigest()[:16]
    tarball = CACHE / f"base-{key}.tar"
    if tarball.exists():
        return tarball
    if not shutil.which("debootstrap"):
        if os.geteuid() != 0:
            raise ImageError("debootstrap is missing (apt-get install debootstrap)")
        _run(["apt-get", "update", "-q"])  # a fresh machine's package lists may be empty or old
        _run(["apt-get", "install", "-y", "-q", "debootstrap"])
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        root = Path(tmp) / "root"
        _run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root), MIRROR],
            timeout=1800,
        )
        # What a slim image leaves out: apt's lists and caches, docs, man pages, locales.
        for sub in (
            "var/lib/apt/lists",
            "var/cache/apt",
            "usr/share/doc",
            "usr/share/man",
            "usr/share/locale",
        ):
            shutil.rmtree(root / sub, ignore_errors=True)
            (root / sub).mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial")
        # Device nodes stay out: the runtime provides /dev.
        _run(["tar", "-C", str(root), "--exclude=./dev/*", "--exclude=./proc/*", "-cf", str(partial), "."])
        partial.rename(tarball)
    return tarball


def import_base(engine: str, store: str, tarball: Path) -> str:
    ref = f"localhost/{NAME}-base:{tarball.stem.removeprefix('base-')}"
    if _image_exists(engine, store, ref):
        return ref
    if engine == "buildah":
        flags = _store_flags(store)
        container = _run(["buildah", *flags, "from", "scratch"]).strip()
        try:
            _run(["buildah", *flags, "add", container, str(tarball), "/"])
            _run(["buildah", *flags, "config", "--env", "LANG=C.UTF-8", container])
            _run(["buildah", *flags, "commit", "--rm", container, ref])
        except ImageError:
            _run(["buildah", *flags, "rm", container], quiet=True)
            raise
    else:
        _run([engine, "import", "--change", "ENV LANG=C.UTF-8", str(tarball), ref])
    return ref


def _image_exists(engine: str, store: str, ref: str) -> bool:
    argv = [engine, *_store_flags(store), "inspect"] + (["--type", "image"] if engine == "buildah" else [])
    return _answers([*argv, ref])


def _pullable(engine: str, store: str) -> bool:
    if _image_exists(engine, store, REGISTRY_BASE):
        return True
    return _answers(["timeout", "120", engine, *_store_flags(store), "pull", REGISTRY_BASE])


def image_size(image: Image) -> int:
    """Bytes of the image's root filesystem (docker: as `docker image inspect` reports)."""
    if image.engine == "docker":
        return int(_run(["docker", "image", "inspect", "--format", "{{.Size}}", image.ref], quiet=True))
    with rootfs(image) as root:
        return int(_run(["du", "-sb", "--one-file-system", str(root)], quiet=True).split()[0])


def _ca_bundle() -> str:
    """The CA bundle this machine's pip trusts (a TLS-inspecting proxy's CA included), if any."""
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return ""


def build(base_route: str = "auto") -> Image:
    """Build (or find the cached) image and record it in image.json."""
    last = recorded()
    if last is not None and last.ref == f"{NAME}:{digest(INPUTS, last.base)}":
        route = "registry" if last.base == REGISTRY_BASE else "debootstrap"
        if base_route in ("auto", route):
            return last
    engine = choose_engine()
    store = str(CACHE / f"store-{storage_driver()}") if engine == "buildah" else ""
    if base_route == "registry" or (base_route == "auto" and _pullable(engine, store)):
        base = REGISTRY_BASE
    else:
        base = import_base(engine, store, base_tarball())
    ref = f"{NAME}:{digest(INPUTS, base)}"
    started = time.monotonic()
    if not _image_exists(engine, store, ref):
        argv = [engine, *_store_flags(store)]
        if engine == "buildah":
            argv += ["bud", "--isolation", "chroot", "--layers"]
            argv.append("--pull=never" if base != REGISTRY_BASE else "--pull=false")
        else:
            argv += ["build"] + (["--pull=never"] if engine == "podman" and base != REGISTRY_BASE else [])
        if ca := _ca_bundle():
            argv += ["--secret", f"id=ca,src={ca}"]
        _run([*argv, "--build-arg", f"BASE={base}", "-t", ref, "-t", f"{NAME}:latest", str(REPO)])
    image = Image(engine, ref, base, 0, store, round(time.monotonic() - started, 1))
    image = replace(image, size_bytes=image_size(image))
    (CACHE / "image.json").write_text(json.dumps(asdict(image), indent=2) + "\n")
    return image


def recorded() -> Image | None:
    """The last build's record, when its image is still in its store."""
    try:
        image = Image(**json.loads((CACHE / "image.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return image if _image_exists(image.engine, image.store, image.ref) else None


def config(image: Image) -> dict[str, Any]:
    """The image's OCI config: User, Env, Entrypoint, Cmd."""
    if image.engine == "buildah":
        out = json.loads(_run([*image.engine_argv(), "inspect", "--type", "image", image.ref], quiet=True))
        return dict(out["OCIv1"]["config"])
    out = json.loads(_run([image.engine, "image", "inspect", image.ref], quiet=True))
    return dict(out[0]["Config"])


def mount(image: Image) -> tuple[str, Path]:
    """A working container of the image and its root filesystem as a directory (buildah, podman:
    the container's mount; docker: an export into a temporary directory); `unmount` removes it."""
    argv = image.engine_argv()
    if image.engine == "docker":
        container = _run(["docker", "create", image.ref], quiet=True).strip()
        target = Path(tempfile.mkdtemp(prefix="karpy-rootfs-"))
        export = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-C", str(target), "-xf", "-"], stdin=export.stdout, check=True)
        export.wait()
        return container, target
    create = (
        [*argv, "from", "--pull=never", image.ref]
        if image.engine == "buildah"
        else [*argv, "create", image.ref]
    )
    container = _run(create, quiet=True).strip()
    return container, Path(_run([*argv, "mount", container], quiet=True).strip())


def unmount(image: Image, container: str, root: Path) -> None:
    if image.engine == "docker":
        shutil.rmtree(root, ignore_errors=True)
    else:
        _run([*image.engine_argv(), "umount", container], quiet=True)
    _run([*image.engine_argv(), "rm", container], quiet=True)


@contextmanager
def rootfs(image: Image) -> Iterator[Path]:
    """`mount` for the duration of a block."""
    container, root = mount(image)
    try:
        yield root
    finally:
        unmount(image, container, root)


def chroot_argv(root: Path, argv: Sequence[str], binds: Sequence[Path], uid: int = UID) -> list[str]:
    """A command that runs `argv` inside `root` as a kubelet would with readOnlyRootFilesystem and
    an emptyDir on /tmp: in a private mount namespace, the root bind-mounted read-only, /tmp a
    tmpfs, /dev and /proc provided, each of `binds` (host paths) mounted at the same path, run as
    `uid`:`uid`. Needs root (unshare, mount, chroot)."""
    script = [
        "set -e",
        'R="$1"; shift',
        'mount --bind "$R" "$R"',
        'mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"',
        'mkdir -p "$R/dev" "$R/proc"',
        'mount --rbind /dev "$R/dev"',
        'mount -t proc proc "$R/proc"',
    ]
    for path in binds:
        script += [f'mkdir -p "$R{path}"', f'mount --bind "{path}" "$R{path}"']
    script += [
        'mount -o remount,bind,ro "$R"',
        f'exec chroot --userspec={uid}:{uid} --groups= "$R" "$@"',
    ]
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "\n".join(script),
        "sh",
        str(root),
        *argv,
    ]


def image_env(image_config: Mapping[str, Any]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in image_config.get("Env") or [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack.image", description=__doc__.splitlines()[0])
    parser.add_argument("--base", choices=("auto", "registry", "debootstrap"), default="auto")
    args = parser.parse_args(argv)
    try:
        image = build(args.base)
    except (ImageError, subprocess.TimeoutExpired) as err:
        print(err, file=sys.stderr)
        return 1
    print(
        f"{image.ref} ({image.engine}, base {image.base}, {image.size_bytes / 2**20:.0f} MiB, "
        f"built in {image.build_seconds}s){f', store {image.store}' if image.store else ''}",
        file=sys.stderr,
    )
    print(image.ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
