"""Sessions at scale and at the edges of their life: many at once, host death, asyncio,
the oldest supported child interpreter."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from _session_helpers import (
    kernel_of,
    leftover_processes,
    level_params,
    session_engine,
    wait_until,
)

from execengine.proctree import RUN_TOKEN_VAR, carriers


def test_fifty_sessions_twenty_cells_from_threads_no_cross_talk():
    sessions, cells = 50, 20
    wrong: list[str] = []
    tokens: list[str] = []
    with session_engine("none", max_sessions=sessions, timeout=60.0) as e:
        barrier = threading.Barrier(sessions)

        def worker(i: int) -> None:
            name = f"s{i}"
            r = e.execute(f"me = {name!r}\nn = 0", session=name)
            if not r.ok:
                wrong.append(f"{name}: {r.error}")
            barrier.wait(60)
            for j in range(cells):
                r = e.execute(f"n += 1\nprint(me, n, {j})", session=name)
                if r.output != f"{name} {j + 1} {j}\n" or not r.ok:
                    wrong.append(f"{name} cell {j}: {r.output!r} {r.error!r}")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        assert wrong == []
        assert len(e.sessions.list_sessions()) == sessions
        tokens = [kernel_of(e, f"s{i}").process.child.run_token for i in range(sessions)]
    # session_engine checked directories and processes after close; once more, by token
    assert leftover_processes(tokens) == []


@pytest.mark.parametrize("level", level_params())
def test_a_kernel_dies_within_a_second_of_losing_its_host(level):
    """The kernel's watchdog is EOF on its command pipe, which only the host holds: close
    that end alone (what the host's death does) and the kernel is gone within 1 s."""
    with session_engine(level) as e:
        r = e.execute("import subprocess\np = subprocess.Popen(['sleep', '60'])\n"
                      "import threading, time\n"
                      "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                      "print(p.pid)", session="s")
        assert r.ok
        kernel = kernel_of(e, "s")
        token = kernel.process.child.run_token
        assert carriers(RUN_TOKEN_VAR, token)
        started = time.monotonic()
        kernel.process.begin_close()
        assert wait_until(lambda: not leftover_processes([token]), 1.0), \
            leftover_processes([token])
        assert time.monotonic() - started <= 1.0


HOST = textwrap.dedent("""
    import sys
    from execengine.config import Config
    from execengine.engine import Engine
    from execengine.registry import ToolRegistry
    cfg = Config().with_overrides({"code_execution.mode": "strict",
                                   "code_execution.isolation": "none"})
    with ToolRegistry(cfg) as reg, Engine(config=cfg, registry=reg) as e:
        r = e.execute("x = 1", session="s")
        k = e.sessions._sessions["s"].kernel
        print(k.process.child.run_token, k.staging.path, k.channel.socket_dir, flush=True)
        sys.stdin.read()
""")


def test_a_kernel_dies_with_its_host_process(tmp_path):
    host = subprocess.Popen([sys.executable, "-c", HOST], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    leftovers: list[str] = []
    try:
        line = host.stdout.readline().split()  # type: ignore[union-attr]
        assert len(line) == 3, line
        token, *leftovers = line
        assert carriers(RUN_TOKEN_VAR, token)
        host.send_signal(signal.SIGKILL)
        host.wait(5)
        started = time.monotonic()
        assert wait_until(lambda: not leftover_processes([token]), 1.0)
        assert time.monotonic() - started <= 1.0
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(5)
        for d in leftovers:  # a killed host cannot clean up its directories
            shutil.rmtree(d, ignore_errors=True)
        if host.stdin is not None:
            host.stdin.close()
        if host.stdout is not None:
            host.stdout.close()


def test_aexecute_runs_cells_and_cancelling_interrupts_in_place():
    async def main(e) -> None:
        r = await e.aexecute("x = 5", session="s")
        assert r.ok
        task = asyncio.ensure_future(e.aexecute("import time\ntime.sleep(60)", session="s"))
        while kernel_of(e, "s") is None or not e.sessions.list_sessions()[0].busy:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        r = await e.aexecute("print(x)", session="s")
        assert (r.output, r.notice) == ("5\n", None)

    with session_engine("none", kill_grace=10.0) as e:  # the cell stops at once anyway
        asyncio.run(main(e))


PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"


@pytest.mark.skipif(not os.access(PY38, os.X_OK), reason="no usable Python 3.8 here")
def test_the_kernel_runs_on_python_3_8(tmp_path):
    os.chmod(tmp_path, 0o755)
    with session_engine("none", mode="project", python=PY38) as e:
        code = "import sys\nv = sys.version_info[:2]"
        assert e.execute(code, session="s", cwd=str(tmp_path)).ok
        r = e.execute("print(v)\nfrom hermes_tools import web_search\n"
                      "print(web_search('q')['query'])", session="s", cwd=str(tmp_path))
        assert r.output == "(3, 8)\nq\n", r


def test_a_kernel_that_never_says_ready_is_killed_and_reported(make_engine, leakcheck):
    from _engine_helpers import Recorder, child_argv, stray_count

    launcher = Recorder(argv=child_argv("never_hello.py"))
    e = make_engine(launcher, hello_timeout=3.0)
    r = e.execute("print(1)", session="s")
    assert r.status == "error" and "did not start within 3s" in r.error
    assert e.sessions.list_sessions() == []
    assert stray_count(launcher.specs[0]) == 0
    launcher.argv = None  # the real kernel from now on: the session works
    r = e.execute("print(2)", session="s")
    assert r.output == "2\n", r


def test_the_tool_schema_offers_reset_and_says_state_persists():
    from _engine_helpers import engine_config, make_registry

    from execengine.engine import Engine
    from execengine.tools import code_execution_tool

    reg = make_registry(engine_config(session_idle_timeout=600))
    reg.apply(code_execution_tool.specs)
    try:
        with Engine(reg.config, reg):
            fn = next(d["function"] for d in reg.get_tool_definitions()
                      if d["function"]["name"] == "execute_code")
            assert fn["parameters"]["properties"]["reset"]["type"] == "boolean"
            assert fn["parameters"]["required"] == ["code"]
            assert "State persists between calls" in fn["description"]
            assert "reset=true" in fn["description"] and "idle for 600s" in fn["description"]
    finally:
        reg.close()


def test_closing_the_engine_under_a_cell_stuck_in_a_c_loop():
    """The kernel cannot even read its EOF (the loop holds the GIL): close still returns,
    bounded, and the cell's caller gets a result, not an exception."""
    results: list = []
    errors: list = []
    with session_engine("none") as e:
        assert e.execute("x = 1", session="s").ok

        def run() -> None:
            try:
                results.append(e.execute("sum(range(10 ** 15))", session="s", timeout=60))
            except BaseException as exc:  # pragma: no cover - the failure being tested
                errors.append(exc)

        t = threading.Thread(target=run)
        t.start()
        assert wait_until(lambda: e.sessions.list_sessions()[0].busy)
        token = kernel_of(e, "s").process.child.run_token
        started = time.monotonic()
        e.close()
        assert time.monotonic() - started < 15
        t.join(10)
        assert not t.is_alive() and errors == []
        assert results[0].status == "error" and "state was lost" in results[0].error
        assert wait_until(lambda: not leftover_processes([token]), 5.0)
