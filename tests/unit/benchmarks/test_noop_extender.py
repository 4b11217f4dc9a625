"""benchmarks/noop_extender.py answers as kube-scheduler's extender protocol needs
(reference/protocols.md 1.3: ExtenderFilterResult with NodeNames when nodeCacheCapable; a
HostPriorityList for prioritize), over one kept-alive connection as kube-scheduler's client uses."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from benchmarks.noop_extender import NoopExtender


def test_filter_echoes_every_node_and_prioritize_scores_none_on_one_connection() -> None:
    server = NoopExtender()
    url = urlsplit(server.url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port)
    names = [f"node-{i}" for i in range(1000)]
    body = json.dumps({"Pod": {"metadata": {"name": "p"}}, "NodeNames": names})
    try:
        for _ in range(3):
            connection.request("POST", "/filter", body, {"Content-Type": "application/json"})
            filtered = json.loads(connection.getresponse().read())
            assert filtered == {"NodeNames": names, "FailedNodes": {}, "Error": ""}
        connection.request("POST", "/prioritize", body, {"Content-Type": "application/json"})
        assert json.loads(connection.getresponse().read()) == []
        connection.request("POST", "/filter", b"not json", {"Content-Type": "application/json"})
        assert json.loads(connection.getresponse().read())["Error"] == "noop: bad request"
    finally:
        connection.close()
        server.close()
