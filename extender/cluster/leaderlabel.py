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
from typing import Any

from kubernetes import client

from extender.cluster.client import call_json

LEADER_LABEL = "karpy.sh/leader"
MERGE_PATCH = "application/merge-patch+json"

log = logging.getLogger("karpy.leader")


class LeaderLabel:
    def __init__(self, kube: Any, namespace: str, pod: str) -> None:
        self.kube, self.namespace, self.pod = kube, namespace, pod

    def set(self, leading: bool) -> bool:
        """Label (or unlabel) our pod; False when the patch failed (logged, the next change retries)."""
        body = {"metadata": {"labels": {LEADER_LABEL: "true" if leading else None}}}
        action = "label" if leading else "unlabel"
        try:
            call_json(
                client.CoreV1Api(self.kube).patch_namespaced_pod,
                self.pod,
                self.namespace,
                body,
                _content_type=MERGE_PATCH,
            )
        except Exception as err:
            log.warning("Failed to %s pod %s/%s, %s", action, self.namespace, self.pod, err)
            return False
        log.info("%sled pod %s/%s as the extender's endpoint", action.capitalize(), self.namespace, self.pod)
        return True
