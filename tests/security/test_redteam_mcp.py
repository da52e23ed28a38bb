"""Red team: a hostile MCP client against ``execengine mcp`` (real server processes, the
official SDK client and raw HTTP / stdio bytes).

* two clients of one HTTP server must not share a kernel (one reading the other's
  variables); the negative control: two calls of *one* client do share it;
* a model-issued ``execute_code`` at level ``none`` with nobody to ask is blocked
  (nothing runs: a marker file is not created), while ``approvals.execute_code: allow``
  (the negative control) runs the same script;
* a tool not offered (``--tools`` off) is refused, not dispatched;
* malformed JSON-RPC, a huge message and many concurrent requests over stdio: the server
  answers every well-formed request exactly once and stays up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import anyio
import pytest

from tests.mcp._mcp_helpers import START, cli_env, serve_http, stop

pytest.importorskip("mcp")
# each test starts a server process (about 3 s idle, over 30 s on a loaded 2-core host)
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def env(tmp_path):
    return cli_env(tmp_path)


def _config(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


TRUSTED = ("code_execution: {isolation: none, mode: strict, timeout: 30}\n"
           "approvals: {execute_code: allow}\n")


def _http_calls(url, codes, headers):
    """One MCP client session calling execute_code once per code; the payloads."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        out = []
        async with httpx2.AsyncClient(timeout=START, headers=headers) as client, \
                streamable_http_client(url, http_client=client) as (r, w), \
                ClientSession(r, w) as session:
            await session.initialize()
            for code in codes:
                res = await session.call_tool("execute_code", {"code": code})
                out.append(json.loads(res.content[0].text))
        return out

    return anyio.run(main)


SET = "secret_of_a = 'A-' + 'private'\nprint('set')"
PEEK = "print(globals().get('secret_of_a', 'NOTHING'))"


def test_two_mcp_clients_do_not_share_a_kernel(tmp_path, env):
    server = serve_http(["--config", str(_config(tmp_path, TRUSTED)), "mcp", "--http",
                         "127.0.0.1:0"], env)
    try:  # negative control: one client keeps state
        one = _http_calls(server.url, [SET, PEEK], server.auth)
        other = _http_calls(server.url, [PEEK], server.auth)
    finally:
        stop(server.proc)
    assert one[0]["status"] == "success", one
    assert one[1]["output"].strip() == "A-private", one
    assert other[0]["status"] == "success", other
    assert other[0]["output"].strip() == "NOTHING", other


def _stdio_exchange(config, env, messages: list[bytes], expect_ids: set,
                    timeout: float = 60.0) -> dict:
    """Raw newline-delimited JSON-RPC over the server's stdin; the replies by id."""
    proc = subprocess.Popen([sys.executable, "-m", "execengine", "--config", str(config),
                             "mcp"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    replies: dict = {}
    others: list = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for msg in messages:
            proc.stdin.write(msg)
        proc.stdin.flush()
        os.set_blocking(proc.stdout.fileno(), False)
        buf = b""
        deadline = time.monotonic() + timeout
        while not expect_ids <= replies.keys() and time.monotonic() < deadline:
            try:
                chunk = os.read(proc.stdout.fileno(), 1 << 20)
            except BlockingIOError:
                time.sleep(0.02)
                continue
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if "id" in msg and msg["id"] is not None:
                    assert msg["id"] not in replies, f"two replies to {msg['id']}"
                    replies[msg["id"]] = msg
                else:
                    others.append(msg)
        alive = proc.poll() is None
    finally:
        stop(proc, wait=15)
    replies["_alive"] = alive
    return replies


def _rpc(id_, method, params=None) -> bytes:
    msg = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return (json.dumps(msg) + "\n").encode()


INIT = [
    _rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "redteam", "version": "0"}}),
    b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
]


def test_hostile_json_rpc_over_stdio_gets_one_reply_each(tmp_path, env):
    config = _config(tmp_path, TRUSTED)
    hostile = [
        b"this is not json\n",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}\n',            # no params
        _rpc(2, "tools/call", {"name": "execute_code", "arguments": "nope"}),
        _rpc(3, "tools/call", {"name": "terminal", "arguments": {"command": "id"}}),
        _rpc(4, "tools/call", {"name": "read_file", "arguments": {"path": "/etc/passwd"}}),
        _rpc(5, "no/such/method"),
        # deep nesting: the SDK drops a message its parser cannot read (no id to answer)
        b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": '
        + b"[" * 5000 + b"]" * 5000 + b"}\n",
        _rpc(7, "tools/call", {"name": "execute_code",
                               "arguments": {"code": "print(len('" + "x" * (8 << 20)
                                             + "'))"}}),                       # 8 MiB message
        _rpc(8, "notifications/cancelled", {"requestId": 9}),                 # cancel first
        *[_rpc(100 + i, "tools/call", {"name": "execute_code",
                                      "arguments": {"code": f"print({i} * 2)"}})
          for i in range(24)],                                                # concurrent
        _rpc(9, "tools/list"),
    ]
    want = {0, 1, 2, 3, 4, 5, 7, 9, *range(100, 124)}
    replies = _stdio_exchange(config, env, INIT + hostile, want, timeout=START + 60)
    assert replies.pop("_alive"), "the server died"
    assert want <= replies.keys(), sorted(want - replies.keys())
    for i in range(24):  # every concurrent call answered with its own result
        text = replies[100 + i]["result"]["content"][0]["text"]
        assert json.loads(text)["output"].strip() == str(i * 2), (i, text)
    for id_ in (3, 4):  # tools not offered are refused, not run
        result = replies[id_].get("result")
        if result is not None:
            text = result["content"][0]["text"]
            assert "unknown tool" in text and "root:" not in text, text
    tools = [t["name"] for t in replies[9]["result"]["tools"]]
    assert tools == ["execute_code"], tools


GATE = """
open({marker!r}, "w").write("ran")
print("ran")
"""


@pytest.mark.parametrize("policy", ["auto", "ask", "allow"])
def test_execute_code_at_none_with_nobody_to_ask_is_blocked(policy, tmp_path, env):
    """An MCP client cannot answer an approval prompt: at level ``none`` a script runs only
    when the host said it is trusted (``allow``, the negative control)."""
    marker = tmp_path / "marker"
    config = _config(tmp_path, "code_execution: {isolation: none, timeout: 30}\n"
                               f"approvals: {{execute_code: {policy}}}\n")
    call = _rpc(1, "tools/call", {"name": "execute_code",
                                  "arguments": {"code": GATE.format(marker=str(marker))}})
    replies = _stdio_exchange(config, env, [*INIT, call], {0, 1}, timeout=START)
    text = replies[1]["result"]["content"][0]["text"]
    if policy == "allow":
        assert marker.exists() and "ran" in text, text
        return
    assert not marker.exists(), text
    assert "BLOCKED" in text and replies[1]["result"]["isError"], text


def _post(port: int, headers: dict, addr: str = "127.0.0.1") -> int:
    import http.client

    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "redteam", "version": "0"}}})
    conn = http.client.HTTPConnection(addr, port, timeout=START)
    try:
        conn.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", **headers})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


@pytest.mark.parametrize("addr", ["127.0.0.1", "127.0.0.2"])
def test_http_on_loopback_refuses_a_rebound_host_or_a_foreign_origin(tmp_path, env, addr):
    """DNS rebinding: a web page whose name now points at the server's loopback address
    sends its own Host and Origin; the server must refuse both (a page has no token, but
    the guard holds even for a request that has it). Any loopback address: the SDK
    guards only 127.0.0.1, localhost and ::1 by itself, and a server on 127.0.0.2 ran a
    rebound page's code."""
    server = serve_http(["--config", str(_config(tmp_path, TRUSTED)), "mcp", "--http",
                         f"{addr}:0"], env)
    auth = server.auth
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    try:  # with the token (a rebound page has none, but the guard holds even with it)
        own = _post(port, {"Host": f"{addr}:{port}", **auth}, addr)  # the negative control
        named = _post(port, {"Host": f"localhost:{port}", **auth}, addr)
        rebound = _post(port, {"Host": "evil.example.com", **auth}, addr)
        prefixed = _post(port, {"Host": "localhost.evil.example.com", **auth}, addr)
        origin = _post(port, {"Host": f"{addr}:{port}",
                              "Origin": "http://evil.example.com", **auth}, addr)
    finally:
        stop(server.proc)
    assert own == 200 and named == 200, (own, named)
    assert rebound in (403, 421) and prefixed in (403, 421), (rebound, prefixed)
    assert origin in (403, 421), origin
