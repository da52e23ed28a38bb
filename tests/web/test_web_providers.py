from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from _web_httpd import FakeDNS, Handler, LocalServer

from execengine.config import Config
from execengine.errors import ProviderError
from execengine.web.fetch import Fetcher
from execengine.web.guard import AddressPolicy
from execengine.web.providers import (
    BraveProvider,
    SearchResult,
    SearxngProvider,
    StaticProvider,
    TavilyProvider,
    api_key,
    make_provider,
    provider_status,
)

KEY = "sk-test-0123456789abcdef"


def fetcher() -> Fetcher:
    return Fetcher(timeout=5)  # default policy: loopback is refused unless trusted


def query_of(path: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(path).query)


def json_reply(data: object, status: int = 200):  # type: ignore[no-untyped-def]
    return lambda h: h.reply(status, json.dumps(data), {"Content-Type": "application/json"})


def test_searxng_request_and_results(server: LocalServer) -> None:
    server.route("/search", json_reply({"query": "q", "results": [
        {"title": "One", "url": "https://one.example/", "content": "first <b>hit</b>"},
        {"title": "No URL"},
        {"title": "Two", "url": "https://two.example/", "content": "second &amp; more"},
        {"title": "Three", "url": "https://three.example/", "content": "third"},
    ]}))
    provider = SearxngProvider(server.url("/"), fetcher())
    results = provider.search("zmq über sockets", 2)
    assert results == [SearchResult("One", "https://one.example/", "first hit"),
                       SearchResult("Two", "https://two.example/", "second & more")]
    seen = server.requests[0]
    assert seen.method == "GET" and urlsplit(seen.path).path == "/search"
    assert query_of(seen.path) == {"q": ["zmq über sockets"], "format": ["json"]}


def test_searxng_base_url_may_already_name_the_endpoint(server: LocalServer) -> None:
    server.route("/searx/search", json_reply({"results": []}))
    assert SearxngProvider(server.url("/searx/search/"), fetcher()).search("x", 5) == []
    assert urlsplit(server.requests[0].path).path == "/searx/search"


def test_searxng_without_json_format_gets_a_hint(server: LocalServer) -> None:
    server.static("/search", "Forbidden", "text/html", status=403)
    with pytest.raises(ProviderError, match="HTTP 403.*JSON format enabled"):
        SearxngProvider(server.url("/"), fetcher()).search("x", 5)


def test_searxng_html_answer_is_a_clear_error(server: LocalServer) -> None:
    server.static("/search", "<html>results page</html>")
    with pytest.raises(ProviderError, match="did not answer JSON .*text/html"):
        SearxngProvider(server.url("/"), fetcher()).search("x", 5)


def test_brave_request_and_results(server: LocalServer) -> None:
    server.route("/res/v1/web/search", json_reply({"type": "search", "web": {"results": [
        {"title": "B1", "url": "https://b1.example/", "description": "<strong>brave</strong> one"},
        {"title": "B2", "url": "https://b2.example/", "description": "two"},
    ]}}))
    provider = BraveProvider(server.url("/res/v1/web/search"), fetcher(), secret=KEY)
    assert [r.as_dict() for r in provider.search("rust async", 30)] == [
        {"title": "B1", "url": "https://b1.example/", "description": "brave one"},
        {"title": "B2", "url": "https://b2.example/", "description": "two"},
    ]
    seen = server.requests[0]
    assert seen.method == "GET" and urlsplit(seen.path).path == "/res/v1/web/search"
    assert query_of(seen.path) == {"q": ["rust async"], "count": ["20"]}
    assert seen.headers["x-subscription-token"] == KEY
    assert seen.headers["accept"] == "application/json"
    assert KEY not in seen.path


def test_brave_with_no_web_section_means_no_results(server: LocalServer) -> None:
    server.route("/s", json_reply({"type": "search", "query": {"original": "x"}}))
    assert BraveProvider(server.url("/s"), fetcher(), secret=KEY).search("x", 5) == []


def test_tavily_request_and_results(server: LocalServer) -> None:
    server.route("/search", json_reply({"query": "q", "results": [
        {"title": "T1", "url": "https://t1.example/", "content": "tav one", "score": 0.9},
    ]}))
    provider = TavilyProvider(server.url("/search"), fetcher(), secret=KEY)
    assert provider.search("llm tools", 3) == [
        SearchResult("T1", "https://t1.example/", "tav one")]
    seen = server.requests[0]
    assert (seen.method, seen.path) == ("POST", "/search")
    assert seen.headers["content-type"] == "application/json"
    assert json.loads(seen.body) == {"api_key": KEY, "query": "llm tools", "max_results": 3}
    assert "x-subscription-token" not in seen.headers


@pytest.mark.parametrize("make", [
    lambda url: BraveProvider(url, fetcher(), secret=KEY),
    lambda url: TavilyProvider(url, fetcher(), secret=KEY),
], ids=["brave", "tavily"])
def test_errors_never_show_the_key(server: LocalServer, make) -> None:  # type: ignore[no-untyped-def]
    def echo(h: Handler) -> None:
        h.reply(401, f"invalid key {KEY} for {h.path}", {"Content-Type": "text/plain"})

    server.route("/api", echo)
    with pytest.raises(ProviderError) as info:
        make(server.url("/api")).search("x", 5)
    assert "HTTP 401" in str(info.value) and "***" in str(info.value)
    assert KEY not in str(info.value)


def test_key_does_not_follow_a_redirect_to_another_origin(server: LocalServer) -> None:
    dns = FakeDNS({"api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    server.redirect("/api", f"http://other.test:{server.port}/elsewhere")
    server.route("/elsewhere", json_reply({"web": {"results": []}}))
    endpoint = f"http://api.test:{server.port}/api"
    # the trusted endpoint does not make the host it redirects to trusted
    with pytest.raises(ProviderError, match=r"refused to fetch other.test \(127.0.0.1\)"):
        BraveProvider(endpoint, Fetcher(timeout=5, resolver=dns), secret=KEY).search("x", 5)
    assert len(server.requests) == 1
    # and where that host is reachable, the key header is not sent to it
    open_fetcher = Fetcher(timeout=5, resolver=dns, policy=AddressPolicy(allow_private=True))
    assert BraveProvider(endpoint, open_fetcher, secret=KEY).search("x", 5) == []
    first, second = server.requests[1:]
    assert first.headers["x-subscription-token"] == KEY
    assert second.path == "/elsewhere" and "x-subscription-token" not in second.headers


def test_provider_endpoint_is_trusted_but_only_it(server: LocalServer) -> None:
    server.route("/search", json_reply({"results": []}))
    assert SearxngProvider(server.url("/"), fetcher()).search("x", 1) == []
    with pytest.raises(Exception, match="loopback"):
        fetcher().fetch(server.url("/search"))


def test_truncated_or_unreachable_answers_are_provider_errors(server: LocalServer) -> None:
    server.route("/search", json_reply({"results": [{"title": "x" * 5000}]}))
    small = Fetcher(timeout=5, max_bytes=1024)
    with pytest.raises(ProviderError, match="exceeds web.max_bytes"):
        SearxngProvider(server.url("/"), small).search("x", 1)
    with pytest.raises(ProviderError, match="searxng request failed"):
        SearxngProvider("http://127.0.0.1:1/", fetcher()).search("x", 1)


def test_static_provider_is_the_fake() -> None:
    fake = StaticProvider([SearchResult("a", "https://a/", "d")] * 3)
    assert len(fake.search("q", 2)) == 2 and fake.queries == [("q", 2)]


# -- configuration --------------------------------------------------------------------


def web(**overrides: object):  # type: ignore[no-untyped-def]
    return Config().with_overrides({f"web.{k}": v for k, v in overrides.items()}).web


def test_status_reasons() -> None:
    assert "no search provider configured" in str(provider_status(web()))
    assert "web.searxng.url is not set" in str(provider_status(web(provider="searxng")))
    assert provider_status(web(provider="searxng", **{"searxng.url": "http://s/"})) is True
    reason = provider_status(web(provider="brave", **{"brave.api_key_env": "BRAVE_K"}), {})
    assert "environment variable BRAVE_K is empty or unset" in str(reason)
    assert "set web.tavily.api_key_env" in str(provider_status(web(provider="tavily"), {}))


def test_key_from_environment_wins_over_the_file() -> None:
    cfg = web(provider="brave", **{"brave.api_key": "from-file", "brave.api_key_env": "BK"})
    assert api_key(cfg.brave, {"BK": "from-env"}) == "from-env"
    assert api_key(cfg.brave, {}) == "from-file"
    assert provider_status(cfg, {}) is True


def test_make_provider_builds_the_configured_one() -> None:
    cfg = web(provider="tavily", **{"tavily.api_key_env": "TK"})
    made = make_provider(cfg, fetcher(), {"TK": KEY})
    assert isinstance(made, TavilyProvider) and made.url == "https://api.tavily.com/search"
    with pytest.raises(ProviderError, match="no search provider configured"):
        make_provider(web(), fetcher())
