"""End to end: real children, real sockets, the real child runtime."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import textwrap
import threading
import time
from pathlib import Path

import psutil
from _engine_helpers import Recorder, child_argv, stray_count

from execengine.engine.result import INTERRUPTED
from execengine.policy import ToolPolicy


def run(engine, code, **kw):
    return engine.execute(textwrap.dedent(code), **kw)


def test_success_keeps_stderr_warnings(engine):
    r = run(engine, """
        import warnings, sys
        print("hi")
        warnings.warn("careful")
    """)
    assert r.status == "success" and r.exit_code == 0
    assert r.output == "hi\n"
    assert "careful" in r.stderr
    d = json.loads(r.to_json())
    assert d["status"] == "success" and "careful" in d["stderr"]
    assert d["tool_calls_made"] == 0 and isinstance(d["duration_seconds"], float)


def test_exception_is_error_with_traceback(engine):
    r = run(engine, "print('before')\nraise ValueError('nope')")
    assert r.status == "error" and r.exit_code == 1
    assert "ValueError: nope" in r.error and "bootstrap" not in r.error
    assert r.output == "before\n" + "\n\n--- stderr ---\n" + r.error


def test_nonzero_exit_without_stderr(engine):
    r = run(engine, "import sys; sys.exit(3)")
    assert (r.status, r.exit_code, r.error) == ("error", 3, "Script exited with code 3")


def test_empty_code(engine):
    for code in ("", "   \n"):
        r = engine.execute(code)
        assert json.loads(r.to_json()) == {"status": "error", "output": "",
                                           "tool_calls_made": 0, "duration_seconds": 0.0,
                                           "error": "No code provided."}


def test_timeout_keeps_output_and_kills_sigterm_ignorer(engine):
    t0 = time.monotonic()
    r = run(engine, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("partial", flush=True)
        time.sleep(60)
    """, timeout=1.0)
    assert time.monotonic() - t0 < 1.0 + 0.5 + 3  # timeout + grace + sweep bound
    assert r.status == "timeout" and r.exit_code == -9
    assert r.error == "Script timed out after 1s and was killed."
    assert r.output == "partial\n\n⏰ Script timed out after 1s and was killed."


def test_interrupt_from_another_thread_escalates(engine):
    stop = threading.Event()
    threading.Timer(0.8, stop.set).start()
    r = run(engine, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("working", flush=True)
        time.sleep(60)
    """, interrupt=stop)
    assert r.status == "interrupted" and r.exit_code == -9
    assert r.output == "working\n" + INTERRUPTED
    assert json.loads(r.to_json())["error"] == INTERRUPTED


def test_async_execute_and_cancel(engine):
    async def main():
        ok = await engine.aexecute("print(6 * 7)")
        task = asyncio.ensure_future(engine.aexecute("import time; time.sleep(60)"))
        await asyncio.sleep(0.5)
        task.cancel()
        t0 = time.monotonic()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return ok, time.monotonic() - t0

    ok, teardown = asyncio.run(main())
    assert ok.output == "42\n"
    assert teardown < 5


def test_tool_calls_return_decoded_results_and_pass_the_dispatcher(engine, calls):
    r = run(engine, """
        from hermes_tools import web_search, read_file, terminal
        import inspect
        print(web_search("cats"))
        print(read_file("x"))
        print(inspect.signature(web_search))
        print(inspect.signature(terminal))
        print(terminal("ls", background=True))
    """, task_id="t1")
    lines = r.output.splitlines()
    assert r.status == "error"  # background is not a parameter from scripts
    assert eval(lines[0]) == {"query": "cats", "limit": 5, "origin": "execute_code"}
    assert eval(lines[1]) == {"content": "double-encoded"}
    assert lines[2] == "(query: 'str', limit: 'int' = 5, sleep: 'float | None' = None) -> 'dict'"
    assert lines[3] == "(command: 'str', timeout: 'int | None' = None) -> 'dict'"
    assert "unexpected keyword argument 'background'" in r.error
    assert calls == [({"query": "cats", "limit": 5}, "execute_code", "t1")]
    assert r.tool_calls_made == 2


def test_background_terminal_refused_on_host(engine):
    r = run(engine, """
        from _execengine.client import call_tool
        print(call_tool("terminal", {"command": "sleep 1", "background": True}))
        print(call_tool("terminal", {"command": "echo"})["exit_code"])
    """)
    lines = r.output.splitlines()
    assert "background" in lines[0] and "not allowed" in lines[0] and lines[1] == "0"


def test_disallowed_tools_and_budget(make_engine):
    engine = make_engine(max_tool_calls=3)
    r = run(engine, """
        from _execengine.client import call_tool
        print(call_tool("memory", {}))
        print(call_tool("execute_code", {"code": "1"}))
        for i in range(5):
            print(call_tool("web_search", {"query": str(i)}))
        print("still running")
    """)
    lines = r.output.splitlines()
    assert r.status == "success"
    assert eval(lines[0]) == {"error": "Tool 'memory' is not available in execute_code. "
                                       "Available: read_file, terminal, web_search"}
    assert "execute_code" in lines[1] and "not available" in lines[1]
    limit = {"error": "Tool call limit reached (3). No more tool calls allowed in this "
                      "execution."}
    assert [eval(x) for x in lines[5:7]] == [limit, limit]
    assert lines[-1] == "still running"
    assert r.tool_calls_made == 3


def test_import_of_unavailable_tool_gets_a_hint(engine):
    r = run(engine, "from hermes_tools import write_file")
    assert r.status == "error"
    assert "write_file" in r.hint and "read_file, terminal, web_search" in r.hint


def test_twenty_concurrent_calls_from_threads(make_engine, calls):
    engine = make_engine(max_parallel_tool_calls=20)
    r = run(engine, """
        import time
        from concurrent.futures import ThreadPoolExecutor
        from hermes_tools import web_search
        t0 = time.monotonic()
        with ThreadPoolExecutor(20) as ex:
            out = list(ex.map(lambda i: web_search(f"q{i}", sleep=0.3), range(20)))
        assert [o["query"] for o in out] == [f"q{i}" for i in range(20)], out
        print(round(time.monotonic() - t0, 2))
    """)
    assert r.status == "success", r.error
    assert float(r.output) < 20 * 0.3 / 3  # parallel on the host, not serialised
    assert r.tool_calls_made == 20


def test_twenty_concurrent_calls_from_asyncio(make_engine):
    engine = make_engine(max_parallel_tool_calls=20)
    r = run(engine, """
        import asyncio, time
        from hermes_tools import aio
        async def main():
            t0 = time.monotonic()
            out = await asyncio.gather(*(aio.web_search(f"q{i}", sleep=0.3) for i in range(20)))
            assert [o["query"] for o in out] == [f"q{i}" for i in range(20)], out
            print(round(time.monotonic() - t0, 2))
        asyncio.run(main())
    """)
    assert r.status == "success", r.error
    assert float(r.output) < 20 * 0.3 / 3


def test_hundred_gathered_calls_overlap_with_the_default_limits(make_engine):
    # every call waits until all 100 are running on the host at once: with the default
    # limits they are (a per-execution limit under 100 would break the barrier)
    engine = make_engine(max_tool_calls=200)
    barrier = threading.Barrier(100, timeout=15)

    def rendezvous(args, ctx):
        try:
            return {"met": barrier.wait() >= 0}
        except threading.BrokenBarrierError:
            return {"met": False}

    engine.registry.register("rendezvous", "web", {"description": "Meet.", "parameters": {
        "type": "object", "properties": {}}}, rendezvous,
        policy=ToolPolicy(script_callable=True))
    r = run(engine, """
        import asyncio
        from hermes_tools import aio
        async def main():
            out = await asyncio.gather(*(aio.rendezvous() for _ in range(100)))
            print(sum(o["met"] for o in out))
        asyncio.run(main())
    """, enabled_toolsets=["web"])
    assert r.status == "success", r.error
    assert r.output.strip() == "100"


def test_subprocess_of_the_script_calls_a_tool(engine):
    r = run(engine, """
        import subprocess, sys
        from hermes_tools import web_search
        print(web_search("parent")["query"])
        out = subprocess.run([sys.executable, "-c",
            "from hermes_tools import web_search; print(web_search('child')['query'])"],
            capture_output=True, text=True, timeout=20)
        print(out.stdout.strip(), out.stderr.strip())
    """)
    assert r.output.split() == ["parent", "child"], r.output + r.stderr
    assert r.tool_calls_made == 2


def test_hanging_tool_does_not_hang_past_timeout(engine):
    t0 = time.monotonic()
    r = run(engine, """
        from hermes_tools import web_search
        web_search("slow", sleep=30)
    """, timeout=1.0)
    assert r.status == "timeout"
    assert time.monotonic() - t0 < 5
    # the abandoned call still holds its worker; release it, so no tool thread outlives
    # this test (the agent tests check that none is left)
    engine.registry.release_sleepers.set()
    deadline = time.monotonic() + 5
    while engine.server._pool.busy:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_env_is_allow_listed_and_secrets_stay_out(engine, monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "sk-should-not-leak-0123456789")
    monkeypatch.setenv("SOME_OTHER", "x")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    r = run(engine, """
        import os, json
        cmd = open("/proc/self/cmdline", "rb").read()
        print(json.dumps({"env": dict(os.environ), "cmd": cmd.decode(errors="replace")}))
    """)
    info = json.loads(r.output)
    env = info["env"]
    assert "MY_API_KEY" not in env and "SOME_OTHER" not in env
    assert env["LC_ALL"] == "C.UTF-8"
    assert "EXECENGINE_WATCHDOG_FD" not in env  # consumed by the runtime
    spec = engine.launcher.specs[-1]
    stub_dir, runtime = env["PYTHONPATH"].split(os.pathsep)
    assert runtime == engine.runtime.path
    assert os.path.dirname(os.path.dirname(stub_dir)) == runtime  # <runtime>/stubs/<hash>
    assert env["EXECENGINE_RPC_TOKEN"] not in info["cmd"]
    assert all("sk-should" not in a for a in spec.argv)


def test_passthrough_from_skills(engine, monkeypatch):
    monkeypatch.setenv("SERVICE_TOKEN", "tok")
    engine.registry.add_env_passthrough(["SERVICE_TOKEN"])
    r = run(engine, "import os; print(os.environ.get('SERVICE_TOKEN'))")
    assert r.output == "tok\n"


def test_modes_set_the_working_directory(make_engine, tmp_path):
    strict = make_engine()
    r = run(strict, "import os; print(os.getcwd())")
    spec = strict.launcher.specs[-1]
    assert r.output.strip() == spec.cwd == os.path.dirname(spec.argv[-1])
    project = make_engine(mode="project")
    r = run(project, "import os; print(os.getcwd())", cwd=str(tmp_path))
    assert r.output.strip() == str(tmp_path)


def test_project_mode_imports_the_projects_packages(make_engine, tmp_path):
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("VALUE = 42\n")
    code = "import mypkg; print(mypkg.VALUE)"
    project = make_engine(mode="project")
    assert run(project, code, cwd=str(tmp_path)).output == "42\n"
    strict = make_engine()
    r = run(strict, code, cwd=str(tmp_path))
    assert r.status == "error"
    assert "No module named 'mypkg'" in r.stderr


def test_staging_and_socket_dirs_removed(engine):
    r = run(engine, "from hermes_tools import web_search; web_search('a')")
    assert r.status == "success"
    spec = engine.launcher.specs[-1]
    assert not os.path.exists(os.path.dirname(spec.argv[-1]))
    assert not os.path.exists(spec.socket_dir)


def test_setsid_and_double_fork_descendants_gone(engine, tmp_path):
    report = tmp_path / "pids"
    code = f"""
        import os, subprocess, sys, time
        os.environ["CHILD_REPORT"] = {str(report)!r}
        subprocess.Popen([sys.executable, {str(child_argv('double_fork.py')[1])!r}])
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(os.environ["CHILD_REPORT"]) and len(
                    open(os.environ["CHILD_REPORT"]).read().split()) >= 4:
                break
            time.sleep(0.02)
        print("spawned")
    """
    r = run(engine, code)
    assert r.output == "spawned\n"
    spec = engine.launcher.specs[-1]
    assert stray_count(spec) == 0
    pids = [int(x) for x in report.read_text().split()[1::2]]
    assert len(pids) == 2
    for pid in pids:  # gone, a zombie, or the pid reused by an unrelated process
        try:
            proc = psutil.Process(pid)
            alive = proc.status() != "zombie" and "double_fork" in " ".join(proc.cmdline())
        except psutil.NoSuchProcess:
            alive = False
        assert not alive, pid


def test_stdout_flood_binary_and_ansi(make_engine):
    engine = make_engine(max_stdout_bytes=10_000, max_stderr_bytes=1000)
    r = engine.execute(Path(child_argv("flood_stdout.py")[1]).read_text())
    assert r.status == "success"
    assert r.stdout_truncated and r.stdout_bytes_total > 2_000_000
    assert r.output.startswith("HEAD-MARK red \ufffd\ufffd bad bytes")
    assert r.output.rstrip().endswith("TAIL-MARK")
    assert "... [OUTPUT TRUNCATED - " in r.output
    assert (f"[full output: {r.full_output_path} holds all {r.stdout_bytes_total:,} bytes of "
            "the script's raw stdout, before ANSI stripping and secret redaction]") in r.output
    assert "\x1b" not in r.output
    assert os.path.getsize(r.full_output_path) == r.stdout_bytes_total
    os.unlink(r.full_output_path)
    assert r.stderr_truncated and len(r.stderr) < 1200
    d = json.loads(r.to_json())
    assert d["stdout_truncated"] and d["full_output_path"] == r.full_output_path
    assert d["stdout_bytes_captured"] == 10_000


def test_binary_output(engine):
    r = run(engine, "import sys; sys.stdout.buffer.write(bytes(range(256)) * 3)")
    assert r.status == "success" and "\ufffd" in r.output


def test_never_hello_child_is_killed(make_engine):
    engine = make_engine(launcher=Recorder(child_argv("never_hello.py")), hello_timeout=1.0)
    t0 = time.monotonic()
    r = engine.execute("print('unused')")
    assert time.monotonic() - t0 < 5
    assert r.status == "error" and "did not connect" in r.error
    assert r.output == "started, not connecting\n"


def test_a_child_that_ends_without_the_runtimes_handshake_is_an_error(make_engine):
    """Exit status 0 and output, but the runtime never said it started: whatever ran was
    not the script as the engine runs it."""
    engine = make_engine(launcher=Recorder(child_argv("no_runtime.py")))
    r = engine.execute("print('unused')")
    assert r.status == "error" and "runtime never started" in r.error, r
    assert r.output == "all done, honestly\n"


def test_a_ready_said_just_before_a_fast_exit_is_seen(make_engine):
    """A child that says ready and exits at once is never taken for one that did not say
    it (the exit may reach the loop before the handshake is read)."""
    engine = make_engine(launcher=Recorder(child_argv("ready_then_exit.py")))
    results = [engine.execute("print('unused')") for _ in range(20)]
    assert [r.status for r in results] == ["success"] * 20, [r.error for r in results]


def test_garbage_frames_and_bad_token_from_a_child(make_engine, calls):
    engine = make_engine(launcher=Recorder(child_argv("garbage_frames.py")))
    r = engine.execute("print('unused')")
    assert r.status == "success", r.error
    seen = [json.loads(x) for x in r.output.splitlines()]
    assert seen[0]["wrong_token"]["type"] == "denied"
    assert seen[1]["hello"]["type"] == "welcome"
    assert all(s["junk"]["type"] == "error" for s in seen[2:6])
    assert seen[6]["multi"]["type"] == "error"
    # 'echo' is not allowed; the answer still comes, and nothing was dispatched
    assert "not available" in json.loads(seen[7]["call"]["result"])["error"]
    assert calls == [] and r.tool_calls_made == 0


def test_concurrent_executions_share_one_engine(engine):
    results = [None] * 4

    def go(i):
        results[i] = run(engine, f"from hermes_tools import web_search\n"
                                 f"print(web_search('e{i}')['query'])")

    ts = [threading.Thread(target=go, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert [r.output for r in results] == [f"e{i}\n" for i in range(4)]


def test_importing_the_tools_leaves_heavy_modules_out_until_used(engine):
    # inspect, difflib and shlex cost a script about 20 ms of start-up together: they are
    # imported only by the helpers that use them (describe_tool, shell_quote)
    r = run(engine, """
        import sys
        heavy = ("inspect", "difflib", "shlex", "asyncio")
        from hermes_tools import web_search, describe_tool, search_tools, shell_quote
        print(sorted(m for m in heavy if m in sys.modules))
        assert search_tools("search")[0]["name"] == "web_search"
        print(describe_tool("web_search")["signature"].startswith("web_search("))
        print(describe_tool("web_serch")["error"])
        print(shell_quote("it's"))
        print(sorted(m for m in heavy if m in sys.modules))
    """)
    assert r.status == "success", r.error
    lines = r.output.splitlines()
    assert lines[0] == "[]"
    assert lines[1] == "True"
    assert "Did you mean: web_search?" in lines[2]
    assert lines[3] == "'it'\"'\"'s'"
    assert lines[4] == "['difflib', 'inspect', 'shlex']"
