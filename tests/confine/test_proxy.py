"""The allow-list proxy against real servers on loopback: plain HTTP (absolute form) and
CONNECT tunnels; deny wins, IP literals only when listed, internal addresses only when
listed exactly."""

from __future__ import annotations

import http.server
import socket
import threading
import urllib.error
import urllib.request

import pytest

from execengine.confine.domains import DomainGuard, DomainPolicy, DomainRefused
from execengine.confine.proxy import AllowListProxy
from execengine.errors import BlockedAddressError


def loopback_dns(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


@pytest.fixture
def origin():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"hello {self.headers.get('Host')} {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def echo():
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                data = conn.recv(1024)
                conn.sendall(b"echo:" + data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield listener.getsockname()[1]
    stop.set()
    t.join(5)
    listener.close()


def fetch(proxy: AllowListProxy, url: str) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
    try:
        with opener.open(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def tunnel(proxy: AllowListProxy, target: str, payload: bytes = b"ping") -> str:
    with socket.create_connection(("127.0.0.1", proxy.port), 10) as s:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = s.recv(4096).decode()
        if not head.startswith("HTTP/1.1 200"):
            return head
        s.sendall(payload)
        return s.recv(4096).decode()


def test_a_listed_host_is_fetched_and_tunnelled(origin, echo):
    policy = DomainPolicy.of(["api.test"], [])
    with AllowListProxy(policy, resolver=loopback_dns) as proxy:
        status, body = fetch(proxy, f"http://api.test:{origin}/x?y=1")
        assert status == 200 and body == f"hello api.test:{origin} /x?y=1"
        assert tunnel(proxy, f"api.test:{echo}") == "echo:ping"
        assert proxy.allowed == 2


def test_deny_wins_over_a_wildcard(origin):
    policy = DomainPolicy.of(["*.test"], ["bad.test"])
    with AllowListProxy(policy, resolver=lambda h, p: ["93.184.216.34"]) as proxy:
        status, body = fetch(proxy, f"http://bad.test:{origin}/")
        assert status == 403 and "denied" in body
    with pytest.raises(DomainRefused, match="denied"):
        policy.check_host("BAD.test.")
    policy.check_host("good.test")  # a wildcard match passes the name rules


def _idna_dns(table):
    """A resolver that looks names up as getaddrinfo does: in their IDNA form."""
    return lambda host, port: table[host.encode("idna").decode("ascii")]


def test_deny_wins_over_spellings_the_resolver_folds_and_names_of_denied_addresses():
    """A soft hyphen (U+00AD) is dropped by the IDNA form getaddrinfo resolves, so
    'sec\xadret.pub.test' reached the denied 'secret.pub.test'; a name resolving to a
    denied address or network reached it too (deny was checked on the text only)."""
    policy = DomainPolicy.of(["*.pub.test"], ["secret.pub.test", "11.22.33.44",
                                              "11.23.0.0/16"])
    dns = _idna_dns({"secret.pub.test": ["11.22.33.44"], "other.pub.test": ["11.22.33.44"],
                     "net.pub.test": ["11.23.8.7"], "fine.pub.test": ["93.184.216.34"]})
    for host in ("sec\xadret.pub.test", "SECRET.pub.test.", "other.pub.test",
                 "net.pub.test"):
        with pytest.raises(DomainRefused, match="denied"):
            policy.vet(host, 80, dns)
    assert policy.vet("fine.pub.test", 80, dns) == ["93.184.216.34"]  # the control
    guard = DomainGuard(False, (), policy)  # the web tools' guard: the same rules
    with pytest.raises(BlockedAddressError, match="denied"):
        guard.vet("other.pub.test", 80, dns)
    assert guard.vet("fine.pub.test", 80, dns) == ["93.184.216.34"]


def test_the_proxy_refuses_a_denied_name_spelled_with_a_soft_hyphen(origin):
    policy = DomainPolicy.of(["*.test"], ["secret.test"])
    with AllowListProxy(policy, resolver=_idna_dns({"secret.test": ["93.184.216.34"]})) \
            as proxy, socket.create_connection(("127.0.0.1", proxy.port), 10) as s:
        s.sendall(b"GET http://sec\xadret.test:" + str(origin).encode()
                  + b"/ HTTP/1.1\r\nHost: secret.test\r\n\r\n")
        head = s.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 403") and "denied" in head, head


def test_a_wildcard_never_unlocks_internal_addresses(origin, echo):
    policy = DomainPolicy.of(["*.test"], [])
    with AllowListProxy(policy, resolver=loopback_dns) as proxy:
        status, body = fetch(proxy, f"http://api.test:{origin}/")
        assert status == 403 and "internal address" in body
        assert tunnel(proxy, f"api.test:{echo}").startswith("HTTP/1.1 403")
        assert len(proxy.refused) == 2


@pytest.mark.parametrize("target", ["127.0.0.1", "169.254.169.254", "[::1]", "10.0.0.1"])
def test_ip_literals_need_listing(target, echo):
    with AllowListProxy(DomainPolicy.of(["*.test", "example.com"], [])) as proxy:
        reply = tunnel(proxy, f"{target}:{echo}")
        assert reply.startswith("HTTP/1.1 403") and "IP addresses must be listed" in reply


def test_a_listed_ip_or_network_is_reachable(echo):
    for entry in ("127.0.0.1", "127.0.0.0/8"):
        with AllowListProxy(DomainPolicy.of([entry], [])) as proxy:
            assert tunnel(proxy, f"127.0.0.1:{echo}") == "echo:ping"


def test_unlisted_names_and_bad_requests_are_refused(origin):
    with AllowListProxy(DomainPolicy.of(["api.test"], []), resolver=loopback_dns) as proxy:
        assert fetch(proxy, f"http://other.test:{origin}/")[0] == 403
        with socket.create_connection(("127.0.0.1", proxy.port), 10) as s:
            s.sendall(b"GET /relative HTTP/1.1\r\nHost: api.test\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 400")
        with socket.create_connection(("127.0.0.1", proxy.port), 10) as s:
            s.sendall(b"X" * 70000)
            assert s.recv(4096).startswith(b"HTTP/1.1 431")
