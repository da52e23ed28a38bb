"""Limits end to end: message size, hung tool calls."""

from __future__ import annotations

import textwrap
import threading
import time

from _engine_helpers import ECHO_SCHEMA, Recorder, engine_config

from execengine.engine import Engine
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry


def run(engine, code, **kw):
    return engine.execute(textwrap.dedent(code), **kw)


def test_oversized_call_fails_alone_and_the_connection_lives_on(make_engine, calls):
    engine = make_engine(max_message_bytes=4096)
    r = run(engine, """
        from hermes_tools import web_search
        from _execengine.client import ToolCallError
        try:
            web_search("x" * 5000)
        except ToolCallError as exc:
            print("refused:", exc)
        print(web_search("small")["query"])
    """)
    assert r.status == "success", r.stderr
    first, second = r.output.splitlines()
    assert first.startswith("refused: the call to 'web_search' is ")
    assert "more than the host accepts (4096 bytes)" in first
    assert second == "small"
    assert [a["query"] for a, _, _ in calls] == ["small"]
    assert r.tool_calls_made == 1


def test_a_second_execution_runs_while_the_first_has_hung_calls(leakcheck):
    cfg = engine_config(max_tool_calls=100, max_parallel_tool_calls=16)
    release = threading.Event()
    lock = threading.Lock()
    entered: list[str] = []

    def web_search(args, ctx):
        with lock:
            entered.append(args["query"])
        if args["query"] == "hang":
            release.wait(30)
        return {"query": args["query"]}

    reg = ToolRegistry(cfg)
    reg.register("web_search", "web", ECHO_SCHEMA, web_search,
                 policy=ToolPolicy(script_callable=True))
    launcher = Recorder()
    leakcheck.append(launcher)
    stop = threading.Event()
    first: list = []
    try:
        with Engine(config=cfg, registry=reg, launcher=launcher) as engine:
            t = threading.Thread(target=lambda: first.append(run(engine, """
                from concurrent.futures import ThreadPoolExecutor
                from hermes_tools import web_search
                with ThreadPoolExecutor(20) as pool:
                    list(pool.map(lambda _: web_search("hang"), range(20)))
            """, interrupt=stop)))
            t.start()
            deadline = time.monotonic() + 10
            while entered.count("hang") < 16:  # every slot of the first execution is held
                assert time.monotonic() < deadline, entered
                time.sleep(0.01)
            second = run(engine, """
                from concurrent.futures import ThreadPoolExecutor
                from hermes_tools import web_search
                with ThreadPoolExecutor(8) as pool:
                    print(sorted(r["query"] for r in pool.map(web_search, "abcdefgh")))
            """)
            assert second.status == "success", second.stderr
            assert second.output == str(list("abcdefgh")) + "\n"
            stop.set()
            t.join(15)
            assert first[0].status == "interrupted"
            assert first[0].tool_calls_made == 20  # 16 running + 4 waiting, all admitted
            release.set()  # the abandoned calls return now; nobody gets their results
            pool = engine.server._pool
            deadline = time.monotonic() + 5
            while pool.busy:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert entered.count("hang") == 16  # the 4 waiting calls never started
    finally:
        release.set()
        reg.close()
