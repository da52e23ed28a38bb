"""Persistent sessions with real kernels, at every isolation level the host supports."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from _session_helpers import (
    Gate,
    kernel_of,
    leftover_processes,
    level_params,
    run_tokens,
    session_engine,
    wait_until,
)

from execengine.engine.result import STDERR_HEADER, ExecutionResult
from execengine.rpc.channel import late_message

pytestmark = pytest.mark.parametrize("level", level_params())


def test_state_persists_and_reset_starts_fresh(level):
    with session_engine(level) as e:
        assert e.execute("import json\nx = 41", session="s").ok
        r = e.execute("x += 1\nprint(x, json.dumps([1]))", session="s")
        assert (r.status, r.output, r.notice) == ("success", "42 [1]\n", None)
        other = e.execute("print('x' in globals())", session="other")
        assert other.output == "False\n"  # sessions do not share state
        r = e.execute("print('x' in globals())", session="s", reset=True)
        assert r.output == "False\n" and "reset" in (r.notice or "")
        assert e.execute("y = 1", session="s").ok
        r = e.execute("", session="s", reset=True)  # reset alone
        assert r.ok and r.notice == "The session was reset."
        assert "NameError" in e.execute("y", session="s").stderr
        names = sorted(i.name for i in e.sessions.list_sessions())
        assert names == ["other", "s"]
        assert e.sessions.close_session("other") and not e.sessions.close_session("nope")
        assert [i.name for i in e.sessions.list_sessions()] == ["s"]


def test_cell_result_is_per_cell(level):
    with session_engine(level, max_stdout_bytes=1000) as e:
        r = e.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)\n1/0",
                      session="s")
        # as a one-shot script's: the traceback follows the output, after its header
        assert r.status == "error" and r.output == "out\n" + STDERR_HEADER + r.stderr.strip()
        assert "err\n" in r.stderr and "ZeroDivisionError" in r.error
        assert 'File "<cell 1>", line 4' in r.stderr and "1/0" in r.stderr
        r = e.execute("print('next')", session="s")
        assert (r.status, r.output, r.stderr) == ("success", "next\n", "")
        r = e.execute("print('z' * 5000)", session="s")
        assert r.stdout_truncated and r.stdout_bytes_total == 5001
        assert r.full_output_path and os.path.getsize(r.full_output_path) == 5001
        os.unlink(r.full_output_path)
        r = e.execute("import sys\nsys.exit(3)", session="s")
        assert (r.status, r.exit_code) == ("error", 3)
        assert e.execute("print('alive')", session="s").output == "alive\n"


def test_timeout_and_interrupt_keep_the_state(level):
    # a generous grace: it only matters when a cell does not stop, which these do
    with session_engine(level, kill_grace=10.0) as e:
        assert e.execute("x = 7", session="s").ok
        r = e.execute("import time\nprint('before', flush=True)\ntime.sleep(60)",
                      session="s", timeout=0.5)
        assert r.status == "timeout" and "state was kept" in r.error
        assert r.output.startswith("before\n") and r.error in r.output
        ev = threading.Event()
        ev.set()  # set before the call: the cell is interrupted at once
        r = e.execute("import time\ntime.sleep(60)", session="s", interrupt=ev)
        assert r.status == "interrupted" and "state was kept" in r.error
        r = e.execute("print(x)", session="s")
        assert (r.output, r.notice) == ("7\n", None)


@pytest.mark.parametrize("code", [
    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
    "sum(range(10 ** 15))",  # a C loop: never looks at signals, never lets the GIL go
    "import threading\nthreading.Thread(target=sum, args=(range(10 ** 15),)).start()",
], ids=["sigint-ignored", "c-loop", "c-loop-in-a-thread"])
def test_a_cell_that_will_not_stop_costs_the_state(level, code):
    with session_engine(level) as e:
        assert e.execute("x = 7", session="s").ok
        r = e.execute(code, session="s", timeout=0.5)
        assert r.status == "timeout"
        assert "state was lost" in r.error and "next call starts a fresh session" in r.error
        assert kernel_of(e, "s") is None
        r = e.execute("print('x' in globals())", session="s")
        assert r.output == "False\n"


def test_kernel_death_is_reported(level):
    with session_engine(level) as e:
        r = e.execute("import os\nos._exit(3)", session="s")  # during the cell
        assert r.status == "error" and "died during the cell" in r.error
        assert "exit code 3" in r.error
        assert e.execute("x = 1", session="s").ok
        kernel = kernel_of(e, "s")
        kernel.process.kill()  # between cells (as the OOM killer would)
        assert wait_until(lambda: not kernel.process.alive())
        r = e.execute("print('x' in globals())", session="s")
        assert r.output == "False\n" and "died between calls" in r.notice


def test_processes_a_cell_started_are_killed_when_it_ends(level):
    with session_engine(level) as e:
        code = ("import subprocess, sys\n"
                "p = subprocess.Popen(['sleep', '60'])\n"
                "q = subprocess.Popen(['setsid', 'sh', '-c', 'sleep 60 & echo $!'],"
                " stdout=subprocess.PIPE)\n"
                "pids = [p.pid, int(q.stdout.readline())]\n")
        assert e.execute(code, session="s").ok
        r = e.execute("import os\nalive = []\nfor pid in pids:\n"
                      "    try:\n        os.kill(pid, 0)\n        alive.append(pid)\n"
                      "    except ProcessLookupError:\n        pass\nprint(alive)",
                      session="s")
        assert r.output == "[]\n", r


def test_late_calls_from_leaked_threads_are_refused(level):
    calls: list = []
    with session_engine(level, calls) as e:
        cell1 = ("import threading\nfrom hermes_tools import web_search\n"
                 "go = threading.Event()\nout = []\n"
                 "def leak():\n    go.wait()\n    try:\n        web_search('late')\n"
                 "    except Exception as exc:\n        out.append(str(exc))\n"
                 "t = threading.Thread(target=leak)\nt.start()\nweb_search('mine')\n")
        r = e.execute(cell1, session="s")
        assert r.ok and r.tool_calls_made == 1
        r = e.execute("go.set()\nt.join(10)\nprint(out)\nweb_search('cell2')", session="s")
        assert "started by cell 1, which has ended" in r.output, r
        assert r.tool_calls_made == 1
        assert [c[0]["query"] for c in calls] == ["mine", "cell2"]

        # the host refuses too: a call that bypasses the kernel's check between cells
        cell3 = ("import os, json, threading\nfrom _execengine.client import get_client\n"
                 "def raw():\n"
                 "    while not os.path.exists('go'):\n        import time; time.sleep(0.01)\n"
                 "    r = get_client().call('web_search', {'query': 'raw'})\n"
                 "    with open('res.tmp', 'w') as f:\n        json.dump(r, f)\n"
                 "    os.rename('res.tmp', 'res.json')\n"
                 "threading.Thread(target=raw).start()\n")
        assert e.execute(cell3, session="s").ok
        staging = kernel_of(e, "s").staging.path
        open(os.path.join(staging, "go"), "w").close()
        res = os.path.join(staging, "res.json")
        assert wait_until(lambda: os.path.exists(res))
        with open(res) as f:
            assert json.load(f) == {"error": late_message()}
        assert [c[0]["query"] for c in calls] == ["mine", "cell2"]


def test_budget_is_per_cell(level):
    with session_engine(level, max_tool_calls=2) as e:
        code = ("from hermes_tools import web_search\n"
                "print([('error' in web_search('q')) for _ in range({n})])")
        r = e.execute(code.format(n=3), session="s")
        assert r.output == "[False, False, True]\n" and r.tool_calls_made == 2
        r = e.execute(code.format(n=2), session="s")
        assert r.output == "[False, False]\n" and r.tool_calls_made == 2


def test_idle_kernels_are_reaped(level):
    with session_engine(level, session_idle_timeout=0.3) as e:
        assert e.execute("x = 1", session="s").ok
        kernel = kernel_of(e, "s")  # None if the reaper was quicker than this line
        assert wait_until(lambda: not e.sessions.list_sessions())
        assert kernel is None or wait_until(lambda: not kernel.process.alive())
        r = e.execute("print('x' in globals())", session="s")
        assert r.output == "False\n" and "idle for 0.3s" in r.notice


def test_least_recently_used_idle_kernel_is_evicted_never_a_busy_one(level):
    gate = Gate()
    with session_engine(level, gate=gate, max_sessions=2) as e:
        assert e.execute("x = 'b'", session="b").ok
        busy = threading.Thread(target=e.execute, args=(
            "from hermes_tools import web_extract\nweb_extract([])",), kwargs={"session": "b"})
        busy.start()
        try:
            assert gate.entered.wait(10)
            assert e.execute("x = 'a'", session="a").ok  # order now: b (busy), a
            assert e.execute("x = 'c'", session="c").ok  # evicts a, not the busy b
            assert sorted(i.name for i in e.sessions.list_sessions()) == ["b", "c"]
            r = e.execute("x = 'd'", session="d")  # b busy, c idle: c goes
            assert r.ok
            assert sorted(i.name for i in e.sessions.list_sessions()) == ["b", "d"]
        finally:
            gate.open.set()
            busy.join(10)
        r = e.execute("print('x' in globals())", session="a")
        assert r.output == "False\n" and "least recently used" in r.notice
        assert e.execute("print(x)", session="b").output == "b\n"


def test_all_kernels_busy_refuses_a_new_session_after_waiting_its_timeout(level):
    gate = Gate()
    with session_engine(level, gate=gate, max_sessions=1) as e:
        busy = threading.Thread(target=e.execute, args=(
            "from hermes_tools import web_extract\nweb_extract([])",), kwargs={"session": "a"})
        busy.start()
        try:
            assert gate.entered.wait(10)
            started = time.monotonic()
            r = e.execute("print(1)", session="b", timeout=0.5)
            assert time.monotonic() - started >= 0.5
            assert r.status == "error" and "raise code_execution.max_sessions" in r.error
            # a second cell of the busy session waits for it, bounded by its timeout
            r = e.execute("print(1)", session="a", timeout=0.3)
            assert r.status == "timeout" and "waiting for the session's previous" in r.error
        finally:
            gate.open.set()
            busy.join(10)
        assert e.execute("print(2)", session="b").output == "2\n"


def test_a_new_session_waits_for_room_and_runs_when_a_cell_ends(level):
    """50 sessions' cells on 2 kernels: each waits for a kernel to be free (the least
    recently used idle one is closed for it) instead of being refused at once."""
    with session_engine(level, max_sessions=2) as e:
        results: dict[int, ExecutionResult] = {}

        def run(i: int) -> None:
            results[i] = e.execute(f"import time\ntime.sleep(0.02)\nprint({i})",
                                   session=f"s{i}", timeout=60)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert sorted(results) == list(range(12))
        assert [results[i].output for i in range(12)] == [f"{i}\n" for i in range(12)]
        assert len(e.sessions.list_sessions()) <= 2


def test_a_refused_cell_keeps_the_state_lost_notice_for_the_next_one(level):
    gate = Gate()
    with session_engine(level, gate=gate, max_sessions=1) as e:
        assert e.execute("x = 1", session="b").ok
        assert e.execute("y = 1", session="a").ok  # b's kernel is closed for a's
        busy = threading.Thread(target=e.execute, args=(
            "from hermes_tools import web_extract\nweb_extract([])",), kwargs={"session": "a"})
        busy.start()
        try:
            assert gate.entered.wait(10)
            refused = e.execute("print(x)", session="b", timeout=0.3)
            assert refused.status == "error" and "least recently used" in refused.notice
        finally:
            gate.open.set()
            busy.join(10)
        r = e.execute("print('x' in globals())", session="b")
        assert r.output == "False\n" and "least recently used" in r.notice


def test_cells_of_one_session_run_one_at_a_time(level):
    with session_engine(level) as e:
        assert e.execute("log = []", session="s").ok
        code = "import time\nlog.append('start')\ntime.sleep(0.05)\nlog.append('end')"
        threads = [threading.Thread(target=e.execute, args=(code,), kwargs={"session": "s"})
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        r = e.execute("print(log)", session="s")
        assert r.output == str(["start", "end"] * 4) + "\n"


def test_a_changed_working_directory_starts_a_new_kernel(level, tmp_path):
    os.chmod(tmp_path, 0o777)  # restricted: the kernel runs as another uid
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(mode=0o777)
    b.mkdir(mode=0o777)
    with session_engine(level, mode="project") as e:
        assert e.execute("x = 1", session="s", cwd=str(a)).ok
        assert e.execute("print(x)", session="s", cwd=str(a)).output == "1\n"
        r = e.execute("import os\nprint('x' in globals(), os.getcwd())", session="s",
                      cwd=str(b))
        assert r.output.split()[0] == "False" and "working directory" in r.notice


def test_sub_agents_get_their_own_sessions(level):
    from execengine.context import CallContext, ToolContext
    from execengine.engine.tool import run_tool

    with session_engine(level) as e:
        reg = e.registry

        def run(code: str, task: str, session: str | None = None, **kw: object) -> dict:
            call = CallContext(task_id=task, session_id=session, enabled_tools=["web_search"])
            return json.loads(run_tool(e, {"code": code, **kw}, ToolContext(reg, reg.config,
                                                                            call)))

        assert run("secret = 's3'", "parent")["status"] == "success"
        assert run("print(secret)", "parent")["output"] == "s3\n"
        child = run("print(secret)", "parent/sub-1")
        assert child["status"] == "error" and "NameError" in child["error"]
        assert run("print('secret' in globals())", "parent", reset=True)["output"] == "False\n"
        assert run("secret = 1", "parent")["status"] == "success"
        assert run("", "parent", reset=True)["notice"] == "The session was reset."
        assert "NameError" in run("secret", "parent")["error"]
        # the host's conversation id wins over the task id
        assert run("z = 1", "t1", session="conv")["status"] == "success"
        assert run("print(z)", "t2", session="conv")["output"] == "1\n"


def test_hostile_cells_cannot_confuse_the_host(level):
    with session_engine(level) as e:
        # the kernel's pipes, from its initial environment (a cell can read it)
        reply_fd = ("import os\nenv = open('/proc/self/environ', 'rb').read().split(b'\\0')\n"
                    "fd = [int(v) for e in env if e.startswith(b'EXECENGINE_KERNEL_FDS=')"
                    " for v in e.split(b'=')[1].split(b',')]\n")
        # garbage and a fake "done" of a later cell on every pipe it holds: ignored
        code = (reply_fd + "for f in fd:\n    try:\n"
                "        os.write(f, b'garbage\\n{\"op\": \"done\", \"cell\": 99}\\n[1]\\n')\n"
                "    except OSError:\n        pass\nprint('still here')")
        r = e.execute(code, session="s")
        assert r.output == "still here\n", r
        assert e.execute("print(1 + 1)", session="s").output == "2\n"
        # closing its own stdout: the cell still ends (bounded), the next one says why
        r = e.execute("import os\nos.close(1)", session="s")
        assert r.ok
        r = e.execute("print('x')", session="s")
        # the child is unbuffered: the print meets the closed descriptor at once, or (the
        # number free, the kernel's runtime may have opened something at 1 meanwhile:
        # once in seven loaded full runs) lands there; never in the cell's output
        assert "closed its stdout" in r.notice
        assert r.output.split("--- stderr ---")[0].strip() == ""  # nothing printed came
        assert r.status == "success" or "Bad file descriptor" in r.stderr, r
        # an endless reply line: the kernel is killed, the state is lost, the host is fine
        code = reply_fd + "for f in fd:\n    try:\n        os.write(f, b'x' * (2 << 20))\n" \
                          "    except OSError:\n        pass\nimport time\ntime.sleep(30)"
        r = e.execute(code, session="s2", timeout=10)
        assert r.status == "error" and "state was lost" in r.error
        assert e.execute("print('fresh')", session="s2").output == "fresh\n"
        # a flood of empty lines (each one parsed cost the host 6 µs and a copy of the rest
        # of the buffer): past a little garbage the kernel is killed, at once
        code = reply_fd + ("import time\nend = time.monotonic() + 20\n"
                           "while time.monotonic() < end:\n    for f in fd:\n        try:\n"
                           "            os.write(f, b'\\n' * 65536)\n"
                           "        except OSError:\n            pass\n")
        started = time.monotonic()
        r = e.execute(code, session="s3", timeout=30)
        assert r.status == "error" and "state was lost" in r.error, r
        assert time.monotonic() - started < 10  # not the flood's 20 s


def test_the_kernel_runs_under_the_levels_limits(level):
    if level == "none":
        pytest.skip("level none applies no OS limits")
    with session_engine(level, memory_mb=128) as e:
        assert e.execute("x = 1", session="s").ok
        r = e.execute("big = bytearray(512 * 1024 * 1024)\nbig[::4096] = b'x' * len(big[::4096])",
                      session="s")
        assert r.status == "error", r
        assert "MemoryError" in r.stderr or "died during the cell" in (r.error or "")
        r = e.execute("print(1)", session="s")
        assert r.output == "1\n"


def test_closing_the_engine_ends_a_running_cell(level):
    gate = Gate()
    results: list = []
    with session_engine(level, gate=gate) as e:
        busy = threading.Thread(target=lambda: results.append(e.execute(
            "from hermes_tools import web_extract\nweb_extract([])", session="a")))
        busy.start()
        try:
            assert gate.entered.wait(10)
            assert e.execute("y = 2", session="b").ok
            tokens = run_tokens(e)
            e.close()  # bounded: the kernels see EOF, the running cell ends with its kernel
            busy.join(10)
            assert not busy.is_alive()
        finally:
            gate.open.set()
            busy.join(10)
        assert results[0].status == "error" and "state was lost" in results[0].error
        assert len(tokens) == 2
        assert wait_until(lambda: not leftover_processes(tokens), 5.0)


def test_one_session_cannot_reach_another_sessions_files_or_process(level):
    """Adversarial: session b goes for session a's private files and its kernel's initial
    environment (which holds a's run token). Level none is the negative control: there b
    must succeed, so the probe is known to detect the leak."""
    with session_engine(level) as e:
        r = e.execute("import os\nopen('secret.txt', 'w').write('s3cr3t')\n"
                      "print(os.path.abspath('secret.txt'), os.getpid())", session="a")
        path, pid = r.output.split()
        token = kernel_of(e, "a").process.child.run_token
        probe = (f"got = []\ntry:\n    got.append(open({path!r}).read())\n"
                 "except OSError:\n    pass\ntry:\n"
                 f"    got.append(open('/proc/{pid}/environ', 'rb').read().decode('latin-1'))\n"
                 "except OSError:\n    pass\nprint(repr(got))")
        r = e.execute(probe, session="b")
        assert r.ok, r
        leaked_file = "s3cr3t" in r.output
        leaked_env = token in r.output
        if level == "none":
            assert leaked_file and leaked_env  # the probe works
        else:
            assert not leaked_file and not leaked_env, r.output


def test_a_timeout_during_a_tool_call_keeps_the_state(level):
    gate = Gate()
    with session_engine(level, gate=gate, kill_grace=10.0) as e:
        try:
            assert e.execute("x = 3", session="s").ok
            r = e.execute("from hermes_tools import web_extract\nweb_extract([])",
                          session="s", timeout=1.0)
            assert gate.entered.is_set()
            assert r.status == "timeout" and "state was kept" in r.error
        finally:
            gate.open.set()
        r = e.execute("print(x)", session="s")
        assert (r.status, r.output) == ("success", "3\n")
