"""Loopback HTTP proxies that pass traffic to a real upstream and answer a fraction of requests with
the errors that upstream sends when it is overloaded: the chaos run's fault injection
(hack/localcluster/chaos.py), with no fake of the component behind.

- `apiserver_faults`: 429 TooManyRequests (with Retry-After), 500 InternalError and 503
  ServiceUnavailable as kube-apiserver's Status JSON, answered instead of forwarding; and, for
  writes, 504 Timeout *after* forwarding (the write landed, the client never heard: what a real
  apiserver answers when etcd commits past the request's deadline). A watch is faulted only when
  it starts; once open it streams through untouched.
- `aws_faults`: EC2 `RequestLimitExceeded` (EC2's XML error, HTTP 503) and SQS `InternalFailure`
  (HTTP 500), answered instead of forwarding, as AWS throttling does.
- `invalid` and `ec2_error` build an upstream's refusal for good (kube-apiserver's 422 Invalid
  Status, EC2's error XML), for a caller's own decide function (tests/integration/test_isolation.py).

The client speaks plain HTTP to the proxy (a kubeconfig with `server: http://127.0.0.1:<port>`),
the proxy speaks to the upstream with its own TLS and credentials. Every fault is counted by kind.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

import urllib3

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    @property
    def query(self) -> dict[str, list[str]]:
        # Blank values kept: `?watch=` is a watch to kube-apiserver.
        return parse_qs(urlsplit(self.path).query, keep_blank_values=True)

    @property
    def _resource_path(self) -> list[str]:
        """The path after its group-version (`/api/v1`, `/apis/<group>/<version>`)."""
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if parts[:1] == ["api"]:
            return parts[2:]
        if parts[:1] == ["apis"]:
            return parts[3:]
        return []

    @property
    def is_watch(self) -> bool:
        """As kube-apiserver reads it: `watch` parsed by apimachinery's
        runtime.Convert_Slice_string_To_bool (only absent, "0" or any case of "false" is false:
        `watch=True`, `watch=1`, `watch=t`, even `watch=` watch), or the legacy `/watch/` path."""
        values = self.query.get("watch")
        if values and values[0] != "0" and values[0].lower() != "false":
            return True
        return self._resource_path[:1] == ["watch"]

    @property
    def is_list(self) -> bool:
        """A GET of a collection that is not a watch: `<plural>` or `namespaces/<ns>/<plural>`."""
        rest = self._resource_path
        collection = len(rest) == 1 or (len(rest) == 3 and rest[0] == "namespaces")
        return self.method == "GET" and collection and not self.is_watch


@dataclass(frozen=True)
class Fault:
    kind: str
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    #: Forward the request first and answer the fault instead of the upstream's answer.
    after_forward: bool = False


Decide = Callable[[Request], Fault | None]


def _status(
    code: int,
    reason: str,
    message: str,
    retry_after: int | None = None,
    details: dict[str, Any] | None = None,
) -> bytes:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if retry_after is not None:
        status["details"] = {"retryAfterSeconds": retry_after}
    if details is not None:
        status["details"] = details
    return json.dumps(status).encode()


def invalid(kind: str, name: str, field: str, cause: str, detail: str) -> Fault:
    """kube-apiserver's 422 for an object its validation refuses, as apimachinery's
    errors.NewInvalid builds it from one field.Error (`cause`: its type, e.g. FieldValueTooLong)."""
    message = f"{kind} {json.dumps(name)} is invalid: {field}: {detail}"
    details = {"name": name, "kind": kind, "causes": [{"reason": cause, "message": detail, "field": field}]}
    return Fault(f"apiserver 422 {kind}", 422, _status(422, "Invalid", message, details=details))


APISERVER_FAULTS = (
    Fault(
        "apiserver 429",
        429,
        _status(429, "TooManyRequests", "Too many requests, please try again later.", 1),
        headers=(("Retry-After", "1"),),
    ),
    Fault("apiserver 500", 500, _status(500, "InternalError", "Internal error occurred: injected fault")),
    Fault(
        "apiserver 503",
        503,
        _status(503, "ServiceUnavailable", "The server is currently unable to handle the request"),
    ),
)
LOST_WRITE = Fault(
    "apiserver 504 after write",
    504,
    _status(
        504,
        "Timeout",
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
    ),
    after_forward=True,
)


def ec2_error(status: int, code: str, message: str) -> Fault:
    """EC2's error answer (the query protocol's XML, as EC2 and moto send it)."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{escape(message)}</Message></Error></Errors>"
        "<RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
    )
    return Fault(f"ec2 {code}", status, body.encode(), content_type="text/xml;charset=UTF-8")


EC2_THROTTLE = ec2_error(503, "RequestLimitExceeded", "Request limit exceeded.")
SQS_FAILURE = Fault(
    "sqs InternalFailure",
    500,
    b'{"__type": "InternalFailure", "message": "We encountered an internal error. Please try again."}',
    content_type="application/x-amz-json-1.0",
)
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def apiserver_faults(
    rate: float, rand: random.Random, only: Callable[[Request], bool] | None = None
) -> Decide:
    """`rate` of all requests (watches at their start only), or of those `only` selects (e.g.
    `lambda r: r.is_list`), get one of the apiserver's overload answers."""

    def decide(request: Request) -> Fault | None:
        if only is not None and not only(request):
            return None
        if rand.random() >= rate:
            return None
        choices = APISERVER_FAULTS + ((LOST_WRITE,) if request.method in WRITES else ())
        return rand.choice(choices)

    return decide


def aws_service(request: Request) -> str:
    """The service of an AWS call ("ec2", "sqs", or "" for anything else) from its protocol's
    markers: EC2 speaks the query protocol (Action=...&Version=2016-11-15), SQS the JSON protocol
    (X-Amz-Target: AmazonSQS.*) or the query one."""
    target = request.headers.get("X-Amz-Target", "")
    if target.startswith("AmazonSQS."):
        return "sqs"
    if b"Action=" in request.body:
        version = parse_qs(request.body.decode("latin-1")).get("Version", [""])[0]
        return {"2016-11-15": "ec2", "2012-11-05": "sqs"}.get(version, "")
    return ""


def aws_faults(ec2_rate: float, sqs_rate: float, rand: random.Random) -> Decide:
    def decide(request: Request) -> Fault | None:
        service = aws_service(request)
        if service == "ec2" and rand.random() < ec2_rate:
            return EC2_THROTTLE
        if service == "sqs" and rand.random() < sqs_rate:
            return SQS_FAILURE
        return None

    return decide


def no_faults(_request: Request) -> None:
    return None


class FaultProxy:
    """A threading HTTP/1.1 server on 127.0.0.1 forwarding to `upstream()` (a base URL, or None when
    there is nowhere to go: answered 503). `counts` holds faults by kind plus "requests"."""

    def __init__(
        self,
        upstream: Callable[[], str | None],
        decide: Decide = no_faults,
        *,
        pool: urllib3.PoolManager | None = None,
        port: int = 0,
        read_timeout: float = 60.0,
    ) -> None:
        self.upstream = upstream
        self.decide = decide
        self.pool = pool or urllib3.PoolManager(maxsize=64, block=False)
        self.read_timeout = read_timeout
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"proxy": self})
        self.server = _Server(("127.0.0.1", port), handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, name=f"proxy-{self.port}", daemon=True
        )
        self._thread.start()

    def count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1

    def faults(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in self.counts.items() if k != "requests"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.pool.clear()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that goes away (a SIGKILLed replica, a closed watch) resets its connections.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy: FaultProxy

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def _handle(self) -> None:
        proxy = self.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(self.command, self.path, dict(self.headers.items()), body)
        proxy.count("requests")
        fault = proxy.decide(request)
        if fault is not None and not fault.after_forward:
            proxy.count(fault.kind)
            self._answer(fault.status, fault.body, fault.content_type, fault.headers)
            return
        base = proxy.upstream()
        if base is None:
            self._answer(503, b'{"message": "no upstream"}', "application/json")
            return
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        timeout = urllib3.Timeout(connect=5.0, read=None if request.is_watch else proxy.read_timeout)
        try:
            upstream = proxy.pool.urlopen(
                request.method,
                base + request.path,
                body=body or None,
                headers=headers,
                preload_content=False,
                decode_content=False,
                redirect=False,
                retries=False,
                timeout=timeout,
                assert_same_host=False,
            )
        except urllib3.exceptions.HTTPError as err:
            self._answer(502, json.dumps({"message": f"upstream: {err}"}).encode(), "application/json")
            return
        try:
            if fault is not None:
                upstream.drain_conn()
                proxy.count(fault.kind)
                self._answer(fault.status, fault.body, fault.content_type, fault.headers)
            else:
                self._relay(upstream)
        except (OSError, urllib3.exceptions.HTTPError):
            upstream.close()  # the client went away mid-stream (a watch it closed, a killed replica)
            self.close_connection = True
        finally:
            upstream.release_conn()

    def _answer(
        self, status: int, body: bytes, content_type: str, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _relay(self, upstream: urllib3.BaseHTTPResponse) -> None:
        chunked = "chunked" in upstream.headers.get("Transfer-Encoding", "").lower()
        self.send_response(upstream.status)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP and not (chunked and key.lower() == "content-length"):
                self.send_header(key, value)
        if not chunked:
            data = upstream.read(decode_content=False)
            if "content-length" not in {k.lower() for k in upstream.headers}:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in upstream.read_chunked(decode_content=False):  # type: ignore[attr-defined]
            if chunk:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
