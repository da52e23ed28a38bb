"""HTTP(S) fetching with the standard library, bounded in every direction.

One :meth:`Fetcher.fetch` call follows redirects (each hop parsed, resolved and vetted by
the SSRF guard again), connects to the vetted addresses while sending the URL's host in the
``Host`` header and TLS SNI, and stops at ``web.timeout`` seconds for the whole exchange
(a watchdog shuts the socket, so a server that drips one byte a second cannot stall it).
Bodies are read up to ``web.max_bytes`` raw and decoded (gzip/deflate) up to ``max_bytes``
again; anything beyond is cut and the response says so (``truncated``).

Any HTTP status is a :class:`Response` value; transport problems raise a
:class:`~execengine.errors.WebError` subclass.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, quote, urljoin, urlsplit, urlunsplit

from execengine.errors import (
    BlockedAddressError,
    ConnectionFailedError,
    FetchTimeoutError,
    InvalidURLError,
    RedirectError,
)
from execengine.web.encoding import SUPPORTED_CODINGS, Decoder, decode_text
from execengine.web.guard import AddressPolicy, Resolver, system_resolver

if TYPE_CHECKING:
    from execengine.config import WebConfig

REDIRECTS = frozenset({301, 302, 303, 307, 308})
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.8"
_CHUNK = 64 * 1024
_SAFE = "/%:@!$&'()*+,;=?~-._[]"
#: request headers never carried across a redirect to another origin
_ALWAYS_SECRET = frozenset({"authorization", "proxy-authorization", "cookie"})


@functools.cache
def _default_tls() -> ssl.SSLContext:
    """The system trust store, loaded once on first HTTPS use (contexts are thread-safe)."""
    return ssl.create_default_context()


@dataclass(frozen=True)
class Target:
    """A parsed, fetchable URL."""

    url: str
    scheme: str
    host: str  # lower-case, IDNA-encoded, no brackets
    port: int
    path: str  # path and query, what goes on the request line

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def parse_url(url: str) -> Target:
    """Check and split an http(s) URL; :class:`InvalidURLError` says what is wrong."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidURLError("URL must be a non-empty string")
    url = url.strip()
    if any(ord(c) < 33 for c in url):
        raise InvalidURLError(f"URL contains whitespace or control characters: {url!r}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURLError(f"malformed URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        hint = " (add http:// or https://)" if not parts.scheme else ""
        raise InvalidURLError(f"only http and https URLs can be fetched, got {url!r}{hint}")
    if parts.username is not None or parts.password is not None:
        raise InvalidURLError("URLs with user names or passwords are not fetched")
    host = parts.hostname or ""
    if not host:
        raise InvalidURLError(f"URL has no host: {url!r}")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError as exc:
        raise InvalidURLError(f"invalid host name {host!r}: {exc}") from exc
    # non-ASCII in the path or query is sent percent-encoded (UTF-8), as browsers do
    raw_path = quote(parts.path or "/", safe=_SAFE)
    query = quote(parts.query, safe=_SAFE)
    path = raw_path + ("?" + query if query else "")
    clean = urlunsplit(SplitResult(scheme, parts.netloc, raw_path, query, ""))
    return Target(clean, scheme, host, port or (443 if scheme == "https" else 80), path)


@dataclass(frozen=True)
class Response:
    """A complete HTTP answer (any status)."""

    url: str  #: the final URL, after redirects
    status: int
    reason: str
    headers: Mapping[str, str]  #: lower-case names; repeated headers joined with ", "
    body: bytes
    #: True when the body was cut at ``max_bytes`` (raw or decompressed)
    truncated: bool = False
    #: the URLs redirected from, in order
    redirects: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        """The media type, lower-case, without parameters ("" when absent)."""
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def text(self) -> str:
        html = "html" in self.content_type or self.content_type == ""
        return decode_text(self.body, self.headers.get("content-type"), html=html)

    def json(self) -> Any:
        return json.loads(self.text())


def _bounded(resolver: Resolver, deadline: float, limit: float) -> Resolver:
    """``resolver`` made to give up at ``deadline`` (a stuck DNS lookup is left behind)."""

    def resolve(host: str, port: int) -> list[str]:
        box: list[Any] = []

        def run() -> None:
            try:
                box.append(resolver(host, port))
            except BaseException as exc:
                box.append(exc)

        worker = threading.Thread(target=run, name="web-resolve", daemon=True)
        worker.start()
        worker.join(max(deadline - time.monotonic(), 0))
        if not box:
            raise FetchTimeoutError(f"resolving {host!r} took longer than {limit:g} s")
        if isinstance(box[0], BaseException):
            raise box[0]
        addresses: list[str] = box[0]
        return addresses

    return resolve


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to vetted addresses (first that answers); ``Host`` names the URL's host."""

    def __init__(self, host: str, port: int, *, addresses: list[str], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.addresses = addresses
        #: the connected socket, kept: for a body that runs until the server closes,
        #: ``http.client`` hands ``sock`` to the response and sets it to None, and the
        #: deadline must still be able to shut it down
        self.opened: socket.socket | None = None

    def connect(self) -> None:
        failure: OSError | None = None
        for address in self.addresses:
            try:
                self.sock = self.opened = socket.create_connection((address, self.port),
                                                                   self.timeout)
            except OSError as exc:
                failure = exc
                continue
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return
        raise failure or OSError(f"no address to connect to for {self.host}")


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    default_port = 443

    def __init__(self, host: str, port: int, *, addresses: list[str], timeout: float,
                 context: ssl.SSLContext) -> None:
        super().__init__(host, port, addresses=addresses, timeout=timeout)
        self.tls = context

    def connect(self) -> None:
        super().connect()
        self.sock = self.opened = self.tls.wrap_socket(self.sock, server_hostname=self.host)


class Fetcher:
    """Fetches URLs under one policy. Holds no connections: nothing to close."""

    def __init__(
        self,
        *,
        timeout: float = 20.0,
        max_bytes: int = 5_000_000,
        max_redirects: int = 5,
        user_agent: str = "execengine",
        policy: AddressPolicy | None = None,
        resolver: Resolver = system_resolver,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.user_agent = user_agent
        self.policy = policy or AddressPolicy()
        self.resolver = resolver
        self.ssl_context = ssl_context

    @classmethod
    def from_config(cls, web: WebConfig, **overrides: Any) -> Fetcher:
        kwargs: dict[str, Any] = {
            "timeout": web.timeout,
            "max_bytes": web.max_bytes,
            "max_redirects": web.max_redirects,
            "user_agent": web.user_agent,
            "policy": AddressPolicy(web.allow_private, tuple(web.allowed_hosts)),
        }
        kwargs.update(overrides)
        return cls(**kwargs)

    def trusting(self, hosts: Iterable[str]) -> Fetcher:
        """A copy whose guard also lets ``hosts`` through (operator-configured endpoints)."""
        return Fetcher(timeout=self.timeout, max_bytes=self.max_bytes,
                       max_redirects=self.max_redirects, user_agent=self.user_agent,
                       policy=self.policy.with_hosts(hosts), resolver=self.resolver,
                       ssl_context=self.ssl_context)

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        secret_headers: Iterable[str] = (),
    ) -> Response:
        """Fetch ``url``, following redirects; see the module docstring.

        ``secret_headers`` (e.g. an API-key header) are dropped when a redirect leaves the
        origin, and a request body is never re-sent to another origin.
        """
        deadline = time.monotonic() + self.timeout
        secrets = {h.lower() for h in secret_headers} | _ALWAYS_SECRET
        sent = {"user-agent": self.user_agent, "accept": ACCEPT,
                "accept-encoding": ", ".join(SUPPORTED_CODINGS)}
        sent.update({k.lower(): v for k, v in (headers or {}).items()})
        target = parse_url(url)
        chain: list[str] = []
        seen = {(method, target.url)}
        while True:
            try:
                addresses = self.policy.vet(target.host, target.port,
                                            _bounded(self.resolver, deadline, self.timeout))
            except BlockedAddressError as exc:
                if chain:
                    raise BlockedAddressError(
                        f"redirected from {chain[-1]} to {target.url}: {exc}") from exc
                raise
            status, reason, got, data, cut = self._exchange(
                target, addresses, method, sent, body, deadline)
            location = got.get("location")
            if status not in REDIRECTS or not location:
                return Response(target.url, status, reason, got, data, cut, tuple(chain))
            if len(chain) >= self.max_redirects:
                raise RedirectError(f"too many redirects (more than {self.max_redirects}) "
                                    f"starting at {chain[0] if chain else target.url}")
            with contextlib.suppress(UnicodeError):  # raw UTF-8 bytes arrive as latin-1
                location = location.encode("latin-1").decode("utf-8")
            try:
                nxt = parse_url(urljoin(target.url, location))
            except InvalidURLError as exc:
                raise RedirectError(f"{target.url} redirected to a URL that cannot be "
                                    f"fetched: {exc}") from exc
            if status == 303 or (status in (301, 302) and method == "POST"):
                method = "GET" if method != "HEAD" else method
                body = None
                sent.pop("content-type", None)
            if nxt.origin != target.origin:
                for name in secrets:
                    sent.pop(name, None)
                if body is not None:
                    raise RedirectError(f"{target.url} redirected ({status}) to another "
                                        f"origin, {nxt.url}; the request body is not re-sent")
            if (method, nxt.url) in seen:
                raise RedirectError(
                    f"redirect loop: {' -> '.join([*chain, target.url, nxt.url])}")
            seen.add((method, nxt.url))
            chain.append(target.url)
            target = nxt

    def _exchange(
        self, target: Target, addresses: list[str], method: str, headers: Mapping[str, str],
        body: bytes | None, deadline: float,
    ) -> tuple[int, str, dict[str, str], bytes, bool]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FetchTimeoutError(f"no answer from {target.url} within {self.timeout:g} s")
        conn: _PinnedHTTPConnection
        if target.scheme == "https":
            context = self.ssl_context or _default_tls()
            conn = _PinnedHTTPSConnection(target.host, target.port, addresses=addresses,
                                          timeout=remaining, context=context)
        else:
            conn = _PinnedHTTPConnection(target.host, target.port, addresses=addresses,
                                         timeout=remaining)
        fired = threading.Event()

        def watchdog() -> None:
            fired.set()
            sock = conn.opened
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(remaining, watchdog)
        timer.daemon = True
        timer.start()
        try:
            conn.request(method, target.path, body=body, headers=dict(headers))
            resp = conn.getresponse()
            try:
                got: dict[str, str] = {}
                for name, value in resp.getheaders():
                    key = name.lower()
                    got[key] = f"{got[key]}, {value}" if key in got else value
                if resp.status in REDIRECTS and "location" in got:
                    return resp.status, resp.reason, got, b"", False
                data, cut = self._read_body(resp, got.get("content-encoding", ""), target)
                if fired.is_set():
                    raise TimeoutError("deadline passed while reading the body")
                return resp.status, resp.reason, got, data, cut
            finally:
                resp.close()
        except ConnectionFailedError as exc:
            if fired.is_set():
                raise FetchTimeoutError(
                    f"no complete answer from {target.url} within {self.timeout:g} s") from exc
            raise
        except ssl.SSLCertVerificationError as exc:
            raise ConnectionFailedError(f"TLS certificate of {target.host} not trusted: "
                                        f"{exc.verify_message}") from exc
        except (OSError, http.client.HTTPException) as exc:
            if fired.is_set() or isinstance(exc, TimeoutError):
                raise FetchTimeoutError(
                    f"no complete answer from {target.url} within {self.timeout:g} s") from exc
            raise ConnectionFailedError(f"fetching {target.url} failed: "
                                        f"{type(exc).__name__}: {exc}") from exc
        finally:
            timer.cancel()
            conn.close()

    def _read_body(self, resp: http.client.HTTPResponse, coding: str,
                   target: Target) -> tuple[bytes, bool]:
        try:
            decoder = Decoder(coding.split(",")[-1] if coding else "", self.max_bytes)
        except ValueError as exc:
            raise ConnectionFailedError(f"{target.url}: {exc}") from exc
        parts: list[bytes] = []
        raw = 0
        while True:
            chunk = resp.read1(_CHUNK)
            if not chunk:
                if resp.length:  # EOF before Content-Length was reached
                    raise ConnectionFailedError(
                        f"{target.url}: connection closed after {raw:,} of "
                        f"{raw + resp.length:,} announced bytes")
                return b"".join(parts), decoder.capped
            raw += len(chunk)
            try:
                parts.append(decoder.feed(chunk))
            except ValueError as exc:
                raise ConnectionFailedError(f"{target.url}: {exc}") from exc
            if decoder.capped or raw > self.max_bytes:
                return b"".join(parts), True
