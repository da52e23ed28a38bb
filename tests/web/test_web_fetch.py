from __future__ import annotations

import gzip
import json
import threading
import time

import pytest
from _web_httpd import FakeDNS, Handler, LocalServer, closed_port

from execengine.config import Config
from execengine.errors import (
    BlockedAddressError,
    ConnectionFailedError,
    FetchTimeoutError,
    InvalidURLError,
    RedirectError,
)
from execengine.web.fetch import Fetcher, parse_url
from execengine.web.guard import AddressPolicy

LOCAL = AddressPolicy(allowed_hosts=("127.0.0.1",))


def local(**kw: object) -> Fetcher:
    kw.setdefault("policy", LOCAL)
    kw.setdefault("timeout", 5.0)
    return Fetcher(**kw)  # type: ignore[arg-type]


def test_fetch_html_and_the_request_it_sends(server: LocalServer) -> None:
    server.static("/page", "<title>x</title>")
    cfg = Config().with_overrides({"web.allowed_hosts": ["127.0.0.1"],
                                   "web.user_agent": "tester/1"}).web
    resp = Fetcher.from_config(cfg).fetch(server.url("/page?a=1&b=%20"))
    assert (resp.status, resp.content_type, resp.body) == (200, "text/html", b"<title>x</title>")
    assert resp.ok and not resp.truncated and resp.redirects == ()
    seen = server.requests[0]
    assert seen.path == "/page?a=1&b=%20"
    assert seen.headers["user-agent"] == "tester/1"
    assert seen.headers["host"] == f"127.0.0.1:{server.port}"
    assert set(seen.headers["accept-encoding"].split(", ")) == {"gzip", "deflate"}


def test_loopback_is_refused_by_default_and_nothing_is_sent(server: LocalServer) -> None:
    server.static("/", "secret admin page")
    with pytest.raises(BlockedAddressError, match="loopback"):
        Fetcher.from_config(Config().web).fetch(server.url("/"))
    with pytest.raises(BlockedAddressError):
        Fetcher().fetch(server.url("/", host="localhost"))
    assert server.requests == []


def test_allow_private_and_allowed_hosts_let_loopback_through(server: LocalServer) -> None:
    server.static("/", "ok", "text/plain")
    for overrides in ({"web.allow_private": True}, {"web.allowed_hosts": ["127.0.0.1"]}):
        cfg = Config().with_overrides(overrides).web
        assert Fetcher.from_config(cfg).fetch(server.url("/")).body == b"ok"


def test_connects_to_the_vetted_address_with_the_name_in_host(server: LocalServer) -> None:
    """No second lookup: 'site.test' exists only in the fake DNS, yet the request arrives."""
    server.route("/", lambda h: h.reply(200, h.headers["Host"], {"Content-Type": "text/plain"}))
    dns = FakeDNS({"site.test": ["127.0.0.1"]})
    fetcher = local(resolver=dns, policy=AddressPolicy(allowed_hosts=("site.test",)))
    resp = fetcher.fetch(f"http://site.test:{server.port}/")
    assert resp.text() == f"site.test:{server.port}"
    assert dns.calls == ["site.test"]


def test_gzip_body_is_decoded(server: LocalServer) -> None:
    server.static("/z", gzip.compress(b"<p>zipped</p>"), Content_Encoding="gzip")
    assert local().fetch(server.url("/z")).body == b"<p>zipped</p>"


def test_gzip_bomb_is_cut_at_max_bytes(server: LocalServer) -> None:
    server.static("/bomb", gzip.compress(b"A" * 50_000_000), "text/plain",
                  Content_Encoding="gzip")
    resp = local(max_bytes=64_000).fetch(server.url("/bomb"))
    assert resp.truncated and len(resp.body) == 64_000 and set(resp.body) == {ord("A")}


def test_huge_body_is_cut_without_reading_it_all(server: LocalServer) -> None:
    def endless(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(10**12))
        h.end_headers()
        chunk = b"x" * 65536
        try:
            while not h.stopping.is_set():
                h.wfile.write(chunk)
        except OSError:
            pass

    server.route("/huge", endless)
    resp = local(max_bytes=200_000).fetch(server.url("/huge"))
    assert resp.truncated and len(resp.body) == 200_000


def test_redirect_chain_is_followed(server: LocalServer) -> None:
    server.redirect("/a", "/b", 301)
    server.redirect("/b", server.url("/c"), 302)
    server.redirect("/c", "d?x=1", 307)
    server.static("/d", "end", "text/plain")
    resp = local().fetch(server.url("/a"))
    assert resp.body == b"end" and resp.url == server.url("/d?x=1")
    assert resp.redirects == (server.url("/a"), server.url("/b"), server.url("/c"))


def test_redirect_loop_is_reported(server: LocalServer) -> None:
    server.redirect("/a", "/b")
    server.redirect("/b", "/a")
    with pytest.raises(RedirectError, match=r"redirect loop: .*/a -> .*/b -> .*/a"):
        local(max_redirects=10).fetch(server.url("/a"))


def test_too_many_redirects(server: LocalServer) -> None:
    for i in range(5):
        server.redirect(f"/{i}", f"/{i + 1}")
    server.static("/5", "end")
    with pytest.raises(RedirectError, match=r"more than 3"):
        local(max_redirects=3).fetch(server.url("/0"))
    assert local(max_redirects=5).fetch(server.url("/0")).body == b"end"


def test_redirect_to_a_private_address_is_refused(server: LocalServer) -> None:
    """A public-looking host may not bounce the fetch to loopback or cloud metadata."""
    dns = FakeDNS({"public.test": ["127.0.0.1"]})
    fetcher = local(resolver=dns, policy=AddressPolicy(allowed_hosts=("public.test",)))
    server.redirect("/to-loopback", server.url("/admin"))
    server.redirect("/to-metadata", "http://169.254.169.254/latest/meta-data/")
    server.static("/admin", "secret")
    for path in ("/to-loopback", "/to-metadata"):
        with pytest.raises(BlockedAddressError, match="redirected from .* to http"):
            fetcher.fetch(f"http://public.test:{server.port}{path}")
    assert [r.path for r in server.requests] == ["/to-loopback", "/to-metadata"]


def test_secret_headers_do_not_follow_a_redirect_to_another_origin(server: LocalServer) -> None:
    dns = FakeDNS({"api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    fetcher = local(resolver=dns, policy=AddressPolicy(allow_private=True))
    server.redirect("/same", "/landing")
    server.redirect("/away", f"http://other.test:{server.port}/landing")
    server.static("/landing", "ok")
    for path in ("/same", "/away"):
        fetcher.fetch(f"http://api.test:{server.port}{path}",
                      headers={"X-Key": "k-123", "Authorization": "Bearer t"},
                      secret_headers=["X-Key"])
    keys = [(r.headers["host"].split(":")[0], r.headers.get("x-key"),
             r.headers.get("authorization")) for r in server.requests]
    assert keys == [("api.test", "k-123", "Bearer t"), ("api.test", "k-123", "Bearer t"),
                    ("api.test", "k-123", "Bearer t"), ("other.test", None, None)]


def test_post_body_is_not_resent_to_another_origin(server: LocalServer) -> None:
    dns = FakeDNS({"api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    fetcher = local(resolver=dns, policy=AddressPolicy(allow_private=True))
    server.redirect("/307", f"http://other.test:{server.port}/sink", 307)
    with pytest.raises(RedirectError, match="not re-sent"):
        fetcher.fetch(f"http://api.test:{server.port}/307", method="POST", body=b'{"k": 1}')
    assert [r.path for r in server.requests] == ["/307"]


def test_303_turns_a_post_into_a_get(server: LocalServer) -> None:
    server.redirect("/form", "/done", 303)
    server.route("/done", lambda h: h.reply(200, json.dumps([h.command, len(h.seen.body)])))
    resp = local().fetch(server.url("/form"), method="POST", body=b"a=1",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert resp.json() == ["GET", 0]
    assert "content-type" not in server.requests[1].headers


def test_a_server_that_never_answers_times_out(server: LocalServer) -> None:
    server.route("/slow", lambda h: h.stopping.wait(30))
    with pytest.raises(FetchTimeoutError, match="within 0.3 s"):
        local(timeout=0.3).fetch(server.url("/slow"))


@pytest.mark.parametrize("length", ["100000", None], ids=["announced", "until-close"])
def test_a_server_dripping_bytes_still_times_out(server: LocalServer, length) -> None:
    """Each byte arrives well within the socket timeout; the total deadline still holds,
    also for a body that runs until the server closes (http.client then hands the socket
    to the response and forgets it: the deadline must still reach it)."""
    def drip(h: Handler) -> None:
        h.send_response(200)
        if length:
            h.send_header("Content-Length", length)
        else:
            h.close_connection = True
        h.end_headers()
        try:
            while not h.stopping.wait(0.02):
                h.wfile.write(b".")
                h.wfile.flush()
        except OSError:
            pass

    server.route("/drip", drip)
    started = time.monotonic()
    with pytest.raises(FetchTimeoutError):
        local(timeout=0.5).fetch(server.url("/drip"))
    assert time.monotonic() - started < 3


def test_invalid_charset_label_falls_back(server: LocalServer) -> None:
    server.static("/c", "déjà vu".encode(), "text/html; charset=x-made-up")
    assert local().fetch(server.url("/c")).text() == "déjà vu"


def test_http_errors_are_responses_not_exceptions(server: LocalServer) -> None:
    server.static("/gone", "nope", "text/plain", status=410)
    resp = local().fetch(server.url("/gone"))
    assert (resp.status, resp.ok, resp.body) == (410, False, b"nope")


def test_connection_refused_is_a_clear_error() -> None:
    with pytest.raises(ConnectionFailedError, match="ConnectionRefusedError"):
        local().fetch(f"http://127.0.0.1:{closed_port()}/")


def test_a_body_shorter_than_announced_is_an_error(server: LocalServer) -> None:
    def short(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100")
        h.end_headers()
        h.wfile.write(b"only ten..")

    server.route("/short", short)
    with pytest.raises(ConnectionFailedError, match="closed after 10 of 100"):
        local().fetch(server.url("/short"))


@pytest.mark.parametrize(("url", "message"), [
    ("", "non-empty"),
    ("example.org/page", "add http:// or https://"),
    ("file:///etc/passwd", "only http and https"),
    ("gopher://x/", "only http and https"),
    ("http://user:pw@example.org/", "user names or passwords"),
    ("http:///path", "no host"),
    ("http://example.org:99999/", "malformed URL"),
    ("http://exa mple.org/", "whitespace"),
    ("http://example.org/\r\nX-Injected: 1", "control characters"),
])
def test_bad_urls_are_refused_before_any_network(url: str, message: str) -> None:
    with pytest.raises(InvalidURLError, match=message):
        parse_url(url)


def test_idn_host_is_encoded() -> None:
    assert parse_url("https://bücher.example/ä?q=1").host == "xn--bcher-kva.example"


def test_next_vetted_address_is_tried_when_the_first_refuses(server: LocalServer) -> None:
    server.static("/", "second address", "text/plain")
    dns = FakeDNS({"two.test": ["127.0.0.2", "127.0.0.1"]})  # nothing listens on .2
    fetcher = local(resolver=dns, policy=AddressPolicy(allowed_hosts=("two.test",)))
    assert fetcher.fetch(f"http://two.test:{server.port}/").body == b"second address"
    assert dns.calls == ["two.test"]


def test_chunked_gzip_body(server: LocalServer) -> None:
    payload = gzip.compress(b"chunk " * 5000)

    def chunked(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for i in range(0, len(payload), 700):
            part = payload[i:i + 700]
            h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        h.wfile.write(b"0\r\n\r\n")

    server.route("/chunked", chunked)
    resp = local().fetch(server.url("/chunked"))
    assert resp.body == b"chunk " * 5000 and not resp.truncated


def test_non_ascii_path_and_query_are_percent_encoded(server: LocalServer) -> None:
    server.route("/caf%C3%A9", lambda h: h.reply(200, h.path, {"Content-Type": "text/plain"}))
    resp = local().fetch(server.url("/café?q=naïve&x=%20"))
    assert resp.text() == "/caf%C3%A9?q=na%C3%AFve&x=%20"


def test_redirect_to_a_raw_utf8_location(server: LocalServer) -> None:
    def raw(h: Handler) -> None:
        h.send_response(302)
        h.send_header("Location", "/café".encode().decode("latin-1"))
        h.send_header("Content-Length", "0")
        h.end_headers()

    server.route("/go", raw)
    server.static("/caf%C3%A9", "arrived", "text/plain")
    assert local().fetch(server.url("/go")).body == b"arrived"


def test_a_stuck_dns_lookup_counts_against_the_deadline() -> None:
    release = threading.Event()

    def stuck(host: str, port: int) -> list[str]:
        release.wait(10)
        return ["93.184.216.34"]

    try:
        with pytest.raises(FetchTimeoutError, match="resolving 'slow.test'"):
            Fetcher(timeout=0.2, resolver=stuck).fetch("http://slow.test/")
    finally:
        release.set()
