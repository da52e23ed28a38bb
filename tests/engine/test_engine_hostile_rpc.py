"""A script that attacks the RPC from inside (poison frames, a connection flood) gets a
normal result, its own later tool calls still work, and so does the next execution.
``execute()`` never raises for what a script does."""

from __future__ import annotations

import json

import pytest
from _engine_helpers import engine_config, make_registry

from execengine.engine import Engine
from execengine.isolation import detect
from execengine.launch.factory import make_launcher

HOSTILE = r'''
import json, os, socket
from _execengine import zmtp
from hermes_tools import web_search

path = os.environ["EXECENGINE_RPC_ENDPOINT"]
conn = zmtp.connect(path)
conn.send(json.dumps({"v": 1, "type": "hello", "exec": os.environ["EXECENGINE_EXEC_ID"],
                      "token": os.environ["EXECENGINE_RPC_TOKEN"]}).encode())
assert json.loads(conn.recv()[0])["type"] == "welcome"
poison = [b"[" * 50000, b'{"v":1,"type":"call","id":"\\ud800","tool":"\\udc00"}',
          b'{"v":1,"type":"call","id":"x","tool":"web_search","args":{"query":"\\udcff"}}',
          b"\xff" * 100, b"{" * 200000]
for frame in poison:
    conn.send(frame)
kinds = sorted(json.loads(conn.recv()[0])["type"] for _ in poison)
flood = []
for _ in range(300):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(0.5)  # past the execution's cap and the backlog, a connect waits
    try:
        s.connect(path)
    except OSError:
        s.close()
        break
    flood.append(s)
for s in flood:
    s.close()
print(json.dumps({"kinds": kinds, "flood": len(flood),
                  "after": web_search(query="still here")["query"]}))
'''


def _check(engine: Engine) -> None:
    r = engine.execute(HOSTILE, enabled_toolsets=["web"])
    assert r.status == "success", (r.error, r.stderr[-2000:])
    got = json.loads(r.output.strip().splitlines()[-1])
    assert got["kinds"] == ["error", "error", "error", "result", "result"]
    assert got["after"] == "still here" and got["flood"] > 0
    again = engine.execute("from hermes_tools import web_search\n"
                           "print(web_search(query='next')['query'])",
                           enabled_toolsets=["web"])
    assert again.status == "success" and again.output == "next\n"


def test_rpc_attack_from_a_script_at_none(make_engine):
    _check(make_engine())


def test_rpc_attack_from_a_script_at_auto():
    cfg = engine_config(isolation="auto")
    if not any(detect().levels.get(lv) for lv in ("restricted", "isolated")):
        pytest.skip("no sandbox level here")
    with make_registry(cfg) as reg, Engine(config=cfg, registry=reg,
                                           launcher=make_launcher(cfg)) as engine:
        _check(engine)
