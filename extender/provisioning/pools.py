"""The provisioning pipeline's thread pools, owned by the controller and shared by the steps.

Launch groups run in parallel (each group's CreateFleet, Node creates and binds), binds of one node
run in parallel, and Events are recorded off the hot path. The steps read the pools through this
object at call time, so `drain` (tests, shutdown) can replace them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def _pools() -> tuple[ThreadPoolExecutor, ThreadPoolExecutor, ThreadPoolExecutor]:
    return (
        ThreadPoolExecutor(max_workers=8, thread_name_prefix="launch"),
        ThreadPoolExecutor(max_workers=32, thread_name_prefix="bind"),
        ThreadPoolExecutor(max_workers=4, thread_name_prefix="events"),
    )


class Pools:
    def __init__(self) -> None:
        self.launch, self.bind, self.events = _pools()

    def drain(self) -> None:
        """Wait for every submitted task, then start fresh pools (a test reads the results)."""
        for pool in (self.launch, self.bind, self.events):
            pool.shutdown(wait=True)
        self.launch, self.bind, self.events = _pools()
