"""What `make demo` shows while it runs: one timestamped timeline, fed by three sources.

- the demo's own steps (`Timeline.step`);
- karpy's log lines, tailed from its log files and filtered to the lines Karpenter 0.5 prints
  (found pods, computed packing, launched instance, bound pods, TTL, cordon, delete) plus any
  warning or error (`LogTail`);
- what the API server says, polled: nodes appearing/disappearing, pods bound, nodes going empty
  (`Observer`), which also keeps the figures the summary is made of.
"""

from __future__ import annotations

import heapq
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from extender.api.labels import OWNER_LABELS

KARPY_LINES = re.compile(
    r"Found \d+ provisionable pod|Computed packing|Launched instance|Launched \d+ replacement|"
    r"Bound \d+ pod|Added TTL|Removed emptiness TTL|Triggering termination|Cordoned node|Deleted node|"
    r"\b(WARNING|ERROR|CRITICAL)\b|Traceback"
)
# karpy's format is "<asctime>\t<level>\t<logger>\t<message>"; show level + message.
_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:,.]+\s+")
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})")


def logged_at(line: str) -> float | None:
    """The time a karpy log line was written (logging's local-time asctime), or None."""
    match = _LOG_TIME.match(line)
    if not match:
        return None
    return time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")) + int(match.group(2)) / 1000


class Timeline:
    """Prints `HH:MM:SS.mmm  +SS.Ss  source  text` lines, thread-safe, in time order; keeps them.

    Sources report late (a log line is read up to a poll interval after it was written), so lines
    wait `delay` seconds in a heap and are printed oldest first by a printer thread.
    """

    def __init__(self, out: TextIO, started: float | None = None, delay: float = 0.6) -> None:
        self.out, self.delay = out, delay
        self.started = time.time() if started is None else started
        self.entries: list[tuple[float, str, str]] = []
        self._pending: list[tuple[float, int, str, str, tuple[str, ...]]] = []
        self._seq = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._printer = threading.Thread(target=self._print_loop, name="demo-timeline", daemon=True)
        self._printer.start()

    def add(self, source: str, text: str, at: float | None = None, more: tuple[str, ...] = ()) -> None:
        at = time.time() if at is None else at
        with self._lock:
            self.entries.append((at, source, text))
            self._seq += 1
            heapq.heappush(self._pending, (at, self._seq, source, text, more))

    def step(self, text: str) -> None:
        self.add("demo", text)

    def block(self, source: str, text: str) -> None:
        """A multi-line block (e.g. `karpy status` output), indented under one timestamp."""
        lines = text.rstrip("\n").splitlines() or [""]
        self.add(source, lines[0], more=tuple(lines[1:]))

    def since(self, source: str, pattern: str) -> list[tuple[float, str]]:
        with self._lock:
            return [(at, text) for at, src, text in self.entries if src == source and pattern in text]

    def flush(self, until: float = float("inf")) -> None:
        with self._lock:
            while self._pending and self._pending[0][0] <= until:
                at, _, source, text, more = heapq.heappop(self._pending)
                clock = time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at % 1 * 1000):03d}"
                print(f"{clock} {at - self.started:+8.1f}s  {source:<10} {text}", file=self.out)
                for line in more:
                    print(f"{'':<32}{line}", file=self.out)
            self.out.flush()

    def _print_loop(self) -> None:
        while not self._stopped.wait(0.1):
            self.flush(time.time() - self.delay)

    def close(self) -> None:
        self._stopped.set()
        self._printer.join(timeout=5)
        self.flush()


class LogTail(threading.Thread):
    """Follows log files from their current end and adds the interesting lines to the timeline."""

    def __init__(self, timeline: Timeline, files: Mapping[str, Path], interval: float = 0.1) -> None:
        super().__init__(name="demo-logtail", daemon=True)
        self.timeline, self.interval = timeline, interval
        self.files = dict(files)
        self.offsets = {
            name: (path.stat().st_size if path.exists() else 0) for name, path in self.files.items()
        }
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.poll()
            self.stopped.wait(self.interval)
        self.poll()

    def poll(self) -> None:
        for name, path in self.files.items():
            try:
                with path.open("rb") as handle:
                    handle.seek(self.offsets[name])
                    data = handle.read()
            except OSError:
                continue
            complete = data.rpartition(b"\n")[0]
            if not complete:
                continue
            self.offsets[name] += len(complete) + 1
            for raw in complete.decode("utf-8", "replace").splitlines():
                if KARPY_LINES.search(raw):
                    self.timeline.add(name, _LOG_PREFIX.sub("", raw).replace("\t", " "), logged_at(raw))

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


@dataclass
class NodeRecord:
    name: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    price_source: str
    seen: float
    pods_max: int = 0
    #: The owner label as `key=value` (provisioner-name for a Provisioner's node, nodepool for a NodePool's).
    owner: str = ""
    empty_since: float | None = None
    deleted: float | None = None


@dataclass
class PodRecord:
    key: str
    seen: float
    bound: float | None = None
    node: str = ""


@dataclass
class Observations:
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    pods: dict[str, PodRecord] = field(default_factory=dict)


class Observer(threading.Thread):
    """Polls karpy's nodes and the demo namespace's pods; records and announces every change.

    `price` maps a Node (API JSON) to (USD/h, source). `list_nodes`/`list_pods` return API JSON.
    """

    def __init__(
        self,
        timeline: Timeline,
        list_nodes: Callable[[], Iterable[Mapping[str, Any]]],
        list_pods: Callable[[], Iterable[Mapping[str, Any]]],
        price: Callable[[Mapping[str, Any]], tuple[float, str]],
        interval: float = 0.2,
    ) -> None:
        super().__init__(name="demo-observer", daemon=True)
        self.timeline, self.interval = timeline, interval
        self.list_nodes, self.list_pods, self.price = list_nodes, list_pods, price
        self.seen = Observations()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.poll()
            except Exception as err:
                self.errors += 1
                if self.errors in (1, 10, 100):
                    self.timeline.add("observer", f"poll failed ({self.errors}x): {err}")
            self.stopped.wait(self.interval)

    def poll(self) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.list_nodes()}
        pods = list(self.list_pods())
        # Stamped after the lists: a poll begun before a phase started must not date that phase's
        # new pods before its start (the phase counts only pods seen after it).
        now = time.time()
        with self.lock:
            self._nodes(nodes, now)
            self._pods(pods, now)
            self._emptiness(pods, now)

    def _nodes(self, nodes: Mapping[str, Mapping[str, Any]], now: float) -> None:
        for name, node in nodes.items():
            if name in self.seen.nodes:
                continue
            labels = node["metadata"].get("labels") or {}
            price, source = self.price(node)
            record = NodeRecord(
                name=name,
                instance_type=labels.get("node.kubernetes.io/instance-type", "?"),
                zone=labels.get("topology.kubernetes.io/zone", "?"),
                capacity_type=labels.get("karpenter.sh/capacity-type", "?"),
                price=price,
                price_source=source,
                seen=now,
                owner=next((f"{k}={labels[k]}" for k in OWNER_LABELS if k in labels), ""),
            )
            self.seen.nodes[name] = record
            self.timeline.add(
                "cluster",
                f"node {name} created: {record.instance_type} in {record.zone}, {record.capacity_type}, "
                f"${price:.4f}/h ({source})",
                now,
            )
        for record in self.seen.nodes.values():
            if record.deleted is None and record.name not in nodes:
                record.deleted = now
                after = f", {now - record.empty_since:.1f}s after it went empty" if record.empty_since else ""
                self.timeline.add("cluster", f"node {record.name} is gone{after}", now)

    def _pods(self, pods: Iterable[Mapping[str, Any]], now: float) -> None:
        newly_bound: dict[str, int] = {}
        for pod in pods:
            meta = pod["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            record = self.seen.pods.setdefault(key, PodRecord(key=key, seen=now))
            node = (pod.get("spec") or {}).get("nodeName") or ""
            if node and record.bound is None:
                record.bound, record.node = now, node
                newly_bound[node] = newly_bound.get(node, 0) + 1
        for node, count in sorted(newly_bound.items()):
            self.timeline.add("cluster", f"{count} pod(s) bound to {node}", now)

    def _emptiness(self, pods: Iterable[Mapping[str, Any]], now: float) -> None:
        per_node: dict[str, int] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and not pod["metadata"].get("deletionTimestamp"):
                per_node[node] = per_node.get(node, 0) + 1
        for record in self.seen.nodes.values():
            if record.deleted is not None:
                continue
            count = per_node.get(record.name, 0)
            record.pods_max = max(record.pods_max, count)
            if count == 0 and record.pods_max > 0 and record.empty_since is None:
                record.empty_since = now
                self.timeline.add("cluster", f"node {record.name} is empty", now)
            elif count > 0:
                record.empty_since = None

    def snapshot(self) -> Observations:
        with self.lock:
            return Observations(
                nodes={k: NodeRecord(**vars(v)) for k, v in self.seen.nodes.items()},
                pods={k: PodRecord(**vars(v)) for k, v in self.seen.pods.items()},
            )

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
