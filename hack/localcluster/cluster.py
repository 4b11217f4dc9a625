"""Bring the local proving ground up, report on it, and take it down by PID.

``python -m hack.localcluster.cluster up|down|status`` (``make cluster-up`` etc.). Everything lives in
one run folder, ``$KARPY_RUN_DIR`` or ``<repo>/.run/cluster``::

    state.json          pids (+ start ticks), ports, URLs, kubeconfig, CA paths, extender port, AWS ids
    kubeconfig          admin (system:masters) kubeconfig
    pki/                CA, apiserver serving cert, client certs, SA signing keys
    etcd-data/          wiped on every `up`
    logs/<component>.log
    scheduler-config.yaml, kwok.yaml, *.kubeconfig

Components, in start order, all bound to 127.0.0.1: moto (seeded by awsseed), etcd, kube-apiserver,
kube-controller-manager, kube-scheduler (extender at http://127.0.0.1:<extender_port>/), kwok
(manages only nodes labelled karpy.sh/managed=true). Every wait is bounded; a failure prints one
line naming the component and its log, stops what was started, and exits 1.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import ssl
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from hack.localcluster import awsseed, build, pki, procs
from hack.localcluster.procs import LOOPBACK, ComponentError

REPO = Path(__file__).resolve().parents[2]
MANAGED_LABEL = "karpy.sh/managed"
#: extender.api.labels.GUARDED_RESOURCE: only pods requesting it are sent to karpy's extender.
GUARDED_RESOURCE = "karpy.sh/guarded"
DEFAULT_EXTENDER_PORT = 8088
STOP_ORDER = ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "moto")
KCM_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "node-lifecycle-controller",
    "namespace-controller",
    "serviceaccount-token-controller",
    "serviceaccount-controller",
    "daemonset-controller",
    "job-controller",
    "statefulset-controller",
    "disruption-controller",
    "pod-garbage-collector-controller",
    "taint-eviction-controller",
    "endpointslice-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "ttl-after-finished-controller",
    # Binds PersistentVolumes to claims, as in any cluster: volume topology is proven on real binds.
    "persistentvolume-binder-controller",
)
#: kube-controller-manager's --node-monitor-grace-period (default 50 s). kwok renews each managed
#: node's Lease every quarter of its nodeLeaseDurationSeconds (kwok-stages.yaml: 20 s, so every 5 s,
#: as a kubelet renews its 40 s Lease every 10 s): 25 s is five renewals, the default's ratio, so a
#: healthy node goes Unknown only if kwok misses four renewals in a row.
NODE_MONITOR_GRACE = 25
TIMEOUTS = {
    "moto": 60.0,
    "etcd": 30.0,
    "kube-apiserver": 120.0,
    "kube-controller-manager": 60.0,
    "kube-scheduler": 60.0,
    "kwok": 30.0,
}


def run_dir() -> Path:
    return Path(os.environ.get("KARPY_RUN_DIR") or REPO / ".run" / "cluster").resolve()


def state_path(folder: Path) -> Path:
    return folder / "state.json"


def load_state(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(folder).read_text())
    except (OSError, ValueError):
        return None


def _save(folder: Path, state: dict[str, Any]) -> None:
    tmp = state_path(folder).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, state_path(folder))


def _live(state: dict[str, Any]) -> list[str]:
    return [
        name
        for name, proc in state.get("processes", {}).items()
        if procs.is_same_process(proc["pid"], proc.get("ticks"))
    ]


class _Starter:
    """Starts components one by one, recording each PID in state.json before waiting on it."""

    def __init__(self, folder: Path, state: dict[str, Any], die_with_parent: bool) -> None:
        self.folder, self.state, self.die_with_parent = folder, state, die_with_parent

    def log(self, name: str) -> Path:
        return self.folder / "logs" / f"{name}.log"

    def start(self, name: str, argv: list[str], port: int | None = None) -> int:
        if port is not None and procs.port_in_use(port):
            raise ComponentError(name, f"port {port} on {LOOPBACK} is already in use", self.log(name))
        proc = procs.spawn(argv, self.log(name), cwd=self.folder, die_with_parent=self.die_with_parent)
        self.record(name, proc.pid, port)
        return proc.pid

    def record(self, name: str, pid: int, port: int | None) -> None:
        self.state["processes"][name] = {
            "pid": pid,
            "ticks": procs.start_ticks(pid),
            "port": port,
            "log": str(self.log(name)),
        }
        _save(self.folder, self.state)

    def wait(self, name: str, check: Any, what: str) -> None:
        procs.wait_until(
            check,
            timeout=TIMEOUTS[name],
            component=name,
            what=what,
            log_path=self.log(name),
            pid=self.state["processes"][name]["pid"],
        )


def _tls_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def _insecure_context() -> ssl.SSLContext:
    # kcm and scheduler serve self-signed certs from their --cert-dir; only liveness is checked.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _claims_dir() -> Path:
    return build.cache_root() / "extender-claims"


def _claim_path(folder: Path) -> Path:
    return _claims_dir() / f"{hashlib.sha1(str(folder).encode()).hexdigest()[:16]}.json"


def _claimed_ports(folder: Path) -> set[int]:
    """Ports recorded by other live runs (nobody listens on the extender's until karpy starts, on
    the components' until each starts): a run whose components are up, or one still starting them
    (its claiming process alive)."""
    claimed = set()
    for claim in _claims_dir().glob("*.json"):
        try:
            other = json.loads(claim.read_text())
        except (OSError, ValueError):
            continue
        other_dir = Path(other.get("run_dir", ""))
        if other_dir == folder:
            continue
        other_state = load_state(other_dir)
        pid = int(other.get("pid") or 0)
        starting = pid > 0 and procs.pid_alive(pid)
        if (other_state and _live(other_state)) or starting:
            claimed.add(int(other["extender_port"]))
            claimed.update(int(port) for port in other.get("ports", ()))
        else:
            claim.unlink(missing_ok=True)
    return claimed


def _claim_ports(folder: Path, names: Sequence[str]) -> tuple[int, dict[str, int]]:
    """The extender's port (8088 unless another run holds it) and one port per component, none
    another live run claimed. Two clusters starting at once (pytest-xdist's workers) both saw 8088
    free before either wrote its claim: the check and the claim are one step under an exclusive
    lock."""
    _claims_dir().mkdir(parents=True, exist_ok=True)
    with (_claims_dir() / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        claimed = _claimed_ports(folder)
        wanted = os.environ.get("KARPY_EXTENDER_PORT")
        if wanted:
            port = int(wanted)
        elif DEFAULT_EXTENDER_PORT not in claimed and not procs.port_in_use(DEFAULT_EXTENDER_PORT):
            port = DEFAULT_EXTENDER_PORT
        else:
            port = procs.free_ports(1, exclude=claimed)[0]
        ports = dict(zip(names, procs.free_ports(len(names), exclude=claimed | {port}), strict=True))
        claim = {
            "run_dir": str(folder),
            "extender_port": port,
            "ports": sorted(ports.values()),
            "pid": os.getpid(),
        }
        _claim_path(folder).write_text(json.dumps(claim))
    return port, ports


def up(
    folder: Path | None = None,
    *,
    cluster_name: str = "karpy",
    die_with_parent: bool = False,
    quiet: bool = False,
    extender_tls: bool = False,
) -> dict[str, Any]:
    """Start everything and return the state (also in state.json). Raises ComponentError.

    `extender_tls`: kube-scheduler calls the extender over HTTPS, trusting the cluster CA; karpy
    serves it with the apiserver's serving certificate (SAN 127.0.0.1), recorded as `extender_tls`."""
    folder = folder or run_dir()
    say = (lambda _msg: None) if quiet else (lambda msg: print(msg, flush=True))
    previous = load_state(folder)
    if previous and _live(previous):
        raise ComponentError(
            "cluster",
            f"already running in {folder} ({', '.join(_live(previous))}); "
            "run `make cluster-down` or set KARPY_RUN_DIR to another folder",
        )
    started = time.monotonic()
    build.ensure()
    binaries = {
        name: str(build.binary(name))
        for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")
    }
    for sub in ("etcd-data", "logs", "pki", "certs"):
        shutil.rmtree(folder / sub, ignore_errors=True)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    names = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    extender_port, ports = _claim_ports(folder, names)
    apiserver_url = f"https://{LOOPBACK}:{ports['kube-apiserver']}"
    state: dict[str, Any] = {
        "run_dir": str(folder),
        "cluster_name": cluster_name,
        "apiserver_url": apiserver_url,
        "kubeconfig": str(folder / "kubeconfig"),
        "extender_port": extender_port,
        "extender_url": f"{'https' if extender_tls else 'http'}://{LOOPBACK}:{extender_port}/",
        "managed_label": f"{MANAGED_LABEL}=true",
        "binaries": binaries,
        "ports": ports,
        "processes": {},
        "started_at": time.time(),
    }
    _save(folder, state)
    starter = _Starter(folder, state, die_with_parent)
    try:
        _start_all(starter, folder, state, binaries, ports, cluster_name, say)
    except BaseException:
        down(folder, quiet=True)
        raise
    state["ready_seconds"] = round(time.monotonic() - started, 1)
    _save(folder, state)
    say(
        f"cluster ready in {state['ready_seconds']}s: {apiserver_url} (KUBECONFIG={state['kubeconfig']}, "
        f"extender {state['extender_url']}, moto {state['aws']['endpoint_url']})"
    )
    return state


def _start_all(
    starter: _Starter,
    folder: Path,
    state: dict[str, Any],
    binaries: dict[str, str],
    ports: dict[str, int],
    cluster_name: str,
    say: Any,
) -> None:
    say("starting moto")
    moto = awsseed.start_moto(
        starter.log("moto"), timeout=TIMEOUTS["moto"], die_with_parent=starter.die_with_parent
    )
    starter.record("moto", moto.pid, moto.port)
    certs = pki.create(folder / "pki")
    state["pki"] = {
        "ca_cert": str(certs.ca_cert),
        "ca_key": str(certs.ca_key),
        "admin_cert": str(certs.client_cert("admin")),
        "admin_key": str(certs.client_key("admin")),
    }
    if state["extender_url"].startswith("https"):
        state["extender_tls"] = {
            "cert": str(certs.serving_cert),
            "key": str(certs.serving_key),
            "ca": str(certs.ca_cert),
        }
    url = state["apiserver_url"]
    kubeconfigs = {
        who: pki.write_kubeconfig(folder / f"{who}.kubeconfig", server=url, pki=certs, who=who)
        for who in pki.CLIENTS
    }
    shutil.copy(kubeconfigs["admin"], folder / "kubeconfig")

    say("starting etcd")
    etcd_url = f"http://{LOOPBACK}:{ports['etcd']}"
    peer_url = f"http://{LOOPBACK}:{ports['etcd-peer']}"
    starter.start(
        "etcd",
        [
            binaries["etcd"],
            "--name=karpy",
            f"--data-dir={folder / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=karpy={peer_url}",
            "--initial-cluster-state=new",
            # A disposable test store: fsync only costs time on this shared 2-core box.
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
        ports["etcd"],
    )
    say("seeding moto")
    state["moto_endpoint"] = moto.endpoint_url
    state["aws"] = awsseed.seed(moto.endpoint_url, cluster_name=cluster_name).to_dict()
    _save(folder, state)
    starter.wait("etcd", lambda: procs.http_ok(f"{etcd_url}/health"), "healthy")

    say("starting kube-apiserver")
    starter.start(
        "kube-apiserver",
        [
            binaries["kube-apiserver"],
            f"--etcd-servers={etcd_url}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={ports['kube-apiserver']}",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            f"--client-ca-file={certs.ca_cert}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={certs.sa_pub}",
            f"--service-account-signing-key-file={certs.sa_key}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            "--allow-privileged=true",
            "--profiling=false",
            # The EndpointSlice for the `kubernetes` Service may not hold a loopback address.
            "--endpoint-reconciler-type=none",
        ],
        ports["kube-apiserver"],
    )
    ca = _tls_context(certs.ca_cert)
    starter.wait("kube-apiserver", lambda: procs.http_ok(f"{url}/readyz", context=ca), "ready (/readyz)")

    say("starting kube-controller-manager")
    kcm = str(kubeconfigs["controller-manager"])
    starter.start(
        "kube-controller-manager",
        [
            binaries["kube-controller-manager"],
            f"--kubeconfig={kcm}",
            f"--authentication-kubeconfig={kcm}",
            f"--authorization-kubeconfig={kcm}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={ports['kube-controller-manager']}",
            f"--cert-dir={folder / 'certs' / 'kcm'}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={certs.sa_key}",
            f"--root-ca-file={certs.ca_cert}",
            f"--controllers={','.join(KCM_CONTROLLERS)}",
            # A node whose Lease stops (kwok no longer plays it) turns Ready=Unknown after this:
            # the default 50 s was most of each NotReady test; see NODE_MONITOR_GRACE.
            f"--node-monitor-grace-period={NODE_MONITOR_GRACE}s",
            "--profiling=false",
        ],
        ports["kube-controller-manager"],
    )

    say("starting kube-scheduler")
    _start_scheduler(
        starter,
        state,
        kubeconfigs["scheduler"],
        _scheduler_config(kubeconfigs["scheduler"], state["extender_url"], state.get("extender_tls")),
    )

    say("starting kwok")
    kwok_config = folder / "kwok.yaml"
    kwok_config.write_text(_kwok_config(ports["kwok"]))
    starter.start(
        "kwok",
        [
            binaries["kwok"],
            f"--kubeconfig={kubeconfigs['kwok']}",
            f"--config={kwok_config}",
        ],
        ports["kwok"],
    )

    insecure = _insecure_context()
    for name in ("kube-controller-manager", "kube-scheduler"):
        starter.wait(
            name,
            lambda n=name: procs.http_ok(f"https://{LOOPBACK}:{ports[n]}/healthz", context=insecure),
            "healthy (/healthz)",
        )
    starter.wait(
        "kwok", lambda: procs.http_ok(f"http://{LOOPBACK}:{ports['kwok']}/healthz"), "healthy (/healthz)"
    )


def _start_scheduler(
    starter: _Starter, state: dict[str, Any], kubeconfig: Path, config: dict[str, Any]
) -> None:
    folder, ports = starter.folder, state["ports"]
    scheduler_config = folder / "scheduler-config.yaml"
    scheduler_config.write_text(yaml.safe_dump(config, sort_keys=False))
    sched = str(kubeconfig)
    starter.start(
        "kube-scheduler",
        [
            state["binaries"]["kube-scheduler"],
            f"--config={scheduler_config}",
            f"--authentication-kubeconfig={sched}",
            f"--authorization-kubeconfig={sched}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={ports['kube-scheduler']}",
            f"--cert-dir={folder / 'certs' / 'scheduler'}",
            "--profiling=false",
        ],
        ports["kube-scheduler"],
    )


def stop_scheduler(folder: Path) -> dict[str, Any]:
    """Stop the recorded kube-scheduler (the rest keeps running); returns the state."""
    state = load_state(folder)
    if not state or "kube-scheduler" not in state.get("processes", {}):
        raise ComponentError("kube-scheduler", f"no cluster recorded in {folder}")
    entry = state["processes"]["kube-scheduler"]
    procs.stop_pid(entry["pid"], ticks=entry.get("ticks"), timeout=10.0)
    return state


def restart_scheduler(
    folder: Path,
    *,
    extender: bool = True,
    prioritize: bool = False,
    managed: bool = True,
    client_qps: float | None = None,
    client_burst: int | None = None,
    die_with_parent: bool = False,
    extender_url: str | None = None,
) -> None:
    """Stop kube-scheduler if it runs and start it again, with or without karpy's extender and
    with its client QPS/burst set (None: kube-scheduler's defaults, 50/100); waits until healthy.
    For benchmarks that compare configurations on one cluster (benchmarks/schedpath.py).
    `extender_url`: another plain-HTTP extender in karpy's place (benchmarks/noop_extender.py)."""
    state = stop_scheduler(folder)
    kubeconfig = folder / "scheduler.kubeconfig"
    config = _scheduler_config(
        kubeconfig,
        extender_url or state["extender_url"],
        None if extender_url else state.get("extender_tls"),
        extender=extender,
        prioritize=prioritize,
        managed=managed,
        client_qps=client_qps,
        client_burst=client_burst,
    )
    # A fresh port: the old one may linger in TIME_WAIT.
    state["ports"]["kube-scheduler"] = port = procs.free_port()
    starter = _Starter(folder, state, die_with_parent)
    _start_scheduler(starter, state, kubeconfig, config)
    starter.wait(
        "kube-scheduler",
        lambda: procs.http_ok(f"https://{LOOPBACK}:{port}/healthz", context=_insecure_context()),
        "healthy (/healthz)",
    )


def _scheduler_config(
    kubeconfig: Path,
    extender_url: str,
    tls: dict[str, str] | None,
    *,
    extender: bool = True,
    prioritize: bool = False,
    managed: bool = True,
    client_qps: float | None = None,
    client_burst: int | None = None,
) -> dict[str, Any]:
    """`extender`: register karpy's extender as the shipped config does (manifests/scheduler: its
    filter verb, `managed`: only for pods requesting `karpy.sh/guarded`); `managed=False,
    prioritize=True`: filter and prioritize for every pod (docs/scheduler-path.md's every-pod
    configuration, which benchmarks/schedpath.py switches to);
    `client_qps`/`client_burst`: kube-scheduler's API client rate (clientConnection.qps/burst;
    None keeps its defaults, 50/100)."""
    connection: dict[str, Any] = {"kubeconfig": str(kubeconfig)}
    if client_qps is not None:
        connection["qps"] = client_qps
    if client_burst is not None:
        connection["burst"] = client_burst
    extension: dict[str, Any] = {
        "urlPrefix": extender_url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": 1,
        "enableHTTPS": tls is not None,
        "nodeCacheCapable": True,
        "ignorable": True,
        "httpTimeout": "1s",
    }
    if tls is not None:
        # Without a CA kube-scheduler skips verification altogether (insecure): always give one.
        extension["tlsConfig"] = {"caFile": tls["ca"]}
    if not prioritize:
        del extension["prioritizeVerb"], extension["weight"]
    if managed:
        extension["managedResources"] = [{"name": GUARDED_RESOURCE, "ignoredByScheduler": True}]
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": connection,
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}],
    }
    if extender:
        config["extenders"] = [extension]
    return config


def _kwok_config(port: int) -> str:
    """KwokConfiguration plus the stages kwok plays for managed nodes and their pods."""
    return (
        Path(__file__)
        .with_name("kwok-stages.yaml")
        .read_text()
        .replace("@SERVER_ADDRESS@", f"{LOOPBACK}:{port}")
        .replace("@MANAGED_SELECTOR@", f"{MANAGED_LABEL}=true")
    )


def down(folder: Path | None = None, *, quiet: bool = False, timeout: float = 10.0) -> list[str]:
    """Stop every recorded process (also after crashes); returns the names that were still running."""
    folder = folder or run_dir()
    state = load_state(folder)
    if not state:
        if not quiet:
            print(f"no cluster state in {folder}")
        return []
    stopped = []
    entries = state.get("processes", {})
    for name in sorted(entries, key=lambda n: STOP_ORDER.index(n) if n in STOP_ORDER else -1):
        entry = entries[name]
        if procs.stop_pid(entry["pid"], ticks=entry.get("ticks"), timeout=timeout):
            stopped.append(name)
    _claim_path(folder).unlink(missing_ok=True)
    state["stopped_at"] = time.time()
    _save(folder, state)
    if not quiet:
        print(f"stopped: {', '.join(stopped) or 'nothing was running'} ({folder})")
    return stopped


def status(folder: Path | None = None) -> int:
    folder = folder or run_dir()
    state = load_state(folder)
    if not state:
        print(f"no cluster state in {folder}")
        return 1
    print(
        f"run dir {folder}\napiserver {state['apiserver_url']}  kubeconfig {state['kubeconfig']}  "
        f"extender port {state['extender_port']}"
    )
    print(f"{'component':<26}{'pid':>8}{'port':>7}{'rss MiB':>9}  state")
    running = 0
    for name, entry in state.get("processes", {}).items():
        alive = procs.is_same_process(entry["pid"], entry.get("ticks"))
        running += alive
        rss = procs.rss_kib(entry["pid"]) if alive else None
        rss_text = f"{rss / 1024:.0f}" if rss else "-"
        print(
            f"{name:<26}{entry['pid']:>8}{entry.get('port') or '-':>7}{rss_text:>9}  "
            f"{'running' if alive else 'stopped'}"
        )
    return 0 if running == len(state.get("processes", {})) and running else 3


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument(
        "--extender-tls", action="store_true", help="up: kube-scheduler calls the extender over HTTPS"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(extender_tls=args.extender_tls)
        elif args.command == "down":
            down()
        else:
            return status()
    except ComponentError as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; stopped what was started", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
