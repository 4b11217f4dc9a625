"""Bind a node's pods in parallel; a pod that fails is handed back, never lost.

Capacity is reserved in ClusterState while the binds are in flight, so the extender's guard keeps
kube-scheduler from placing other pods into the same room.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from kubernetes import client

from extender.api.pod import Pod
from extender.cluster import bind as kube_bind
from extender.cluster import events
from extender.state import ClusterState

log = logging.getLogger("karpy.controller.provisioning")


def bind_all(
    kube: client.ApiClient,
    pool: Executor,
    state: ClusterState,
    node: str,
    pods: Sequence[Pod],
    *,
    on_event: Callable[[Pod, str], None] | None = None,
) -> tuple[list[Pod], list[Pod]]:
    """(bound, failed). 409 counts as bound (someone else placed the pod, which is all that matters)."""
    state.reserve(node, {p.key: p.requests for p in pods})

    def one(pod: Pod) -> bool:
        try:
            kube_bind.bind(kube, namespace=pod.namespace, name=pod.name, uid=pod.uid, node=node)
        except kube_bind.AlreadyBound as err:
            log.info("Pod %s already bound, %s", pod.key, err)
            return True
        except Exception as err:  # the pod stays pending and returns in the next batch
            log.error("Failed to bind %s to %s, %s", pod.key, node, err)
            return False
        if on_event is not None:
            on_event(pod, node)
        return True

    try:
        results = list(pool.map(one, pods))
    finally:
        state.release(node, [p.key for p in pods])
    bound = [p for p, ok in zip(pods, results, strict=True) if ok]
    failed = [p for p, ok in zip(pods, results, strict=True) if not ok]
    if bound:
        log.info("Bound %d pod(s) to node %s", len(bound), node)
    return bound, failed


def pod_event(kube: client.ApiClient, provisioner: str, pool: Executor) -> Callable[[Pod, str], None]:
    """Records on `pool`: an Event is another apiserver write per pod, and binds must not wait for it."""

    def record(pod: Pod, node: str) -> None:
        pool.submit(
            events.record,
            kube,
            kind="Pod",
            name=pod.name,
            namespace=pod.namespace,
            uid=pod.uid,
            reason="Scheduled",
            message=f"Successfully assigned {pod.key} to {node} (provisioner {provisioner})",
        )

    return record
