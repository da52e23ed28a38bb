"""A real local HTTP(S) server for the web tests: routes are plain functions.

``with LocalServer() as srv: srv.route("/x", fn)`` where ``fn(req)`` writes the answer with
``req.reply(status, body, headers)`` or by hand. Every request is recorded (method, path,
headers, body, TLS server name). Slow routes wait on ``srv.stopping`` so shutdown is prompt.
"""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    sni: str | None = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        sni = getattr(self.connection, "_test_sni", None)
        self.seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                         body, sni)
        self.server.owner.requests.append(self.seen)
        route = self.server.owner.routes.get(self.path.split("?", 1)[0])
        if route is None:
            self.reply(404, b"not found", {"Content-Type": "text/plain"})
        else:
            route(self)
        self.close_connection = True

    do_GET = do_POST = do_HEAD = _handle

    def reply(self, status: int, body: bytes | str = b"",
              headers: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        sent = {k.lower() for k in (headers or {})}
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if "content-length" not in sent:
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    @property
    def stopping(self) -> threading.Event:
        return self.server.owner.stopping


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = False
    owner: LocalServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up early are part of the tests


class LocalServer:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Callable[[Handler], None]] = {}
        self.requests: list[Seen] = []
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.owner = self
        if tls is not None:
            def remember(sock: ssl.SSLSocket, name: str | None, _ctx: Any) -> None:
                sock._test_sni = name  # type: ignore[attr-defined]
            tls.sni_callback = remember
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=True)
        self.port = self._server.server_address[1]
        self.scheme = "https" if tls else "http"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def route(self, path: str, fn: Callable[[Handler], None]) -> None:
        self.routes[path] = fn

    def static(self, path: str, body: bytes | str, content_type: str = "text/html",
               status: int = 200, **headers: str) -> None:
        extra = {k.replace("_", "-"): v for k, v in headers.items()}
        self.route(path, lambda h: h.reply(status, body, {"Content-Type": content_type,
                                                           **extra}))

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.route(path, lambda h: h.reply(status, b"", {"Location": location}))

    def close(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FakeDNS:
    """A resolver mapping names to addresses and counting lookups."""

    table: dict[str, list[str]]
    calls: list[str] = field(default_factory=list)

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        from execengine.errors import ConnectionFailedError

        if host not in self.table:
            raise ConnectionFailedError(f"cannot resolve host {host!r}")
        return list(self.table[host])
