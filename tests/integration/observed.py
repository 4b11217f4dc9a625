"""Figures folded over every state a watch stream shows, for proofs of the form "never more than N".

Sampling the API every few hundred milliseconds can miss a state that lasts less than that (a PDB
dipping below minAvailable for one eviction, two nodes cordoned for a moment). A watch delivers
every change to the watched objects, in order, from the resourceVersion of an initial list, so the
extreme of a figure computed after each event is the extreme over all states the API server held.
A 410 Gone (history compacted) would leave a gap; it is counted, and `stop` refuses to report
over a gap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

Objects = dict[str, Any]


class Observed:
    """Watches what `lister` lists (a kubernetes client list call, e.g. `core.list_node` with a
    label selector in `kwargs`), keeps the current objects by name, and folds `figure(objects)` after
    the initial list and after every event with `worse` (min or max)."""

    def __init__(
        self,
        lister: Callable[..., Any],
        figure: Callable[[Objects], int],
        worse: Callable[[int, int], int],
        **kwargs: Any,
    ) -> None:
        self.lister, self.figure, self.worse, self.kwargs = lister, figure, worse, kwargs
        self.objects: Objects = {}
        self.worst: int | None = None
        self.events = 0
        self.gaps = 0
        self.resumed = 0
        self._watch = watch.Watch()
        self._stopping = threading.Event()
        listed = lister(**kwargs)
        self.objects = {o.metadata.name: o for o in listed.items}
        self._fold()
        self._version = listed.metadata.resource_version
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _fold(self) -> None:
        value = self.figure(self.objects)
        self.worst = value if self.worst is None else self.worse(self.worst, value)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                for event in self._watch.stream(
                    self.lister, resource_version=self._version, timeout_seconds=5, **self.kwargs
                ):
                    obj = event["object"]
                    self._version = obj.metadata.resource_version
                    if event["type"] == "DELETED":
                        self.objects.pop(obj.metadata.name, None)
                    elif event["type"] in ("ADDED", "MODIFIED"):
                        self.objects[obj.metadata.name] = obj
                    else:
                        continue
                    self.events += 1
                    self._fold()
                    if self._stopping.is_set():
                        return
            except Exception as err:
                if self._stopping.is_set():
                    return
                if isinstance(err, ApiException) and err.status == 410:
                    self.gaps += 1
                    listed = self.lister(**self.kwargs)
                    self.objects = {o.metadata.name: o for o in listed.items}
                    self._version = listed.metadata.resource_version
                    self._fold()
                else:
                    # A dropped stream: resuming from the last resourceVersion loses no event.
                    self.resumed += 1
                    self._stopping.wait(0.2)

    def close(self) -> None:
        self._stopping.set()
        self._watch.stop()
        self._thread.join(10)

    def stop(self) -> int | None:
        """The extreme over every state seen; raises if the stream had a gap."""
        self.close()
        self._fold()  # the state at the end is one the figure covers too
        assert not self.gaps, f"the watch lost history {self.gaps} time(s) (410 Gone): the figure has gaps"
        return self.worst


def ready(pod: Any) -> bool:
    """Counted by the PDB: Ready and not being deleted (the disruption controller's healthy pods)."""
    conditions = pod.status.conditions or [] if pod.status else []
    return pod.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )
