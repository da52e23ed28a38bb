"""The official MCP client drives `execengine mcp` over stdio and streamable HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import anyio
import pytest
from _mcp_helpers import cli_env, serve_http, stop

SCRIPT = """
from hermes_tools import read_file
print(read_file({path!r})["content"].strip().upper())
"""


@pytest.fixture
def setup(tmp_path, no_leaks):
    config = tmp_path / "config.yaml"
    # isolation none keeps these tests fast and runnable unprivileged; an MCP client cannot
    # answer an approval prompt, so this trusted test host allows unsandboxed scripts
    config.write_text("code_execution: {isolation: none, mode: strict}\n"
                      "approvals: {execute_code: allow}\n")
    data = tmp_path / "data.txt"
    data.write_text("hello over mcp\n")
    return config, data, cli_env(tmp_path)


async def _use(session, data):
    await session.initialize()
    listed = await session.list_tools()
    names = [t.name for t in listed.tools]
    result = await session.call_tool("execute_code", {"code": SCRIPT.format(path=str(data))})
    return names, listed, result


def _check(names, listed, result):
    assert names == ["execute_code"]
    assert "hermes_tools" in listed.tools[0].description
    assert not result.is_error
    payload = json.loads(result.content[0].text)
    assert payload["status"] == "success"
    assert payload["output"].strip().endswith("HELLO OVER MCP")  # read_file numbers lines


def test_stdio(setup):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    config, data, env = setup
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "execengine", "--config", str(config), "mcp"],
                                   env=env)

    async def main():
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            return await _use(session, data)

    _check(*anyio.run(main))


def _http_session(url, data, headers=None):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with httpx2.AsyncClient(headers=headers or {}, timeout=60) as client, \
                streamable_http_client(url, http_client=client) as (r, w), \
                ClientSession(r, w) as session:
            return await _use(session, data)

    return anyio.run(main)


def test_streamable_http_on_loopback(setup):
    config, data, env = setup
    server = serve_http(["--config", str(config), "mcp", "--http", "127.0.0.1:0"], env)
    try:
        _check(*_http_session(server.url, data, server.auth))
    finally:
        stop(server.proc)


def test_http_token_is_required_and_checked(setup):
    config, data, env = setup
    env = {**env, "MCP_TOKEN": "t0ken-for-test"}
    server = serve_http(["--config", str(config), "mcp", "--http", "127.0.0.1:0",
                         "--token-env", "MCP_TOKEN"], env)
    url = server.url
    try:
        request = urllib.request.Request(url, data=b"{}", method="POST",
                                         headers={"content-type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request,
                                                                              timeout=20)
        assert info.value.code == 401
        info.value.close()
        _check(*_http_session(url, data, {"Authorization": "Bearer t0ken-for-test"}))
    finally:
        stop(server.proc)


def test_binding_beyond_loopback_without_a_token_is_refused(setup):
    config, _, env = setup
    done = subprocess.run([sys.executable, "-m", "execengine", "--config", str(config),
                           "mcp", "--http", "0.0.0.0:0"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a token" in done.stderr


def test_serve_tools_exposes_the_tools_too(setup):
    from execengine.config import parse_config as parse
    from execengine.engine import Engine
    from execengine.mcp.server import offered_tools
    from execengine.registry import ToolRegistry

    config = parse("code_execution: {isolation: none}\nmcp: {serve_tools: true}\n")
    with ToolRegistry.with_builtins(config, plugins=False) as reg, Engine(config, reg):
        names = {fn["name"] for fn in offered_tools(reg, serve_tools=True)}
        assert {"execute_code", "read_file"} <= names
        assert [fn["name"] for fn in offered_tools(reg, serve_tools=False)] == ["execute_code"]


def test_an_http_server_as_a_tool_source_with_a_token_header(setup, mcp_registry):
    """The client's streamable HTTP transport, against execengine's own HTTP server."""
    config, data, env = setup
    env = {**env, "MCP_TOKEN": "http-t0ken"}
    server = serve_http(["--config", str(config), "mcp", "--http", "127.0.0.1:0",
                         "--token-env", "MCP_TOKEN"], env)
    try:
        servers = (f"  ee:\n    url: {server.url}\n"
                   "    headers: {Authorization: 'Bearer ${MCP_TOKEN}'}\n")
        reg, manager = mcp_registry(servers, environ={"MCP_TOKEN": "http-t0ken"})
        assert manager.status()[0].state == "ready", reg.load_errors
        answer = json.loads(reg.dispatch("mcp_ee_execute_code",
                                         {"code": SCRIPT.format(path=str(data))}))
        assert answer["result"].count("HELLO OVER MCP") == 1
        reg2, _ = mcp_registry(servers.replace("ee:", "wrong:"),
                               environ={"MCP_TOKEN": "not-the-token"})
        assert "(HTTP 401 from http://127.0.0.1:" in reg2.load_errors["mcp server wrong"]
    finally:
        stop(server.proc)
