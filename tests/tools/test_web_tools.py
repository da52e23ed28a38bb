"""web_search and web_extract through the registry's dispatcher, against local servers."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from execengine.config import Config
from execengine.context import CallContext
from execengine.registry import ToolRegistry

_spec = importlib.util.spec_from_file_location(
    "_web_httpd", Path(__file__).resolve().parent.parent / "web" / "_web_httpd.py")
assert _spec and _spec.loader
httpd = sys.modules.get("_web_httpd") or importlib.util.module_from_spec(_spec)
if "_web_httpd" not in sys.modules:
    sys.modules["_web_httpd"] = httpd
    _spec.loader.exec_module(httpd)

KEY = "brave-key-abcdef0123456789"


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    fds = set(os.listdir("/proc/self/fd"))
    threads = set(threading.enumerate())
    yield
    for t in set(threading.enumerate()) - threads:
        t.join(5)
    assert set(threading.enumerate()) <= threads
    assert set(os.listdir("/proc/self/fd")) <= fds


@pytest.fixture
def server() -> Iterator[Any]:
    with httpd.LocalServer() as srv:
        yield srv


def registry(**overrides: Any) -> ToolRegistry:
    cfg = Config().with_overrides({f"web.{k}": v for k, v in overrides.items()})
    return ToolRegistry.with_builtins(cfg, plugins=False)


def call(reg: ToolRegistry, name: str, **args: Any) -> Any:
    return json.loads(reg.dispatch(name, args, CallContext(origin="execute_code")))


# -- web_search ------------------------------------------------------------------------


def test_web_search_is_unavailable_without_a_provider() -> None:
    with registry() as reg:
        avail = reg.availability()
        assert not avail["web_search"].available
        assert "no search provider configured" in avail["web_search"].reason
        assert avail["web_extract"].available
        assert reg.toolset_availability()["web"].available
        offered = {d["function"]["name"] for d in reg.get_tool_definitions(["web"])}
        assert offered == {"web_extract"}
        assert "no search provider" in call(reg, "web_search", query="x")["error"]


def test_web_search_through_searxng(server: Any) -> None:
    server.route("/search", lambda h: h.reply(200, json.dumps({"results": [
        {"title": f"T{i}", "url": f"https://r{i}.example/", "content": f"c{i}"}
        for i in range(10)]}), {"Content-Type": "application/json"}))
    with registry(provider="searxng", **{"searxng.url": server.url("/")}) as reg:
        assert reg.availability(["web_search"])["web_search"].available
        result = call(reg, "web_search", query="hello", limit=3)
        assert result == {"data": {"web": [
            {"title": f"T{i}", "url": f"https://r{i}.example/", "description": f"c{i}"}
            for i in range(3)]}}
        assert len(call(reg, "web_search", query="hello")["data"]["web"]) == 5


@pytest.mark.parametrize(("args", "message"), [
    ({}, "non-empty 'query'"),
    ({"query": "  "}, "non-empty 'query'"),
    ({"query": "x", "limit": 0}, "positive integer"),
    ({"query": "x", "limit": "5"}, "positive integer"),
    ({"query": "x", "limit": True}, "positive integer"),
])
def test_web_search_bad_arguments(args: dict[str, Any], message: str) -> None:
    with registry(provider="searxng", **{"searxng.url": "http://127.0.0.1:1/"}) as reg:
        assert message in call(reg, "web_search", **args)["error"]


def test_brave_key_from_env_never_reaches_the_result(server: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_BRAVE_KEY", KEY)

    def echo(h: Any) -> None:
        token = h.headers.get("X-Subscription-Token", "")
        h.reply(200, json.dumps({"web": {"results": [
            {"title": "leak", "url": "https://x.example/", "description": f"your key {token}"}]}}),
            {"Content-Type": "application/json"})

    server.route("/brave", echo)
    server.route("/denied", lambda h: h.reply(
        403, f"bad token {h.headers.get('X-Subscription-Token')}", {"Content-Type": "text/plain"}))
    base = {"provider": "brave", "brave.api_key_env": "TEST_BRAVE_KEY"}
    with registry(**base, **{"brave.url": server.url("/brave")}) as reg:
        text = reg.dispatch("web_search", {"query": "q"})
        assert KEY not in text and json.loads(text)["data"]["web"][0]["description"] == (
            "your key ***")
    with registry(**base, **{"brave.url": server.url("/denied")}) as reg:
        text = reg.dispatch("web_search", {"query": "q"})
        assert KEY not in text and "HTTP 403" in json.loads(text)["error"]
    assert server.requests[0].headers["x-subscription-token"] == KEY


# -- web_extract -----------------------------------------------------------------------


def test_web_extract_many_kinds_with_per_url_errors(server: Any) -> None:
    server.static("/page", "<html><head><title>Hello</title></head><body><nav>menu</nav>"
                  "<p>Body <b>text</b></p></body></html>")
    server.static("/plain", "just text", "text/plain; charset=utf-8")
    server.static("/data", '{"k": [1]}', "application/json")
    server.static("/doc.pdf", b"%PDF-1.5 binary stuff", "application/pdf")
    server.static("/missing", "<h1>Not here</h1>", status=404)
    server.redirect("/hop", "/page")
    server.redirect("/sneaky", "http://169.254.169.254/latest/meta-data/iam/")
    urls = [server.url(p) for p in ("/page", "/plain", "/data", "/doc.pdf", "/missing", "/hop",
                                    "/sneaky")]
    urls += ["http://10.0.0.1/", "ftp://example.org/x", 42]
    with registry(allowed_hosts=["127.0.0.1"]) as reg:
        results = call(reg, "web_extract", urls=urls)["results"]
    assert [r["url"] for r in results] == [*urls[:-1], "42"]
    for r in results:
        assert {"url", "title", "content"} <= set(r)
    page, plain, data, pdf, missing, hop, sneaky, private, ftp, number = results
    assert (page["title"], page["content"], "error" in page) == ("Hello", "Body **text**", False)
    assert plain["content"] == "just text" and plain["content_type"] == "text/plain"
    assert data["content"] == '{\n  "k": [\n    1\n  ]\n}'
    assert pdf["content"] == "" and "PDF document" in pdf["error"]
    assert missing["error"] == "HTTP 404 Not Found" and missing["content"] == "# Not here"
    assert hop["final_url"] == server.url("/page") and hop["title"] == "Hello"
    assert "redirected from" in sneaky["error"] and "link-local" in sneaky["error"]
    assert "private address" in private["error"]
    assert "only http and https" in ftp["error"]
    assert "not a URL string" in number["error"]


def test_web_extract_refuses_loopback_by_default(server: Any) -> None:
    server.static("/", "internal")
    with registry() as reg:
        (result,) = call(reg, "web_extract", urls=[server.url("/")])["results"]
    assert "loopback" in result["error"] and result["content"] == ""
    assert server.requests == []


def test_long_pages_keep_head_and_tail_and_the_full_text_on_disk(server: Any) -> None:
    lines = [f"paragraph {i:04d}" for i in range(2000)]
    server.static("/long", "<p>" + "</p><p>".join(lines) + "</p>")
    with registry(allowed_hosts=["127.0.0.1"]) as reg:
        (r,) = call(reg, "web_extract", urls=[server.url("/long")], char_limit=1000)["results"]
        assert r["truncated"] is True and len(r["content"]) <= 1000
        assert r["content"].startswith("paragraph 0000")
        assert r["content"].endswith("paragraph 1999")
        assert r["full_text_path"] in r["content"]
        full = Path(r["full_text_path"]).read_text(encoding="utf-8")
        assert len(full) == r["total_chars"] and full.split("\n\n") == lines
        (again,) = call(reg, "web_extract", urls=[server.url("/long")])["results"]
        assert "truncated" not in again and again["content"] == full  # 50,000 by default
    assert not os.path.exists(r["full_text_path"])  # registry.close() removed it


def test_urls_are_fetched_concurrently(server: Any) -> None:
    """Each handler waits until all three requests are in flight; serial fetching fails."""
    gate = threading.Barrier(3, timeout=10)

    def together(h: Any) -> None:
        try:
            gate.wait()
            h.reply(200, "together", {"Content-Type": "text/plain"})
        except threading.BrokenBarrierError:
            h.reply(500, "alone", {"Content-Type": "text/plain"})

    for name in ("a", "b", "c"):
        server.route(f"/{name}", together)
    with registry(allowed_hosts=["127.0.0.1"]) as reg:
        results = call(reg, "web_extract", urls=[server.url(f"/{n}") for n in "abc"])["results"]
    assert [r["content"] for r in results] == ["together"] * 3


def test_duplicate_urls_are_fetched_once(server: Any) -> None:
    server.static("/d", "same", "text/plain")
    with registry(allowed_hosts=["127.0.0.1"]) as reg:
        results = call(reg, "web_extract", urls=[server.url("/d")] * 3)["results"]
    assert [r["content"] for r in results] == ["same"] * 3 and len(server.requests) == 1


@pytest.mark.parametrize(("args", "message"), [
    ({}, "non-empty list"),
    ({"urls": []}, "non-empty list"),
    ({"urls": {"a": 1}}, "non-empty list"),
    ({"urls": ["http://x/"] * 21}, "at most 20 URLs"),
    ({"urls": ["http://x/"], "char_limit": 50}, "integer >= 100"),
    ({"urls": ["http://x/"], "char_limit": "1000"}, "integer >= 100"),
])
def test_web_extract_bad_arguments(args: dict[str, Any], message: str) -> None:
    with registry() as reg:
        assert message in call(reg, "web_extract", **args)["error"]


def test_single_url_string_is_accepted(server: Any) -> None:
    server.static("/s", "one", "text/plain")
    with registry(allowed_hosts=["127.0.0.1"]) as reg:
        assert call(reg, "web_extract", urls=server.url("/s"))["results"][0]["content"] == "one"


def test_hosts_can_supply_their_own_provider() -> None:
    from execengine.web.providers import SearchResult, StaticProvider

    fake = StaticProvider([SearchResult("t", "https://u.example/", "d")])
    with registry(provider="searxng", **{"searxng.url": "http://127.0.0.1:1/"}) as reg:
        text = reg.dispatch("web_search", {"query": " q ", "limit": 50},
                            CallContext(search_provider=fake))
    assert json.loads(text) == {"data": {"web": [
        {"title": "t", "url": "https://u.example/", "description": "d"}]}}
    assert fake.queries == [("q", 20)]


def test_a_script_calls_both_tools_through_hermes_tools(server: Any) -> None:
    from execengine.engine.core import execute_code

    server.static("/p", "<title>Hi</title><p>from a script</p>")
    server.route("/search", lambda h: h.reply(200, json.dumps({"results": [
        {"title": "A", "url": "https://a.example/", "content": "c"}]}),
        {"Content-Type": "application/json"}))
    cfg = Config().with_overrides({
        "web.allowed_hosts": ["127.0.0.1"], "web.provider": "searxng",
        "web.searxng.url": server.url("/"), "code_execution.mode": "strict",
        "code_execution.timeout": 30})
    code = f"""
from hermes_tools import web_extract, web_search
r = web_extract([{server.url('/p')!r}, "http://169.254.169.254/"])
print(r["results"][0]["title"], "|", r["results"][0]["content"])
print("blocked" if "link-local" in r["results"][1]["error"] else "NOT BLOCKED")
print(web_search("q", limit=1)["data"]["web"][0]["url"])
"""
    result = execute_code(code, config=cfg)
    assert result.status == "success", result
    assert result.output.splitlines() == ["Hi | from a script", "blocked", "https://a.example/"]
    assert result.tool_calls_made == 2
