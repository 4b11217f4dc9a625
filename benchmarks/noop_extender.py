"""The floor of any extender kube-scheduler calls for every pod: one that does nothing.

A minimal HTTP/1.1 server on loopback (one thread per kept-alive connection, as kube-scheduler's
client keeps one): /filter parses ExtenderArgs and answers every node it was sent (with
nodeCacheCapable kube-scheduler drops every node an answer leaves out, so even a no-op must echo
the names), /prioritize answers no scores. No Flask, no gunicorn, no guard, and its own process
(`python -m benchmarks.noop_extender PORT`), so no other thread competes for its GIL.
`benchmarks.schedpath --sides noop,...` registers it in karpy's place: what kube-scheduler's
throughput loses to it is what the calls alone cost, whatever an extender does inside.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from typing import Any

_HEAD_END = b"\r\n\r\n"
_FILTER_FAIL = b'{"NodeNames":null,"FailedNodes":{},"Error":"noop: bad request"}'


def answer(path: bytes, body: bytes) -> bytes:
    if path.startswith(b"/filter"):
        try:
            args: Any = json.loads(body)
            names = args.get("NodeNames") or []
        except (ValueError, AttributeError):
            return _FILTER_FAIL
        result: dict[str, Any] = {"NodeNames": names, "FailedNodes": {}, "Error": ""}
        return json.dumps(result, separators=(",", ":")).encode()
    return b"[]"


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _serve(conn: socket.socket) -> None:
    buffer = b""
    with conn:
        while True:
            while _HEAD_END not in buffer:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(_HEAD_END)
            length = _content_length(head)
            while len(buffer) < length:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                buffer += chunk
            body, buffer = buffer[:length], buffer[length:]
            path = head.split(b" ", 2)[1] if b" " in head else b"/"
            out = answer(path, body)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(out)).encode()
                + b"\r\n\r\n"
                + out
            )


class NoopExtender:
    """Serves until `close()`; `url` is what kube-scheduler's `urlPrefix` takes."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._listener = socket.create_server((host, port))
        self.url = f"http://{host}:{self._listener.getsockname()[1]}/"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_serve, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self._listener.close()


if __name__ == "__main__":
    server = NoopExtender(port=int(sys.argv[1]))
    print(server.url, flush=True)
    threading.Event().wait()
