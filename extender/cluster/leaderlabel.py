"""Route kube-scheduler's extender calls to the leader: the leader labels its own pod.

The guard's state (removal marks, claims, reservations) lives in the leader's memory; a follower
answering /filter would let kube-scheduler place pods the leader is placing or draining. The
extender Service selects `karpy.sh/leader: "true"`, so only the leader's pod is its endpoint.
A replica clears the label at start (a container restarted in the same pod keeps its labels) and
on losing the Lease. During a failover the Service has no endpoint: kube-scheduler skips the
extender (ignorable) exactly as it would skip a follower without the leader's state.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubernetes import client

from extender.cluster.client import call_json
from extender.cluster.errors import NotFound, translated
from extender.retry import LoopBackoff

LEADER_LABEL = "karpy.sh/leader"
MERGE_PATCH = "application/merge-patch+json"

log = logging.getLogger("karpy.leader")


class LeaderLabel:
    """`set(leading)` patches our pod's label at once; if the patch fails (API server hiccup) it is
    retried in the background with backoff until it lands or the wish changes, so one error cannot
    leave kube-scheduler routed to a follower, or to no replica at all."""

    def __init__(self, kube: Any, namespace: str, pod: str, *, backoff: LoopBackoff | None = None) -> None:
        self.kube, self.namespace, self.pod = kube, namespace, pod
        self._backoff = backoff or LoopBackoff()
        self._patching = threading.Lock()  # one patch at a time, always of the latest wish
        self._state = threading.Lock()
        self._wish: bool | None = None
        self._retrying = False

    def set(self, leading: bool) -> bool:
        """Label (or unlabel) our pod; False when this attempt failed (a retry is under way)."""
        with self._state:
            self._wish = leading
        if self._apply():
            return True
        with self._state:
            if self._retrying:
                return False
            self._retrying = True
        threading.Thread(target=self._retry, name="leader-label-retry", daemon=True).start()
        return False

    def _retry(self) -> None:
        stop = threading.Event()  # never set: the retry ends when a patch lands
        while True:
            stop.wait(self._backoff.failed())
            if self._apply():
                break
        self._backoff.succeeded()
        with self._state:
            self._retrying = False

    def _apply(self) -> bool:
        with self._patching:
            with self._state:
                leading = self._wish
            action = "label" if leading else "unlabel"
            body = {"metadata": {"labels": {LEADER_LABEL: "true" if leading else None}}}
            try:
                with translated(f"patching pod {self.namespace}/{self.pod}"):
                    call_json(
                        client.CoreV1Api(self.kube).patch_namespaced_pod,
                        self.pod,
                        self.namespace,
                        body,
                        _content_type=MERGE_PATCH,
                    )
            except NotFound:
                log.info("Pod %s/%s is gone, not %sing it", self.namespace, self.pod, action)
                return True
            except Exception as err:
                log.warning("Failed to %s pod %s/%s, retrying, %s", action, self.namespace, self.pod, err)
                return False
        log.info("%sled pod %s/%s as the extender's endpoint", action.capitalize(), self.namespace, self.pod)
        return True
