"""Red team (issue 39, item 2): one MCP HTTP client starved or evicted the others.

Six concurrent ``execute_code`` calls of a long sleep from one client held every thread of
asyncio's default executor (six here), so another client's ``print()`` waited for them; and
eight session ids from one client made the engine close another client's idle kernel
(least recently used across everyone). Now each client (one per bearer token) has its own
limits: calls at once, session kernels (a client only ever gives up its own), and calls run
on the server's own bounded executor (:mod:`execengine.mcp.fairness`).

Real server process, real SDK clients (``mcp.ClientSession`` over streamable HTTP), two
tokens = two clients. Orders are observed, not timed: the hog's calls sleep far longer than
anything else takes. Negative controls: the hog's own next call does wait behind its own
limit (the probe sees waiting), and a client's own extra sessions do close its oldest
kernel (the probe sees eviction).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

import anyio
import pytest

from tests.mcp._mcp_helpers import START, cli_env, serve_http, stop

pytest.importorskip("mcp")
pytestmark = pytest.mark.timeout(300)
HOG_SLEEP = 90  # seconds: the hog's cells outlast everything the test waits for

CONFIG = ("code_execution: {isolation: none, mode: strict, timeout: 120, max_sessions: 8}\n"
          "approvals: {execute_code: allow}\n")


@pytest.fixture
def server(tmp_path):
    env = cli_env(tmp_path, HOG_TOKEN="hog-t0ken-1", FAIR_TOKEN="fair-t0ken-2")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    served = serve_http(["--config", str(config), "mcp", "--http", "127.0.0.1:0",
                         "--token-env", "HOG_TOKEN", "--token-env", "FAIR_TOKEN"], env)
    try:
        yield served.url
    finally:
        stop(served.proc)


def _calls(url: str, token: str, codes: list[str], *, sessions: int = 1,
           concurrent: bool = False, on_result=None) -> list[dict]:
    """Each code in its own call of execute_code, over ``sessions`` MCP sessions of one
    client (round robin), one after another or all at once; the payloads in order."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def one(session, i, code, out):
        res = await session.call_tool("execute_code", {"code": code})
        out[i] = json.loads(res.content[0].text)
        if on_result is not None:
            on_result(i, out[i])

    async def main():
        out: list[dict] = [{}] * len(codes)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=START) as http:
            opened = []
            try:
                for _ in range(sessions):
                    cm = streamable_http_client(url, http_client=http)
                    r, w = await cm.__aenter__()
                    opened.append(cm)
                    session = ClientSession(r, w)
                    await session.__aenter__()
                    opened.append(session)
                    await session.initialize()
                handles = opened[1::2]
                if concurrent:
                    async with anyio.create_task_group() as tg:
                        for i, code in enumerate(codes):
                            tg.start_soon(one, handles[i % sessions], i, code, out)
                else:
                    for i, code in enumerate(codes):
                        await one(handles[i % sessions], i, code, out)
            finally:
                for cm in reversed(opened):
                    with contextlib.suppress(Exception):  # the server may be gone
                        await cm.__aexit__(None, None, None)
        return out

    return anyio.run(main)


def _hog(url: str, n: int, finished: list, marks) -> threading.Thread:
    """The hog: ``n`` concurrent long sleeps over ``n`` sessions, in the background; each
    cell makes a file in ``marks`` when it starts."""
    code = ("import os, time, uuid\n"
            f"open(os.path.join({str(marks)!r}, uuid.uuid4().hex), 'w').close()\n"
            f"time.sleep({HOG_SLEEP})")

    def run() -> None:
        with contextlib.suppress(Exception):  # ended by the server's stop
            _calls(url, "hog-t0ken-1", [code] * n, sessions=n, concurrent=True,
                   on_result=lambda i, r: finished.append(r))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_one_client_does_not_starve_another(server, tmp_path):
    marks = tmp_path / "started"
    marks.mkdir()
    finished: list[dict] = []
    hog = _hog(server, 6, finished, marks)
    deadline = time.monotonic() + START
    while time.monotonic() < deadline and len(os.listdir(marks)) < 2:
        time.sleep(0.2)
    assert len(os.listdir(marks)) >= 2, "the hog's cells never started"
    fair = _calls(server, "fair-t0ken-2", ["print('fair ' + 'answer')"])
    assert fair[0].get("status") == "success", fair
    assert fair[0]["output"].strip() == "fair answer", fair
    assert finished == [], "the fair client's call waited for the hog's sleeps"
    # negative control: the hog's own next call waits behind its own limit
    late: list[dict] = []

    def again() -> None:
        with contextlib.suppress(Exception):  # ended by the server's stop
            late.extend(_calls(server, "hog-t0ken-1", ["print('hog again')"]))

    waiter = threading.Thread(target=again, daemon=True)
    waiter.start()
    waiter.join(20)
    assert waiter.is_alive() and not late, late
    assert hog.is_alive() and finished == []


SET = "owned_by = 'fair ' + 'client'\nprint('set')"
PEEK = "print(globals().get('owned_by', 'GONE'))"


def test_one_client_cannot_evict_another_clients_kernel(server):
    # the fair client's kernel, with state in it, kept in one session
    import httpx2

    result: dict = {}

    async def fair_session(ready: threading.Event, go: threading.Event):
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": "Bearer fair-t0ken-2"},
                                      timeout=START) as http, \
                streamable_http_client(server, http_client=http) as (r, w), \
                ClientSession(r, w) as session:
            await session.initialize()
            res = await session.call_tool("execute_code", {"code": SET})
            result["set"] = json.loads(res.content[0].text)
            ready.set()
            while not go.is_set():
                await anyio.sleep(0.2)
            res = await session.call_tool("execute_code", {"code": PEEK})
            result["peek"] = json.loads(res.content[0].text)

    ready, go = threading.Event(), threading.Event()
    fair = threading.Thread(target=lambda: anyio.run(fair_session, ready, go), daemon=True)
    fair.start()
    assert ready.wait(START), result
    # the hog opens eight sessions, one cell each, one after another
    hog = _calls(server, "hog-t0ken-1", ["print('hog')"] * 8, sessions=8)
    assert all(r.get("status") == "success" for r in hog), hog
    go.set()
    fair.join(START)
    assert result["peek"]["output"].strip() == "fair client", result


def test_negative_control_a_clients_own_sessions_do_evict_its_oldest(server):
    # the same probe, the fair client against itself: its third session (its limit is
    # max_sessions // 4 = 2) closes its oldest kernel, and the state there is gone
    out = _calls(server, "fair-t0ken-2", [SET, "print(1)", "print(2)", PEEK], sessions=3)
    assert out[0]["output"].strip() == "set", out
    assert "GONE" in out[3]["output"], out
