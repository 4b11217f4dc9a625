"""A loopback proxy in front of moto that answers EC2's two catalog reads from moto's own first answer.

Each `karpy controller` replica lists every instance type and offering when it starts: moto
renders 5.8 MB of XML for DescribeInstanceTypes, 2-3.5 s of its CPU on a loaded 2-core machine,
and the kill -9 test starts 21 replicas. Those two answers are moto's static catalog and cannot
change during a test, so the proxy asks moto once per distinct request and replays the bytes moto
sent; every other call (CreateFleet, DescribeInstances, tags, terminations, SSM, SQS) is forwarded
to moto untouched. Each replica still makes its own calls through its own client, parses the whole
answer and builds its catalog.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs

import urllib3

from hack.localcluster.faultproxy import HOP_BY_HOP, Fault, FaultProxy, Request, aws_service

CATALOG_ACTIONS = frozenset({"DescribeInstanceTypes", "DescribeInstanceTypeOfferings"})
REPLAYED = "catalog replayed"


class CatalogReplay:
    """The proxy's decide function: None (forward) for anything but a catalog read."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.answers: dict[bytes, Fault] = {}
        self._lock = threading.Lock()
        self._pool = urllib3.PoolManager()

    def __call__(self, request: Request) -> Fault | None:
        if aws_service(request) != "ec2":
            return None
        action = parse_qs(request.body.decode("latin-1")).get("Action", [""])[0]
        if action not in CATALOG_ACTIONS:
            return None
        with self._lock:  # one fetch per distinct request (a page's NextToken is in the body)
            if request.body not in self.answers:
                headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
                answer = self._pool.request(
                    "POST", self.endpoint + request.path, body=request.body, headers=headers
                )
                if answer.status != 200:
                    return None  # forwarded: moto answers it again, and nothing is kept
                content_type = answer.headers.get("Content-Type", "text/xml")
                self.answers[request.body] = Fault(REPLAYED, 200, answer.data, content_type)
            return self.answers[request.body]


@contextmanager
def catalog_replay(moto_endpoint: str) -> Iterator[FaultProxy]:
    """The proxy (its `url` is the endpoint to give karpy; `counts[REPLAYED]` the replays)."""
    proxy = FaultProxy(lambda: moto_endpoint, CatalogReplay(moto_endpoint))
    try:
        yield proxy
    finally:
        proxy.close()
