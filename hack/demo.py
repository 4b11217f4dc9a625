"""`make demo`: Karpenter's getting-started walkthrough, replayed against karpy on the local control plane.

1. brings up the proving ground (hack/localcluster: etcd, kube-apiserver, controller-manager,
   kube-scheduler with karpy's extender registered, kwok, moto seeded like an EKS account);
2. starts karpy as a user would (`--image`: from the image `make image` built, each process chrooted
   into the image's read-only root filesystem as uid 65532, as a pod runs it): `karpy webhook
   --self-signed` under gunicorn with TLS, behind real Mutating/ValidatingWebhookConfigurations
   (manifests/webhook/webhooks.yaml pointed at 127.0.0.1), and `karpy controller` configured by
   KARPY_* variables (cluster, moto endpoint, SSM prefix, queue, the seeded default instance profile);
3. applies the chart's CRDs (charts/karpy/crds, every one, as `helm install` does; `--crds v1alpha5`:
   only the Provisioner and AWSNodeTemplate CRDs, a cluster upgraded from Karpenter v0.31) and the
   default Provisioner (spot, ttlSecondsAfterEmpty 30), or with `--api v1` the default NodePool +
   EC2NodeClass (spot, consolidationPolicy WhenEmpty, consolidateAfter 30s);
4. creates `inflate` (pause, 1 CPU, 0 replicas), scales it to 5, shows `karpy status`; redeploys it with
   nodeSelector node.kubernetes.io/instance-type: c5.xlarge (3 + 2 pods on two nodes); deletes it and
   waits for the empty nodes to be terminated after the TTL;
5. prints a timeline interleaving its steps, karpy's own log lines and what the API server shows, then a
   summary; `--json-summary FILE` writes it for tests.

Everything it started is stopped at the end, also on Ctrl-C or SIGTERM, unless `--keep` (make demo
KEEP=1), which leaves the cluster and karpy running for kubectl; `python -m hack.demo down` stops them.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hack import image as karpy_image
from hack.demo_objects import (
    APP,
    NAMESPACE,
    REPO,
    Kube,
    inflate,
    local_webhook_configurations,
    nodepool,
    provisioner,
)
from hack.demo_summary import KARPY_PHRASES, build_summary, render_summary
from hack.demo_timeline import LogTail, Observations, Observer, Timeline
from hack.localcluster import awsseed, build, karpyenv, procs
from hack.localcluster import cluster as localcluster

SELECTED_TYPE = "c5.xlarge"
#: The CRDs `helm install` applies (a chart's crds/ folder); the demo applies the same files.
CHART_CRDS = REPO / "charts" / "karpy" / "crds"
#: What a cluster upgraded from Karpenter v0.31 has (`--crds v1alpha5`): no NodePool, NodeClaim, EC2NodeClass.
V1ALPHA5_CRDS = ("awsnodetemplates.karpenter.k8s.aws", "provisioners.karpenter.sh")
STATE_FILE = "demo.json"
BIND_TIMEOUT = 120.0


class DemoError(RuntimeError):
    """A step did not happen in time; the message says which."""


def wait_for(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def crd_files(which: str = "all") -> list[Path]:
    """The chart's CRD files, every one (`all`) or the v1alpha5 kinds' only."""
    files = sorted(CHART_CRDS.glob("*.yaml"))
    return files if which == "all" else [f for f in files if f.stem in V1ALPHA5_CRDS]


def flat_kubeconfig(source: Path, target: Path) -> None:
    """`source` with its certificate and key files inlined (`kubectl config view --flatten`), so a
    process that sees none of the run folder (karpy in its image) can use it."""
    import yaml

    config = yaml.safe_load(source.read_text())
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in config.get(section) or []:
            body = entry[key]
            for field in ("certificate-authority", "client-certificate", "client-key"):
                if field in body:
                    body[f"{field}-data"] = base64.b64encode(Path(body.pop(field)).read_bytes()).decode()
    target.write_text(yaml.safe_dump(config))


def karpy_command() -> list[str]:
    """The installed `karpy` console script beside this interpreter, as a user runs it."""
    script = Path(sys.executable).with_name("karpy")
    return [str(script)] if script.exists() else [sys.executable, "-m", "extender.cli.main"]


class Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.run_dir: Path = args.run_dir.resolve()
        self.timeline = Timeline(sys.stdout)
        self.state: dict[str, Any] = {}
        self.started: list[dict[str, Any]] = []  # karpy processes: name, pid, ticks, log
        self.kube: Kube | None = None
        self.observer: Observer | None = None
        self.tail: LogTail | None = None
        self.phases: dict[str, dict[str, Any]] = {}
        self.problems: list[str] = []
        #: The AMI families karpy's nodes booted (show_node_images).
        self.ami_families: list[str] = []
        #: --image: the image, its mounted root filesystem and the working container.
        self.image: karpy_image.Image | None = None
        self.rootfs: Path | None = None
        self.container = ""
        self.metrics_bind = ""

    # --- processes -------------------------------------------------------------------------

    def _karpy(self, *args: str) -> list[str]:
        """The argv of a karpy command: the console script, or the image's entry point."""
        if self.image is None:
            return [*karpy_command(), *args]
        return [*karpy_image.config(self.image)["Entrypoint"], *args]

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str]) -> None:
        log = self.run_dir / "logs" / f"{name}.log"
        full_env = {**os.environ, **env}
        if self.image is not None and self.rootfs is not None:
            # Only the image's environment and karpy's settings, as in a pod; the karpy folder
            # (kubeconfig, certs) is the one host path it sees, like a mounted Secret.
            full_env = {**karpy_image.image_env(karpy_image.config(self.image)), **env}
            argv = karpy_image.chroot_argv(self.rootfs, argv, [self._karpy_dir()])
        proc = procs.spawn(argv, log, env=full_env, cwd=REPO, die_with_parent=not self.args.keep)
        self.started.append(
            {"name": name, "pid": proc.pid, "ticks": procs.start_ticks(proc.pid), "log": str(log)}
        )
        self._save_processes()
        where = f" from image {self.image.ref}" if self.image else ""
        self.timeline.step(f"started {name}{where} (pid {proc.pid}): {' '.join(argv[1:])[-160:]}")

    def _save_processes(self) -> None:
        state: dict[str, Any] = {"processes": self.started}
        if self.image is not None:
            state |= {"image": asdict(self.image), "container": self.container, "rootfs": str(self.rootfs)}
        (self.run_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    def _alive(self, name: str) -> bool:
        entry = next(p for p in self.started if p["name"] == name)
        return procs.is_same_process(entry["pid"], entry["ticks"])

    def _wait_http(self, name: str, url: str, context: ssl.SSLContext | None, timeout: float) -> None:
        def ready() -> bool:
            if not self._alive(name):
                log = next(p["log"] for p in self.started if p["name"] == name)
                raise DemoError(f"{name} exited during start; see {log}")
            return procs.http_ok(url, timeout=1.0, context=context)

        wait_for(ready, timeout, f"{name} at {url}")

    def start_webhook(self) -> None:
        port = procs.free_port()
        cert_dir = self._karpy_dir() / "webhook-certs"
        shutil.rmtree(cert_dir, ignore_errors=True)
        assert self.kube is not None
        names: dict[str, list[str]] = {
            "MutatingWebhookConfiguration": [],
            "ValidatingWebhookConfiguration": [],
        }
        for body in local_webhook_configurations(port):
            self.kube.create_webhook_configuration(body)
            names[body["kind"]].append(body["metadata"]["name"])
        patches = [f"--patch-mutating={n}" for n in names["MutatingWebhookConfiguration"]]
        patches += [f"--patch-validating={n}" for n in names["ValidatingWebhookConfiguration"]]
        self._spawn(
            "karpy-webhook",
            self._karpy(
                "webhook",
                f"--bind=127.0.0.1:{port}",
                "--self-signed",
                "--san=127.0.0.1",
                f"--cert-dir={cert_dir}",
                *patches,
            ),
            self._karpy_env(),
        )
        wait_for(
            lambda: (cert_dir / "ca.crt").exists() or not self._alive("karpy-webhook"), 60, "webhook certs"
        )
        context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        self._wait_http("karpy-webhook", f"https://127.0.0.1:{port}/readyz", context, 60)
        self.timeline.step(f"webhook ready on https://127.0.0.1:{port} (caBundle patched into {names})")

    def _karpy_dir(self) -> Path:
        """What karpy's processes read and write: a self-contained kubeconfig, the webhook's certs,
        the price file; owned by the image's user in --image mode."""
        folder = self.run_dir / "karpy"
        if not folder.exists():
            folder.mkdir(parents=True)
            flat_kubeconfig(Path(self.state["kubeconfig"]), folder / "kubeconfig")
            if self.args.prices:
                shutil.copy(self.args.prices, folder / "prices.json")
            if self.image is not None:
                for path in (folder, *folder.iterdir()):
                    os.chown(path, karpy_image.UID, karpy_image.UID)
        return folder

    def _karpy_env(self) -> dict[str, str]:
        aws = self.state["aws"]
        folder = self._karpy_dir()
        env = {
            "KARPY_KUBECONFIG": str(folder / "kubeconfig"),
            "KARPY_CLUSTER_NAME": self.state["cluster_name"],
            "KARPY_CLUSTER_ENDPOINT": self.state["apiserver_url"],
            "KARPY_NAMESPACE": "karpy",
            "KARPY_LOG_LEVEL": "INFO",
            "KARPY_AWS_REGION": aws["region"],
            "KARPY_AWS_ENDPOINT_URL": aws["endpoint_url"],
            **karpyenv.node_config_env(self.state),
            "KARPY_AWS_INTERRUPTION_QUEUE": aws["queue_url"],
            # moto has no Pricing API; prices come from --prices, else karpy's built-in us-east-1 table.
            "KARPY_AWS_PRICING_API": "false",
            "KARPY_AWS_PRICE_FILE": str(folder / "prices.json") if self.args.prices else "",
            # As Karpenter's getting-started install sets settings.aws.defaultInstanceProfile.
            "KARPY_AWS_DEFAULT_INSTANCE_PROFILE": aws.get("instance_profile", ""),
            "KARPY_LEADER_ELECTION_NAMESPACE": "karpy",
            # moto accepts any credentials; never let boto3 look further (profiles, IMDS).
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        return env

    def start_controller(self) -> None:
        bind = f"127.0.0.1:{self.state['extender_port']}"
        self.metrics_bind = f"127.0.0.1:{procs.free_port()}"
        env = {
            **self._karpy_env(),
            "KARPY_EXTENDER_BIND": bind,
            "KARPY_EXTENDER_METRICS_BIND": self.metrics_bind,
        }
        self._spawn("karpy-controller", self._karpy("controller"), env)
        self._wait_http("karpy-controller", f"http://{bind}/readyz", None, 120)
        self.timeline.step(f"controller ready; kube-scheduler calls its extender at http://{bind}/")

    def stop_karpy(self) -> list[str]:
        stopped = []
        for entry in reversed(self.started):
            if procs.stop_pid(entry["pid"], ticks=entry["ticks"], timeout=20):
                stopped.append(entry["name"])
        return stopped

    # --- the walkthrough -------------------------------------------------------------------

    def _bound(self, seen: Observations, since: float) -> dict[str, list[str]]:
        per_node: dict[str, list[str]] = {}
        for pod in seen.pods.values():
            if pod.bound is not None and pod.seen >= since:
                per_node.setdefault(pod.node, []).append(pod.key)
        return per_node

    def _phase(self, name: str, started: float, replicas: int) -> dict[str, Any]:
        assert self.observer is not None

        def all_bound() -> bool:
            snap = self.observer.snapshot()  # type: ignore[union-attr]
            return sum(len(v) for v in self._bound(snap, started).values()) >= replicas

        wait_for(all_bound, BIND_TIMEOUT, f"{replicas} {APP} pod(s) to be bound ({name})")
        seen = self.observer.snapshot()
        pods = [p for p in seen.pods.values() if p.seen >= started and p.bound is not None]
        per_node = self._bound(seen, started)
        phase = {
            "pods_bound": len(pods),
            "pending_to_bound_seconds": round(max(p.bound for p in pods) - started, 2),  # type: ignore[type-var]
            "nodes": {
                node: {
                    "pods": len(keys),
                    "instance_type": seen.nodes[node].instance_type if node in seen.nodes else "?",
                }
                for node, keys in sorted(per_node.items())
            },
        }
        self.phases[name] = phase
        layout = ", ".join(f"{n} ({v['instance_type']}): {v['pods']}" for n, v in phase["nodes"].items())
        self.timeline.step(
            f"all {replicas} pods bound {phase['pending_to_bound_seconds']}s after the request: {layout}"
        )
        return phase

    def show_node_images(self) -> None:
        """Which AMI family karpy's nodes boot: each Node's AMI annotation, matched to the seeded
        SSM parameter that names it (AL2023 unless the Provisioner says otherwise)."""
        from extender.api.nodeclass import AMI_ID_ANNOTATION

        aws = self.state["aws"]
        by_ami = {ami: key for key, ami in aws["amis"].items()}
        parameter = {ami: name for name, ami in aws["ssm_parameters"].items()}
        families = {}
        for node in self.kube.karpy_nodes():  # type: ignore[union-attr]
            name = node["metadata"]["name"]
            ami = (node["metadata"].get("annotations") or {}).get(AMI_ID_ANNOTATION, "")
            key = by_ami.get(ami, "")
            families[name] = awsseed.AMI_PARAMETERS[key][0] if key else "unknown"
            self.timeline.step(f"{name} boots {ami or '?'} ({families[name]}, SSM {parameter.get(ami, '?')})")
        self.ami_families = sorted(set(families.values()))
        if self.ami_families != ["AL2023"]:
            self.problems.append(
                f"nodes boot {self.ami_families}, expected AL2023 (karpy's default amiFamily)"
            )
        else:
            self.timeline.step(
                "every node boots AL2023 (nodeadm NodeConfig user data), karpy's default amiFamily"
            )

    def show_status(self) -> None:
        argv = [*karpy_command(), "status", f"--kubeconfig={self.state['kubeconfig']}"]
        if self.args.prices:
            argv.append(f"--prices={self.args.prices}")
        # No --metrics: karpy status finds the local controller by its KARPY_EXTENDER_METRICS_BIND.
        env = {**os.environ, "KARPY_EXTENDER_METRICS_BIND": self.metrics_bind}
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
        self.timeline.block("status", "$ karpy status\n" + (result.stdout or result.stderr))

    def walkthrough(self) -> None:
        kube, ttl = self.kube, self.args.ttl
        assert kube is not None
        self.timeline.step(f"create deployment {APP} (pause, 1 CPU, 0 replicas)")
        kube.create_deployment(inflate(0))

        self.timeline.step(f"scale {APP} to 5 replicas")
        started = time.time()
        kube.scale(5)
        self._phase("scale_up", started, 5)
        self.show_node_images()
        self.show_status()

        self.timeline.step(
            f"redeploy {APP} with nodeSelector node.kubernetes.io/instance-type: {SELECTED_TYPE}"
        )
        kube.delete_deployment()
        wait_for(lambda: not kube.pods(), 60, f"the old {APP} pods to go")
        started = time.time()
        kube.create_deployment(inflate(5, {"node.kubernetes.io/instance-type": SELECTED_TYPE}))
        phase = self._phase("redeploy", started, 5)
        self.show_status()
        layout = sorted((v["pods"] for v in phase["nodes"].values()), reverse=True)
        types = {v["instance_type"] for v in phase["nodes"].values()}
        if layout != [3, 2] or types != {SELECTED_TYPE}:
            self.problems.append(
                f"redeploy: expected 3 + 2 pods on two {SELECTED_TYPE} nodes, got {phase['nodes']}"
            )

        self.timeline.step(f"delete {APP}; empty nodes should go {ttl}s after they empty")
        kube.delete_deployment()
        wait_for(lambda: not kube.karpy_nodes(), ttl + 120, "every karpy node to be terminated", interval=0.5)
        time.sleep(2 * self.observer.interval if self.observer else 0)
        self.show_status()

    # --- run / cleanup ---------------------------------------------------------------------

    def up(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.timeline.step(
            f"bringing up the local control plane in {self.run_dir} (first run builds it from Go)"
        )
        self.timeline.flush()
        self.state = localcluster.up(self.run_dir, die_with_parent=not self.args.keep)
        self.timeline.step(f"cluster ready in {self.state['ready_seconds']}s: {self.state['apiserver_url']}")
        self.kube = Kube(self.state["kubeconfig"])
        self.kube.create_file(REPO / "manifests" / "namespace.yaml")
        files = crd_files(self.args.crds)
        for path in files:
            self.kube.create_file(path)
            crd = path.stem
            wait_for(lambda crd=crd: self.kube.crd_established(crd), 30, f"the CRD {crd}")  # type: ignore[union-attr,misc]
        self.timeline.step(
            f"applied manifests/namespace.yaml and the chart's CRDs: {', '.join(f.stem for f in files)}"
        )
        if self.args.image:
            self.image = karpy_image.build()  # the recorded image when the tree is unchanged
            self.container, self.rootfs = karpy_image.mount(self.image)
            self._save_processes()
        logs = self.run_dir / "logs"
        for name in ("karpy-webhook", "karpy-controller"):
            (logs / f"{name}.log").write_bytes(b"")
        self.tail = LogTail(
            self.timeline,
            {"webhook": logs / "karpy-webhook.log", "controller": logs / "karpy-controller.log"},
        )
        self.tail.start()
        self.start_webhook()
        self.kube.label_namespace(NAMESPACE, {"karpenter.sh/provisioning": "enabled"})
        self.start_controller()
        if self.args.api == "v1":
            for body in nodepool(self.state["cluster_name"], self.args.ttl):
                created = self.kube.create_provisioner(body)
            spec = created["spec"]
            requirements = [
                f"{r['key']} {r['operator']} {r.get('values')}"
                for r in spec["template"]["spec"]["requirements"]
            ]
            self.timeline.step(
                f"applied EC2NodeClass and NodePool default (karpenter.sh/v1) through the webhook: "
                f"{'; '.join(requirements)}; disruption {spec['disruption']}"
            )
        else:
            created = self.kube.create_provisioner(provisioner(self.state["cluster_name"], self.args.ttl))
            requirements = [
                f"{r['key']} {r['operator']} {r.get('values')}" for r in created["spec"]["requirements"]
            ]
            self.timeline.step(f"applied Provisioner default through the webhook: {'; '.join(requirements)}")
        self.observer = Observer(self.timeline, self.kube.karpy_nodes, self.kube.pods, self._price)
        self.observer.start()

    def _price(self, node: Mapping[str, Any]) -> tuple[float, str]:
        from extender.cli.status import node_row
        from extender.scheduling.pricing import PriceBook

        book = PriceBook.from_file(self.args.prices) if self.args.prices else PriceBook()
        row = node_row(node, 0, book, time.time())
        return row.price, row.price_source

    def summary(self, wall: float) -> dict[str, Any]:
        seen = self.observer.snapshot() if self.observer else Observations()
        summary = build_summary(
            seen,
            phases=self.phases,
            problems=self.problems,
            ttl=self.args.ttl,
            wall=wall,
            cluster_ready=self.state.get("ready_seconds"),
            log_counts={p: len(self.timeline.since("controller", p)) for p in KARPY_PHRASES},
            processes=[{"name": p["name"], "pid": p["pid"]} for p in self.started],
        )
        summary["ami_families"] = self.ami_families
        return summary

    def keep_notice(self) -> str:
        return "\n".join(
            [
                "",
                "KEEP: the cluster and karpy are still running.",
                f"  export KUBECONFIG={self.state.get('kubeconfig')}",
                f"  {build.binary('kubectl')} get nodes,pods -A",
                f"  KARPY_EXTENDER_METRICS_BIND={self.metrics_bind} karpy status "
                f"--kubeconfig {self.state.get('kubeconfig')}",
                f"  logs: {self.run_dir / 'logs'}",
                f"  stop: make demo-down   (or: python -m hack.demo down --run-dir {self.run_dir})",
            ]
        )

    def cleanup(self) -> list[str]:
        for worker in (self.observer, self.tail):
            if worker is not None:
                worker.stop()
        self.timeline.flush()
        if self.kube is not None:
            self.kube.close()
        if self.args.keep:
            return []
        stopped = self.stop_karpy()
        if self.image is not None and self.rootfs is not None:
            karpy_image.unmount(self.image, self.container, self.rootfs)
        stopped += localcluster.down(self.run_dir, quiet=True)
        self.timeline.step(f"stopped {', '.join(stopped) or 'nothing'}")
        cluster = (localcluster.load_state(self.run_dir) or {}).get("processes", {})
        left = [p["name"] for p in self.started if procs.is_same_process(p["pid"], p["ticks"])]
        return left + [name for name, p in cluster.items() if procs.is_same_process(p["pid"], p.get("ticks"))]


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    demo = Demo(args)
    started = time.monotonic()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    code = 0
    try:
        demo.up()
        demo.walkthrough()
    except KeyboardInterrupt:
        demo.problems.append("interrupted")
        code = 130
    except (DemoError, procs.ComponentError) as err:
        demo.problems.append(str(err))
        code = 1
    finally:
        # A second Ctrl-C must not leave processes behind half-way through the cleanup.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        summary = demo.summary(time.monotonic() - started)
        left = demo.cleanup()
        summary["processes_left"] = left
        if left and not args.keep:
            summary["problems"].append(f"still running: {left}")
        summary["ok"] = not summary["problems"]
        demo.timeline.close()
        print(render_summary(summary), flush=True)
        if args.keep and demo.state:
            print(demo.keep_notice(), flush=True)
        if args.json_summary:
            Path(args.json_summary).write_text(json.dumps(summary, indent=2) + "\n")
    return code or (0 if summary["ok"] else 1)


def down(run_dir: Path) -> int:
    """Stop what `--keep` left running: karpy's processes, then the cluster."""
    stopped = []
    with suppress(OSError, ValueError):
        state = json.loads((run_dir / STATE_FILE).read_text())
        for entry in state.get("processes", []):
            if procs.stop_pid(entry["pid"], ticks=entry.get("ticks"), timeout=20):
                stopped.append(entry["name"])
        if state.get("container"):
            image = karpy_image.Image(**state["image"])
            karpy_image.unmount(image, state["container"], Path(state["rootfs"]))
    print(f"stopped: {', '.join(stopped) or 'no karpy process was running'}")
    localcluster.down(run_dir)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack.demo", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=("run", "down"), default="run")
    parser.add_argument(
        "--run-dir", type=Path, default=REPO / ".run" / "demo", help="state, logs (default .run/demo)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the cluster and karpy running at the end")
    parser.add_argument(
        "--ttl", type=int, default=30, help="the Provisioner's ttlSecondsAfterEmpty (default 30)"
    )
    parser.add_argument(
        "--prices",
        help='{"onDemand": {...}, "spot": {...}} price file for karpy (default: its built-in table)',
    )
    parser.add_argument("--json-summary", help="also write the summary as JSON to this file")
    parser.add_argument(
        "--api",
        choices=("v1alpha5", "v1"),
        default="v1alpha5",
        help="the default as a v1alpha5 Provisioner, or a v1 NodePool + EC2NodeClass (WhenEmpty after --ttl)",
    )
    parser.add_argument(
        "--image",
        action="store_true",
        help="run karpy from the image `make image` built (chrooted, read-only root, uid 65532; needs root)",
    )
    parser.add_argument(
        "--crds",
        choices=("all", "v1alpha5"),
        default="all",
        help="the chart's CRDs: all (default), or v1alpha5's only (a cluster upgraded from Karpenter v0.31)",
    )
    args = parser.parse_args(argv)
    if args.command == "down":
        return down(args.run_dir.resolve())
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
