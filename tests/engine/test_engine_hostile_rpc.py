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


# -- issue 40 item 1: one deep argument cost a script its tool access for good -------------

DEEP_CALL = r'''
import json
from hermes_tools import ToolCallError, web_search, aio
import asyncio

deep = []
for _ in range({depth}):
    deep = [deep]
try:
    web_search(query=deep)
    print("deep: answered")
except ToolCallError as exc:
    print("deep:", exc)
print("sync:", web_search(query="after")["query"])
async def both():
    return await asyncio.gather(aio.web_search(query="a"), aio.web_search(query="b"))
print("async:", [r["query"] for r in asyncio.run(both())])
'''


def _deep_call_answers(output: str, depth: int = 63) -> None:
    lines = output.splitlines()
    if depth < 2000:
        assert lines[0].startswith("deep: the execengine host rejected the call to "
                                   "'web_search'") and "nests deeper than 64 levels" in lines[0]
    else:  # too deep for the child's own encoder: refused before sending
        assert lines[0] == ("deep: the arguments of the call to 'web_search' nest too deeply "
                            "to encode; nothing was sent")
    assert lines[1:] == ["sync: after", "async: ['a', 'b']"]


@pytest.mark.parametrize("depth", [63, 500, 5000])
def test_a_call_nested_too_deeply_is_refused_and_later_calls_work(make_engine, depth):
    """The refusal names the call (before: ``id: null``, and the script's client then
    failed every later call of the execution)."""
    engine = make_engine()
    r = engine.execute(DEEP_CALL.format(depth=depth), enabled_toolsets=["web"])
    assert r.status == "success", (r.error, r.stderr[-2000:])
    _deep_call_answers(r.output, depth)


def test_a_session_survives_a_call_nested_too_deeply():
    """The same call in a session cell: later calls of that cell and later cells work
    (before, every later cell failed until the session was reset)."""
    from _session_helpers import session_engine

    with session_engine("none") as engine:
        r = engine.execute(DEEP_CALL.format(depth=63), session="s", enabled_toolsets=["web"])
        assert r.status == "success", (r.error, r.stderr[-2000:])
        _deep_call_answers(r.output)
        again = engine.execute("print(web_search(query='next cell')['query'])", session="s",
                               enabled_toolsets=["web"])
        assert (again.status, again.output, again.notice) == ("success", "next cell\n", None)
