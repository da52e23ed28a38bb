"""The bootstrap in real child processes: staged as ``_execengine`` next to a stub, run the
way the engine runs it (``python -c ENTRY script.py``) against a pyzmq ROUTER playing the
host."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from _oldest_python import python38
from _sandbox_peers import EXEC_ID, TOKEN, FakeHost

from execengine.engine.prepare import BOOTSTRAP_ENTRY
from sandbox.bootstrap import ENTRY

REPO = Path(__file__).resolve().parents[2]
PY38 = python38()

# A minimal stand-in for the rendered stub: the real one is generated from tool schemas.
STUB = '''
from _execengine.client import ToolCallError, acall_tool, call_tool
from _execengine.helpers import json_parse, retry, shell_quote


def echo(**kwargs):
    return call_tool("echo", kwargs)


class aio:
    @staticmethod
    async def echo(**kwargs):
        return await acall_tool("echo", kwargs)
'''


@dataclass
class Staged:
    dir: Path
    script: Path
    env: dict[str, str]


@pytest.fixture
def staged(short_dir: Path) -> Staged:
    stage = short_dir / "stage"
    shutil.copytree(REPO / "sandbox", stage / "_execengine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (stage / "hermes_tools.py").write_text(STUB)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(stage),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUTF8": "1",
        "EXECENGINE_RPC_ENDPOINT": str(short_dir / "rpc.sock"),
        "EXECENGINE_RPC_TOKEN": TOKEN,
        "EXECENGINE_EXEC_ID": EXEC_ID,
    }
    return Staged(stage, stage / "script.py", env)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    pid: int


def start(staged: Staged, source: str, *, python: str = sys.executable,
          pass_fds: tuple[int, ...] = (), extra_env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[str]:
    staged.script.write_text(textwrap.dedent(source))
    return subprocess.Popen(
        [python, "-c", ENTRY, str(staged.script)],
        env={**staged.env, **(extra_env or {})}, cwd=str(cwd or staged.dir),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, pass_fds=pass_fds)


def finish(proc: subprocess.Popen[str], timeout: float = 30) -> Run:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return Run(proc.returncode, out, err, proc.pid)


def run(staged: Staged, source: str, **kw: Any) -> Run:
    return finish(start(staged, source, **kw))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def cleanup_pids() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# -- running the script -------------------------------------------------------------------


def test_script_runs_like_python_script_py(host: FakeHost, staged: Staged,
                                           short_dir: Path) -> None:
    work = short_dir / "work"
    work.mkdir()
    r = run(staged, """
        import json, os, pickle, sys
        import hermes_tools

        class Thing:
            pass

        def annotated(a: int) -> None:
            pass

        print(json.dumps({
            "name": __name__, "file": __file__, "argv": sys.argv, "path0": sys.path[0],
            "cwd": os.getcwd(), "stub": hermes_tools.__file__,
            "main_is_us": sys.modules["__main__"].__dict__ is globals(),
            "pickles": len(pickle.dumps(Thing())) > 0,
            "watchdog_var": "EXECENGINE_WATCHDOG_FD" in os.environ,
            "lazy_annotations": annotated.__annotations__["a"] is not int,
        }))
        print("unflushed tail", end="")
    """, cwd=work)
    assert r.code == 0, r.stderr
    first, tail = r.stdout.split("\n")
    info = json.loads(first)
    assert info == {
        "name": "__main__", "file": str(staged.script), "argv": [str(staged.script)],
        "path0": str(staged.dir), "cwd": str(work), "stub": str(staged.dir / "hermes_tools.py"),
        "main_is_us": True, "pickles": True, "watchdog_var": False,
        "lazy_annotations": False,  # the bootstrap's own __future__ imports do not leak
    }
    assert tail == "unflushed tail"
    assert r.stderr == ""


def test_the_engine_runs_the_same_entry() -> None:
    assert BOOTSTRAP_ENTRY == ENTRY


def test_ready_on_the_watchdog_socket_and_no_rpc_until_a_tool_call(
        host: FakeHost, staged: Staged, short_dir: Path) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    flag = short_dir / "go"
    try:
        proc = start(staged, f"""
            import os, sys, time
            deadline = time.monotonic() + 20
            while not os.path.exists({str(flag)!r}) and time.monotonic() < deadline:
                time.sleep(0.01)
            print("released" if os.path.exists({str(flag)!r}) else "timed out",
                  sorted(m for m in ("ctypes", "runpy", "_execengine.client", "socket")
                         if m in sys.modules))
        """, pass_fds=(theirs.fileno(),),
            extra_env={"EXECENGINE_WATCHDOG_FD": str(theirs.fileno())})
    finally:
        theirs.close()
    try:
        # the script waits for us: the ready byte came before it could end
        ours.settimeout(20)
        assert ours.recv(1) == b"R"
        flag.touch()
        r = finish(proc)
    finally:
        ours.close()
    # start-up imported neither the RPC client nor ctypes nor runpy
    assert (r.code, r.stdout) == (0, "released []\n"), r.stderr
    assert host.hellos == [] and host.calls == []


def test_tool_calls_from_threads_tasks_subprocesses_and_forks(short_dir: Path,
                                                              staged: Staged) -> None:
    with FakeHost(short_dir / "rpc.sock", hold=20) as host:
        r = run(staged, """
            import asyncio, json, os, subprocess, sys
            from concurrent.futures import ThreadPoolExecutor
            import hermes_tools
            from hermes_tools import aio, echo

            with ThreadPoolExecutor(20) as pool:
                threads = list(pool.map(lambda n: echo(n=n)["args"]["n"], range(20)))

            async def main():
                return await asyncio.gather(*(aio.echo(n=n) for n in range(20)))
            tasks = [r["args"]["n"] for r in asyncio.run(main())]
            print(json.dumps({"threads": threads, "tasks": tasks}))
            sys.stdout.flush()
        """)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == {"threads": list(range(20)), "tasks": list(range(20))}
    assert len(host.hellos) == 1 and host.hellos[0]["pid"] == r.pid

    with FakeHost(short_dir / "rpc.sock") as host:
        r = run(staged, """
            import os, subprocess, sys
            from hermes_tools import echo

            print("parent", echo(who="parent")["args"]["who"], flush=True)
            out = subprocess.run(
                [sys.executable, "-c",
                 "from hermes_tools import echo; print(echo(who='subprocess')['args']['who'])"],
                capture_output=True, text=True, timeout=20)
            print("sub", out.stdout.strip(), out.returncode, out.stderr.strip(), flush=True)
            pid = os.fork()
            if pid == 0:
                try:
                    print("fork", echo(who="fork")["args"]["who"], flush=True)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            print("parent again", echo(who="again")["args"]["who"], flush=True)
        """)
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines() == ["parent parent", "sub subprocess 0 ", "fork fork",
                                     "parent again again"]
    pids = [h["pid"] for h in host.hellos]
    assert len(pids) == 3 and len(set(pids)) == 3 and pids[0] == r.pid  # own connections


def test_non_daemon_threads_may_call_tools_after_main_returns(host: FakeHost,
                                                              staged: Staged) -> None:
    r = run(staged, """
        import threading, time
        from hermes_tools import echo

        def late():
            time.sleep(0.2)
            print(echo(late=True)["args"], flush=True)

        threading.Thread(target=late).start()
    """)
    assert (r.code, r.stdout) == (0, "{'late': True}\n"), r.stderr


def test_tool_call_without_a_host_raises_tool_call_error(staged: Staged) -> None:
    r = run(staged, """
        from hermes_tools import ToolCallError, echo
        try:
            echo(x=1)
        except ToolCallError as exc:
            print("ToolCallError:", exc)
    """)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("ToolCallError: cannot reach the execengine host")


# -- exits and tracebacks -----------------------------------------------------------------


def test_uncaught_exception_gives_a_clean_traceback(host: FakeHost, staged: Staged) -> None:
    r = run(staged, """
        print("before")

        def inner():
            return 1 / 0

        inner()
    """)
    assert r.code == 1
    assert r.stdout == "before\n"
    lines = r.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ZeroDivisionError: division by zero"
    assert f'File "{staged.script}", line 7, in <module>' in r.stderr
    assert "in inner" in r.stderr
    assert "bootstrap" not in r.stderr and "runpy" not in r.stderr


def test_syntax_error(host: FakeHost, staged: Staged) -> None:
    r = run(staged, "print('ok')\ndef broken(:\n")
    assert r.code == 1
    assert r.stdout == ""
    assert "SyntaxError" in r.stderr and str(staged.script) in r.stderr
    assert "bootstrap" not in r.stderr and "Traceback" not in r.stderr


def test_custom_excepthook_is_honoured(host: FakeHost, staged: Staged) -> None:
    r = run(staged, """
        import sys
        sys.excepthook = lambda t, v, tb: sys.stderr.write(
            "hooked %s %s\\n" % (t.__name__, tb.tb_frame.f_code.co_name))
        raise ValueError("x")
    """)
    assert (r.code, r.stderr) == (1, "hooked ValueError <module>\n")


@pytest.mark.parametrize("statement, code, stderr", [
    ("sys.exit(3)", 3, ""),
    ("sys.exit(0)", 0, ""),
    ("raise SystemExit", 0, ""),
    ("sys.exit('bye now')", 1, "bye now\n"),
    ("raise KeyboardInterrupt", 130, "KeyboardInterrupt\n"),
])
def test_exit_codes(host: FakeHost, staged: Staged, statement: str, code: int,
                    stderr: str) -> None:
    r = run(staged, f"import sys\nprint('out')\n{statement}\n")
    assert (r.code, r.stdout) == (code, "out\n")
    assert r.stderr.endswith(stderr)
    assert "bootstrap" not in r.stderr


# -- process hygiene ----------------------------------------------------------------------


@pytest.mark.parametrize("subreaper", [True, False], ids=["subreaper", "by-token"])
def test_watchdog_eof_kills_the_child_and_its_group(host: FakeHost, staged: Staged,
                                                    cleanup_pids: list[int],
                                                    subreaper: bool) -> None:
    """A subreaper finds the orphan in its tree; without one (level none) the orphan is
    found by the run token in its environment."""
    read_end, write_end = os.pipe()
    env = {"EXECENGINE_WATCHDOG_FD": str(read_end), "EXECENGINE_RUN_TOKEN": "tok" + "e" * 20}
    if subreaper:
        env["EXECENGINE_SUBREAPER"] = "1"
    try:
        proc = start(staged, f"""
            import os, subprocess, sys, time
            sleeper = subprocess.Popen(["sleep", "60"])
            # and one that left the group and was orphaned (adopted by the subreaper)
            middle = subprocess.run(
                [sys.executable, "-c",
                 "import subprocess as s; print(s.Popen(['sleep', '60'], start_new_session=True,"
                 " stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"],
                capture_output=True, text=True, timeout=20)
            print(sleeper.pid, middle.stdout.strip(), os.get_inheritable({read_end}),
                  "EXECENGINE_WATCHDOG_FD" in os.environ, flush=True)
            time.sleep(60)
        """, pass_fds=(read_end,), extra_env=env)
    finally:
        os.close(read_end)
    try:
        assert proc.stdout is not None
        sleeper, orphan, inheritable, visible = proc.stdout.readline().split()
        cleanup_pids.extend((int(sleeper), int(orphan)))
        assert (psutil.Process(int(orphan)).ppid() == proc.pid) is subreaper
        assert (inheritable, visible) == ("False", "False")
        assert proc.poll() is None
        os.close(write_end)  # the host "dies"
        write_end = -1
        r = finish(proc)
    finally:
        if write_end >= 0:
            os.close(write_end)
    assert r.code == -signal.SIGKILL
    assert wait_gone(int(sleeper)) and wait_gone(int(orphan))


def test_bad_watchdog_fd_is_reported_and_ignored(host: FakeHost, staged: Staged) -> None:
    r = run(staged, "print('fine')\n", extra_env={"EXECENGINE_WATCHDOG_FD": "987"})
    assert (r.code, r.stdout) == (0, "fine\n")
    assert "ignoring bad EXECENGINE_WATCHDOG_FD='987'" in r.stderr


def test_orphans_are_reparented_to_the_bootstrap(host: FakeHost, staged: Staged,
                                                 cleanup_pids: list[int]) -> None:
    """When the launcher asks for it (``EXECENGINE_SUBREAPER=1``)."""
    r = run(staged, extra_env={"EXECENGINE_SUBREAPER": "1"}, source="""
        import ctypes, os, subprocess, sys
        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        libc.prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
        # a middle process starts a new-session grandchild and exits at once
        # (the grandchild must not hold the middle's output pipe open)
        middle = subprocess.run(
            [sys.executable, "-c",
             "import subprocess as s; print(s.Popen(['sleep', '30'], start_new_session=True,"
             " stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"],
            capture_output=True, text=True, timeout=20)
        orphan = int(middle.stdout)
        with open("/proc/%d/stat" % orphan) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        os.kill(orphan, 9)
        os.waitpid(orphan, 0)  # it is our child now, so we can reap it
        print(flag.value, ppid == os.getpid(), orphan)
    """)
    assert r.code == 0, r.stderr
    subreaper, adopted, orphan = r.stdout.split()
    cleanup_pids.append(int(orphan))
    assert (subreaper, adopted) == ("1", "True")


# -- older interpreters -------------------------------------------------------------------


@pytest.mark.skipif(PY38 is None, reason="no Python 3.8 here (set EXECENGINE_TEST_PYTHON38); "
                    "tests/sandbox/test_py38.py still checks the syntax")
def test_runs_under_python_3_8(short_dir: Path, staged: Staged) -> None:
    assert PY38 is not None
    for path in sorted((REPO / "sandbox").glob("*.py")):
        subprocess.run([str(PY38), "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(),"
                        " feature_version=(3, 8))", str(path)], check=True, timeout=30)
    with FakeHost(short_dir / "rpc.sock", hold=5) as host:
        r = run(staged, """
            import asyncio, sys
            from concurrent.futures import ThreadPoolExecutor
            from hermes_tools import aio, echo, json_parse, retry, shell_quote
            with ThreadPoolExecutor(5) as pool:
                got = list(pool.map(lambda n: echo(n=n)["args"]["n"], range(5)))
            async def main():
                return await asyncio.gather(*(aio.echo(n=n) for n in range(5)))
            got += [r["args"]["n"] for r in asyncio.run(main())]
            print(sys.version_info[:2], got, json_parse('[1,]'), shell_quote("a b"),
                  retry(lambda: "ok"))
            raise SystemExit(4)
        """, python=str(PY38))
    assert r.code == 4, r.stderr
    assert r.stdout == "(3, 8) [0, 1, 2, 3, 4, 0, 1, 2, 3, 4] [1] 'a b' ok\n"
    assert len(host.hellos) == 1
