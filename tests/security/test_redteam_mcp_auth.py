"""Red team (issue 39, item 1): ``execengine mcp --http 127.0.0.1:PORT --tools`` gave any
local user a root shell.

No token was needed on loopback, so another uid on the machine called ``terminal`` and
ran commands as the user who started the server (root here). Now every request must carry
the server's bearer token, loopback included; a token the user did not give is made at
start and written to a file only that user can read.

The attacker is a real other uid: ``nobody``, through ``setpriv``, running the system
Python with a raw MCP client (urllib) against a real server process. It cannot read the
token file, and without the token nothing it sends is served (initialize, tools/list,
tools/call, any method or path). The negative control: the very same client as
``nobody``, handed the token, initializes and gets a root shell from ``terminal`` — the
probe does detect the hole when the credential is there, so what shuts it is the token.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest

from tests.mcp._mcp_helpers import cli_env, serve_http, stop

pytest.importorskip("mcp")
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                       reason="needs root and setpriv to act as another uid"),
]
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

TRUSTED = ("code_execution: {isolation: none, mode: strict, timeout: 30}\n"
           "approvals: {execute_code: allow}\n")

# run as nobody by the system interpreter (standard library only): argv = url, token or
# "", token file; prints one JSON object of what it managed
CLIENT = r'''
import json, sys, urllib.request, urllib.error
url, token, token_file = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}
try:
    with open(token_file) as fh:
        out["token_read"] = fh.read().strip()
except OSError as exc:
    out["token_read"] = None
    out["token_error"] = type(exc).__name__
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def post(body, session=None, method="POST", path=None):
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    if token:
        headers["Authorization"] = "Bearer " + token
    if session:
        headers["Mcp-Session-Id"] = session
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(path or url, data=data, method=method, headers=headers)
    try:
        with opener.open(req, timeout=120) as resp:
            text = resp.read().decode()
            msgs = [json.loads(l[5:]) for l in text.splitlines() if l.startswith("data:")]
            if not msgs and text.strip().startswith("{"):
                msgs = [json.loads(text)]
            return resp.status, resp.headers.get("mcp-session-id"), msgs
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, None, []

init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "nobody", "version": "0"}}}
status, session, _ = post(init)
out["initialize"] = status
call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "terminal", "arguments": {"command": "id -u"}}}
if status == 200:
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    status, _, msgs = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
    out["tools"] = [t["name"] for m in msgs for t in m.get("result", {}).get("tools", [])]
    status, _, msgs = post(call, session)
    out["terminal"] = [c["text"] for m in msgs for c in m.get("result", {}).get("content", [])]
else:
    # everything else a client could try without the handshake
    out["others"] = [
        post(call)[0],
        post(call, session="0" * 32)[0],
        post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})[0],
        post(None, method="GET")[0],
        post(None, method="DELETE", session="0" * 32)[0],
        post(init, path=url.rsplit("/", 1)[0] + "/")[0],
        post(init, path=url + "/")[0],
    ]
print(json.dumps(out))
'''


@pytest.fixture
def server(tmp_path):
    env = cli_env(tmp_path)  # the token file goes under its home
    config = tmp_path / "config.yaml"
    config.write_text(TRUSTED)
    served = serve_http(["--config", str(config), "mcp", "--http", "127.0.0.1:0", "--tools"],
                        env)
    try:
        yield served.url, served.token_file
    finally:
        stop(served.proc, wait=15)
    # the token file goes with the server
    assert served.token_file is None or not os.path.exists(served.token_file)


def _as_nobody(url: str, token: str, token_file: str) -> dict:
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         SYSTEM_PYTHON, "-I", "-c", CLIENT, url, token, token_file],
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}, cwd="/",
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_another_uid_cannot_use_the_server(server):
    url, token_file = server
    seen = _as_nobody(url, "", token_file or "/nonexistent")
    assert seen["initialize"] == 401, seen
    assert seen["others"] == [401] * 7, seen
    assert "terminal" not in seen
    # a token was made, and only its owner can read it
    assert token_file is not None and seen["token_read"] is None, seen
    info = os.stat(token_file)
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
    assert stat.S_IMODE(os.stat(os.path.dirname(token_file)).st_mode) == 0o700


def test_negative_control_the_same_client_with_the_token_gets_the_shell(server):
    url, token_file = server
    with open(token_file) as fh:
        token = fh.read().strip()
    seen = _as_nobody(url, token, token_file)
    assert seen["token_read"] is None, seen  # it was handed the token, could not read it
    assert seen["initialize"] == 200, seen
    assert "terminal" in seen["tools"], seen
    output = json.loads(seen["terminal"][0])["output"].strip()
    assert output == "0", seen  # root's shell: what the token protects
