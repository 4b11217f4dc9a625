"""Bounds on what one client may cost: request read time and body size, on every karpy HTTP surface.

kube-scheduler calls the extender inside its serialized scheduling cycle and the API server calls
the webhook on every pod create, so a client that opens connections and sends bytes slowly must
not hold the threads they need. Three layers, all here:

- `BoundedThreadWorker` (gunicorn gthread): reading one request (TLS handshake, headers and body)
  must finish within `request_read_seconds` of the first byte, or the connection is closed. The
  stock worker only bounds the wait for the *first* byte; after that a thread blocks in recv()
  for as long as the client likes.
- `BodyLimit` (WSGI middleware): the body is read up front, capped at `max_body_bytes` (413, or
  the surface's own status) and under the same deadline (408), before the app runs; the socket
  then gets a write timeout so a client that stops reading the answer cannot pin the thread either.
- Enough threads (see `options`) that the connections an attacker can stall for
  `request_read_seconds` are far fewer than the threads left for kube-scheduler and probes.

Who may connect at all is the NetworkPolicies' job (manifests/, the chart).
"""

from __future__ import annotations

import io
import json
import logging
import os
import ssl
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import Flask
from gunicorn import util as gunicorn_util
from gunicorn.http.errors import NoMoreData
from gunicorn.workers.gthread import ThreadWorker

from extender.http.errors import register_json_errors

log = logging.getLogger("karpy.http")

#: Seconds a client has, from its first byte, to send a whole request (headers and body).
REQUEST_READ_SECONDS = 10.0
#: Seconds one send of the answer may block on a client that does not read.
WRITE_SECONDS = 10.0

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


class _DeadlineSocket:
    """What gunicorn's parser reads through: recv() raises NoMoreData once the deadline passed, so
    the worker closes the connection quietly (logged at debug) instead of blocking a thread."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        #: The client ran out of time: its connection is closed without lingering.
        self.expired = False

    def recv(self, size: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.expired = True
            raise NoMoreData(b"")
        self.sock.settimeout(remaining)
        try:
            return self.sock.recv(size)
        except TimeoutError as err:
            self.expired = True
            raise NoMoreData(b"") from err

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class _HandshakeBoundedSSLSocket(ssl.SSLSocket):
    """gunicorn runs the TLS handshake on a blocking socket without a timeout; a client that sends
    half a ClientHello would hold the thread for good. Bounded to `REQUEST_READ_SECONDS`."""

    def do_handshake(self, block: bool = False) -> None:
        if self.gettimeout() is None:
            self.settimeout(REQUEST_READ_SECONDS)
        try:
            super().do_handshake(block)
        except TimeoutError as err:
            raise NoMoreData(b"") from err


def ssl_context(_config: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """gunicorn's `ssl_context` hook. gunicorn calls it for every new connection, so certificate
    files replaced on disk (webhook rotation) are served from the next connection on."""
    context = default_factory()
    context.sslsocket_class = _HandshakeBoundedSSLSocket
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class BoundedThreadWorker(ThreadWorker):
    """gthread worker whose request reads end `request_read_seconds` after the request began, and
    whose connection closes never block its main loop.

    gunicorn closes a finished connection "gracefully" on the worker's main thread: FIN, then up to
    2 s reading until the peer closes. A client that never closes stalls accept and dispatch for
    every connection that long, so 8 of them froze the extender for 16 s. Here a connection whose
    client ran out of time is closed at once, and any other graceful close lingers on a small pool
    of its own instead of the main thread.
    """

    request_read_seconds: float = REQUEST_READ_SECONDS
    #: Ports served without TLS when certificates are configured (the metrics listener).
    plain_ports: frozenset[int] = frozenset()
    _closer: ThreadPoolExecutor | None = None

    def init_process(self) -> None:
        # gunicorn answers a request it cannot parse (broken framing, bad headers) itself, with an
        # HTML page; karpy's clients get JSON for every error, as from the apps. The worker process
        # serves only karpy's apps, so replacing gunicorn's writer here reaches nothing else.
        gunicorn_util.write_error = write_json_error
        super().init_process()

    def handle(self, conn: Any) -> Any:
        deadline = time.monotonic() + self.request_read_seconds
        plain_init = type(conn).init
        if conn.cfg.is_ssl and _port(conn.server) in self.plain_ports:
            conn.cfg = _PlainConfig(conn.cfg)

        def bounded_init() -> None:
            plain_init(conn)
            parser = getattr(conn, "parser", None)
            unreader = getattr(parser, "unreader", None)
            if unreader is None or getattr(conn, "is_http2", False):
                return
            raw = unreader.sock.sock if isinstance(unreader.sock, _DeadlineSocket) else unreader.sock
            unreader.sock = _DeadlineSocket(raw, deadline)

        def close(graceful: bool = False) -> None:
            reader = getattr(getattr(getattr(conn, "parser", None), "unreader", None), "sock", None)
            linger = getattr(gunicorn_util, "close_graceful", None)
            if not graceful or linger is None or getattr(reader, "expired", False):
                gunicorn_util.close(conn.sock)
                return
            if self._closer is None:
                self._closer = ThreadPoolExecutor(max_workers=4, thread_name_prefix="close")
            conn.sock.setblocking(True)
            self._closer.submit(linger, conn.sock)

        conn.init = bounded_init
        conn.close = close
        return super().handle(conn)


class _PlainConfig:
    """gunicorn's config as one plain listener sees it: TLS applies to every listener of a worker,
    and gthread wraps a new connection only when `is_ssl`."""

    is_ssl = False

    def __init__(self, cfg: Any) -> None:
        self._cfg = cfg

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cfg, name)


def _port(address: Any) -> int | None:
    return address[1] if isinstance(address, tuple) and len(address) >= 2 else None


def bounded_worker(
    request_read_seconds: float, plain_ports: frozenset[int] = frozenset()
) -> type[BoundedThreadWorker]:
    """The worker class for gunicorn's `worker_class` with its read deadline; `plain_ports` stay
    plain HTTP when the others serve TLS."""
    return type(
        "BoundedThreadWorker",
        (BoundedThreadWorker,),
        {"request_read_seconds": request_read_seconds, "plain_ports": plain_ports},
    )


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's `util.write_error`, answering JSON: {"code", "message"} as the apps do."""
    body = json.dumps({"code": status_int, "message": f"{reason}: {mesg}"})
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body.encode())}\r\n\r\n"
    )
    gunicorn_util.write_nonblock(sock, (head + body).encode("latin1", "replace"))


def _json(start_response: StartResponse, status: str, message: str) -> list[bytes]:
    code = int(status.split()[0])
    body = json.dumps({"code": code, "message": message}).encode()
    start_response(
        status,
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")],
    )
    return [body]


class BodyLimit:
    """WSGI middleware: the request body is read (at most `max_body_bytes`) before the app runs."""

    def __init__(self, app: WSGIApp, *, max_body_bytes: int, too_large_status: int = 413) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.too_large = (
            f"{too_large_status} {'Request Entity Too Large' if too_large_status == 413 else 'Bad Request'}"
        )

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        too_large = f"request body larger than {self.max_body_bytes} bytes"
        try:
            declared = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _json(start_response, "400 Bad Request", "bad Content-Length")
        if declared > self.max_body_bytes:
            return _json(start_response, self.too_large, too_large)
        stream = environ.get("wsgi.input")
        chunked = "chunked" in str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower()
        if stream is not None and (declared or chunked):
            # Never past Content-Length (PEP 3333): a server that hands over the raw connection
            # (werkzeug's) would block here on a kept-alive connection, or eat the next request.
            size = self.max_body_bytes + 1 if chunked else declared
            try:
                body = stream.read(size)
            except (NoMoreData, OSError):
                return _json(start_response, "408 Request Timeout", "request body not received in time")
            if len(body) > self.max_body_bytes:
                return _json(start_response, self.too_large, too_large)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            sock.settimeout(WRITE_SECONDS)
        return self.app(environ, start_response)


def bound(app: Flask, *, max_body_bytes: int, too_large_status: int = 413) -> Flask:
    """`app` with its body capped and read up front, and every error answered as JSON."""
    register_json_errors(app, max_body_bytes=max_body_bytes, too_large_status=too_large_status)
    app.wsgi_app = BodyLimit(  # type: ignore[method-assign]
        app.wsgi_app, max_body_bytes=max_body_bytes, too_large_status=too_large_status
    )
    return app


def options(
    *,
    bind: list[str],
    threads: int,
    request_read_seconds: float = REQUEST_READ_SECONDS,
    certfile: str = "",
    keyfile: str = "",
    plain_binds: tuple[str, ...] = (),
    workers: int = 1,
    name: str,
) -> dict[str, Any]:
    """gunicorn settings shared by the extender and the webhook; `plain_binds` (some of `bind`)
    stay plain HTTP when `certfile` serves the rest over TLS."""
    plain_ports = frozenset(int(b.rsplit(":", 1)[1]) for b in plain_binds)
    opts: dict[str, Any] = {
        "bind": bind,
        "worker_class": bounded_worker(request_read_seconds, plain_ports),
        "workers": workers,
        "threads": threads,
        # Connections kept open (idle keep-alive ones included) beyond the threads; the worker
        # stops accepting above this, so it bounds memory, not who gets served.
        "worker_connections": max(1000, threads * 8),
        "graceful_timeout": 10,
        "keepalive": 30,
        "accesslog": None,
        "errorlog": "-",
        "proc_name": name,
        # gunicorn's control socket defaults to one path per user: a second karpy on the same host
        # would take it over.
        "control_socket_disable": True,
        # Headers are small (kube-scheduler and the API server send a handful).
        "limit_request_line": 4094,
        "limit_request_fields": 64,
        "limit_request_field_size": 8190,
    }
    if os.path.isdir("/dev/shm"):
        # Heartbeat files on tmpfs: a slow container disk must not get workers killed.
        opts["worker_tmp_dir"] = "/dev/shm"
    if certfile:
        opts["certfile"], opts["keyfile"] = certfile, keyfile
        opts["ssl_context"] = ssl_context
    return opts
