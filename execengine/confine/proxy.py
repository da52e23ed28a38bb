"""The host-side HTTP/HTTPS proxy that enforces a network allow-list.

A script under ``policy.network: allowlist`` has no network of its own: its sockets may
only connect to this proxy (see :mod:`execengine.isolation.landlock` port rules and the
seccomp ``stream_only`` filter), and ``HTTP_PROXY`` / ``HTTPS_PROXY`` point there. The
proxy understands the two forms clients use:

* ``CONNECT host:port`` (HTTPS and any TLS): the host is vetted, a tunnel is opened to a
  vetted address and bytes are relayed both ways (the proxy never sees inside TLS);
* absolute-form requests (``GET http://host/path``, plain HTTP): vetted the same way, the
  request is forwarded in origin form with ``Connection: close``.

Every request is judged by :class:`.domains.DomainPolicy` (deny wins, IP literals only when
listed, internal ranges only when listed exactly). A refusal is a ``403`` saying why.
Connections are bounded in number, header size and idle time; :meth:`AllowListProxy.close`
ends everything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from execengine.confine.domains import DomainPolicy, DomainRefused
from execengine.web.guard import Resolver, system_resolver

log = logging.getLogger(__name__)

MAX_HEADER = 64 * 1024
MAX_CONNECTIONS = 64
IDLE_SECONDS = 60.0
CONNECT_TIMEOUT = 10.0


class AllowListProxy:
    """Listens on ``127.0.0.1:<port>`` (``port=0``: any free one) and, with ``unix_path``,
    on that Unix socket too (what a sandbox in its own network namespace reaches through
    its bridge, see :mod:`execengine.isolation.bridge`). A context manager."""

    def __init__(self, domains: DomainPolicy, *, resolver: Resolver = system_resolver,
                 host: str = "127.0.0.1", port: int = 0, unix_path: str | None = None,
                 connector: Callable[[str, int], socket.socket] | None = None) -> None:
        self.domains = domains
        self.resolver = resolver
        self._connector = connector or (
            lambda addr, p: socket.create_connection((addr, p), CONNECT_TIMEOUT))
        self._listener = socket.create_server((host, port))
        self._listeners = [self._listener]
        self.unix_path = unix_path
        if unix_path is not None:
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                unix.bind(unix_path)
                unix.listen(64)
            except OSError:
                unix.close()
                self._listener.close()
                raise
            self._listeners.append(unix)
        self.address = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._closed = threading.Event()
        self.allowed = 0
        self.refused: list[str] = []
        self._thread = threading.Thread(target=self._accept, name="execengine-proxy",
                                        daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.address[1])

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._thread.join(5.0)
        for listener in self._listeners:
            listener.close()
        if self.unix_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.unix_path)
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()
        for t in threads:
            t.join(5.0)

    def __enter__(self) -> AllowListProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving -----------------------------------------------------------------------
    def _accept(self) -> None:
        sel = selectors.DefaultSelector()
        for listener in self._listeners:
            sel.register(listener, selectors.EVENT_READ)
        try:
            while not self._closed.is_set():
                for key, _ in sel.select(0.2):
                    ready = key.fileobj
                    assert isinstance(ready, socket.socket)
                    try:
                        conn, _ = ready.accept()
                    except OSError:
                        continue
                    self._start(conn)
        finally:
            sel.close()

    def _start(self, conn: socket.socket) -> None:
        conn.setblocking(True)
        with self._lock:
            if len(self._threads) >= MAX_CONNECTIONS:
                conn.close()
                return
            self._conns.add(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                 name="execengine-proxy-conn")
            self._threads.add(t)
        t.start()

    def _serve(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            conn.settimeout(IDLE_SECONDS)
            head, rest = _read_head(conn)
            if head is None:
                return
            method, target, version, headers = head
            try:
                host, port, forward = _destination(method, target, headers)
                addresses = self.domains.vet(host, port, self.resolver)
            except DomainRefused as exc:
                self._refuse(conn, str(exc))
                return
            except ValueError as exc:
                _reply(conn, 400, str(exc))
                return
            upstream = self._open(addresses, port)
            if upstream is None:
                _reply(conn, 502, f"cannot connect to {host}:{port}")
                return
            with self._lock:
                self.allowed += 1
                self._conns.add(upstream)
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                upstream.sendall(_origin_request(method, forward, version, headers) + rest)
            _relay(conn, upstream, self._closed)
        except OSError:
            pass
        except Exception:  # a bug must not take the host down; the client sees a close
            log.exception("proxy connection failed")
        finally:
            for s in (conn, upstream):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()
            with self._lock:
                self._conns.discard(conn)
                if upstream is not None:
                    self._conns.discard(upstream)
                self._threads.discard(threading.current_thread())

    def _open(self, addresses: list[str], port: int) -> socket.socket | None:
        for addr in addresses:
            try:
                return self._connector(addr, port)
            except OSError:
                continue
        return None

    def _refuse(self, conn: socket.socket, why: str) -> None:
        with self._lock:
            self.refused.append(why)
        log.info("proxy refused: %s", why)
        _reply(conn, 403, f"refused by the network allow-list: {why}")


Head = tuple[str, str, str, list[tuple[str, str]]]


def _read_head(conn: socket.socket) -> tuple[Head | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEADER:
            _reply(conn, 431, "request header too large")
            return None, b""
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    raw, rest = data.split(b"\r\n\r\n", 1)
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3:
        _reply(conn, 400, "malformed request line")
        return None, b""
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip(), value.strip()))
    return (parts[0].upper(), parts[1], parts[2], headers), rest


def _destination(method: str, target: str, headers: list[tuple[str, str]]
                 ) -> tuple[str, int, str]:
    """(host, port, origin-form path) of a request."""
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"CONNECT needs host:port, got {target!r}")
        return host.strip("[]"), int(port), ""
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError("only absolute http:// URLs can be proxied (use CONNECT for TLS)")
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    return url.hostname, url.port or 80, path


def _origin_request(method: str, path: str, version: str,
                    headers: list[tuple[str, str]]) -> bytes:
    kept = [(n, v) for n, v in headers
            if n.lower() not in ("proxy-connection", "proxy-authorization", "connection",
                                 "keep-alive")]
    kept.append(("Connection", "close"))
    lines = [f"{method} {path} {version}"] + [f"{n}: {v}" for n, v in kept]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _reply(conn: socket.socket, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large",
              502: "Bad Gateway"}.get(status, "Error")
    body = (text + "\n").encode()
    with contextlib.suppress(OSError):
        conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                     + body)


def _relay(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    sel = selectors.DefaultSelector()
    peers = {a: b, b: a}
    for s in peers:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    open_ends = 2
    try:
        while open_ends and not stop.is_set():
            events = sel.select(IDLE_SECONDS)
            if not events:
                return  # idle
            for key, _ in events:
                src = key.fileobj
                assert isinstance(src, socket.socket)
                try:
                    data = src.recv(65536)
                except BlockingIOError:
                    continue
                dst = peers[src]
                if not data:
                    sel.unregister(src)
                    open_ends -= 1
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    continue
                dst.setblocking(True)
                dst.settimeout(IDLE_SECONDS)
                dst.sendall(data)
                dst.setblocking(False)
    finally:
        sel.close()
