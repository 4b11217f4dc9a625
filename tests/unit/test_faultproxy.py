"""The chaos run's fault proxy tells lists from watches as kube-apiserver does.

kube-apiserver reads the `watch` query parameter with apimachinery's
runtime.Convert_Slice_string_To_bool (k8s.io/apimachinery/pkg/runtime/conversion.go): only an
absent value, "0" or any case of "false" is false, so `watch=True`, `watch=1`, `watch=t` and even
`watch=` open a watch. A fault aimed at lists must land on lists and never on those.
"""

from __future__ import annotations

import json
import random
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hack.localcluster.faultproxy import FaultProxy, Request, apiserver_faults

WATCH_FORMS = ["true", "True", "TRUE", "1", "t", "T", "yes", ""]
NOT_WATCH_FORMS = ["false", "False", "FALSE", "0"]


def request(path: str, method: str = "GET") -> Request:
    return Request(method, path, {}, b"")


@pytest.mark.parametrize("value", WATCH_FORMS)
def test_every_form_kube_apiserver_reads_as_true_is_a_watch(value: str) -> None:
    req = request(f"/api/v1/pods?watch={value}&resourceVersion=1")
    assert req.is_watch and not req.is_list


@pytest.mark.parametrize("value", NOT_WATCH_FORMS)
def test_false_and_zero_are_lists(value: str) -> None:
    req = request(f"/api/v1/pods?watch={value}")
    assert req.is_list and not req.is_watch


@pytest.mark.parametrize(
    ("path", "is_list"),
    [
        ("/api/v1/pods", True),
        ("/api/v1/namespaces/ns/pods?limit=500", True),
        ("/apis/karpenter.sh/v1/nodepools", True),
        ("/api/v1/nodes/n1", False),
        ("/api/v1/namespaces/ns/pods/p1", False),
        ("/api/v1/watch/pods", False),
    ],
)
def test_a_list_is_a_get_of_a_collection(path: str, is_list: bool) -> None:
    assert request(path).is_list is is_list
    assert request(path, "POST").is_list is False


class _Upstream(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"kind": "List", "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{upstream.server_address[1]}"
    # Every list is faulted (rate 1), nothing else.
    fault_proxy = FaultProxy(lambda: url, apiserver_faults(1.0, random.Random(7), only=lambda r: r.is_list))
    yield fault_proxy
    fault_proxy.close()
    upstream.shutdown()
    upstream.server_close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_a_list_fault_lands_on_lists_and_never_on_watches(proxy: FaultProxy) -> None:
    lists = ["/api/v1/pods", "/api/v1/namespaces/ns/pods", "/api/v1/pods?watch=false"]
    watches = [f"/api/v1/pods?watch={v}" for v in ("True", "1", "true", "t")]
    assert [_status(proxy.url + p) for p in watches] == [200] * len(watches)
    assert _status(proxy.url + "/api/v1/nodes/n1") == 200
    assert all(_status(proxy.url + p) in (429, 500, 503) for p in lists)
    assert sum(proxy.faults().values()) == len(lists)
