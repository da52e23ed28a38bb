"""What scripts need still works at every level, through the real engine: threads,
subprocess, asyncio, the RPC, tool calls from a subprocess, writing the working directory,
importing the project's packages in project mode."""

from __future__ import annotations

import textwrap
import threading
import time

import pytest

from execengine.config import Config
from execengine.engine import Engine
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

from .conftest import level_params

LEVEL = level_params()


def _registry(config: Config) -> ToolRegistry:
    reg = ToolRegistry(config)
    lock = threading.Lock()
    seen: list[str] = []

    def web_search(args, ctx):
        with lock:
            seen.append(args["query"])
        return {"query": args["query"], "origin": ctx.origin}

    reg.register("web_search", "web", {
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}, web_search,
        policy=ToolPolicy(script_callable=True))
    return reg


@pytest.fixture(scope="module")
def engines():
    made: dict[str, Engine] = {}

    def get(level: str) -> Engine:
        if level not in made:
            from execengine.launch.factory import make_launcher

            config = Config().with_overrides({
                "code_execution.isolation": level, "code_execution.min_isolation": level,
                "code_execution.timeout": 30.0, "code_execution.kill_grace": 0.5,
                "code_execution.hello_timeout": 10.0})
            made[level] = Engine(config=config, registry=_registry(config),
                                 launcher=make_launcher(config))
            assert made[level].launcher.level == level
        return made[level]

    yield get
    for engine in made.values():
        engine.close()


FUNCTIONAL = """
import asyncio, os, subprocess, sys, threading
from hermes_tools import web_search

out = []
t = threading.Thread(target=lambda: out.append(web_search("thread")["query"]))
t.start(); t.join()

async def main():
    return await asyncio.gather(asyncio.sleep(0.01, "a"), asyncio.to_thread(lambda: "b"))
out.append("".join(asyncio.run(main())))

child = subprocess.run([sys.executable, "-c",
    "from hermes_tools import web_search; print(web_search('child')['query'])"],
    capture_output=True, text=True, timeout=20)
out.append(child.stdout.strip() or child.stderr[-300:])
out.append(subprocess.run(["echo", "shell"], capture_output=True, text=True).stdout.strip())

with open("written.txt", "w") as fh:
    fh.write("ok")
out.append(open("written.txt").read())
import tempfile
with tempfile.NamedTemporaryFile() as fh:
    out.append("tmp")
print(" ".join(out))
"""


@pytest.mark.parametrize("level", LEVEL)
def test_script_features_work(level, engines, tmp_path):
    result = engines(level).execute(textwrap.dedent(FUNCTIONAL), mode="project",
                                    cwd=str(tmp_path))
    assert result.status == "success", (result.error, result.stderr)
    assert result.output.split() == ["thread", "ab", "child", "shell", "ok", "tmp"]
    assert result.tool_calls_made == 2
    assert (tmp_path / "written.txt").read_text() == "ok"


@pytest.mark.parametrize("level", LEVEL)
def test_project_packages_import_in_project_mode(level, engines, tmp_path):
    pkg = tmp_path / "myproj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 'from-the-project'\n")
    result = engines(level).execute("import sys, os; sys.path.insert(0, os.getcwd())\n"
                                    "import myproj; print(myproj.VALUE)",
                                    mode="project", cwd=str(tmp_path))
    assert result.status == "success", (result.error, result.stderr)
    assert result.output.strip() == "from-the-project"


@pytest.mark.parametrize("level", LEVEL)
def test_timeout_kills_everything(level, engines, tmp_path):
    # the script ignores SIGTERM and leaves a detached grandchild (new session, its parent
    # gone) that appends to a file every 20 ms; after the timeout the file must stop growing
    code = textwrap.dedent("""
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                while True:
                    with open("alive", "a") as f:
                        f.write(".")
                    time.sleep(0.02)
            os._exit(0)
        while not os.path.exists("alive"):
            time.sleep(0.01)
        print("started", flush=True)
        time.sleep(60)
    """)
    result = engines(level).execute(code, mode="project", cwd=str(tmp_path), timeout=1.5)
    assert result.status == "timeout"
    assert "started" in result.output
    alive = tmp_path / "alive"
    size = alive.stat().st_size
    assert size > 0
    time.sleep(0.3)  # fifteen of its beats: a survivor would have written again
    assert alive.stat().st_size == size, "the detached grandchild outlived the execution"


@pytest.mark.parametrize("level", LEVEL)
def test_script_is_a_subreaper_where_the_launcher_makes_it_one(level, engines, tmp_path):
    """The sandboxed launchers make the script a child subreaper before exec; at none the
    host finds strays by run token, and the child's start-up does not import ctypes."""
    code = ("import sys\nloaded = 'ctypes' in sys.modules\nimport ctypes\n"
            "flag = ctypes.c_int(0)\n"
            "ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0)\n"
            "print(flag.value, loaded)\n")
    result = engines(level).execute(code, mode="project", cwd=str(tmp_path))
    assert result.status == "success", (result.error, result.stderr)
    assert result.output.split() == ["0" if level == "none" else "1", "False"]


#: what each feature runs, and what it must print
FEATURES = {
    "multiprocessing_pool": (
        "import multiprocessing as mp\n"
        "with mp.get_context('fork').Pool(2) as pool:\n"
        "    print(sum(pool.map(abs, [-1, -2, 3])))\n", "6"),
    "multiprocessing_queue": (
        "import multiprocessing as mp\n"
        "ctx = mp.get_context('fork')\nq = ctx.Queue()\n"
        "p = ctx.Process(target=q.put, args=(42,))\np.start()\nprint(q.get(timeout=10))\n"
        "p.join()\n", "42"),
    "cpu_count": ("import os\nn = os.cpu_count()\nprint(isinstance(n, int) and n >= 1)\n",
                  "True"),
    "proc_self_status": (
        "import os\nwith open('/proc/self/status') as fh:\n"
        "    pid = [l.split()[1] for l in fh if l.startswith('Pid:')][0]\n"
        "print(pid == str(os.getpid()))\n", "True"),
    "tempfile": (
        "import tempfile\nwith tempfile.NamedTemporaryFile('w+') as fh:\n"
        "    fh.write('x'); fh.flush(); fh.seek(0); print(fh.read())\n", "x"),
    "literal_tmp": (
        "path = '/tmp/literal-%d.txt' % __import__('os').getpid()\n"
        "with open(path, 'w') as fh:\n    fh.write('y')\n"
        "print(open(path).read())\n__import__('os').remove(path)\n", "y"),
    "subprocess_sh": (
        "import subprocess\n"
        "print(subprocess.run(['/bin/sh', '-c', 'echo $((1 + 2))'], capture_output=True,\n"
        "                     text=True, check=True).stdout.strip())\n", "3"),
    "asyncio_subprocess": (
        "import asyncio\nasync def main():\n"
        "    p = await asyncio.create_subprocess_exec('/bin/sh', '-c', 'echo ok',\n"
        "                                             stdout=asyncio.subprocess.PIPE)\n"
        "    out, _ = await p.communicate()\n    return out.decode().strip()\n"
        "print(asyncio.run(main()))\n", "ok"),
}

#: what a level cannot offer, and why (the README's security table says the same)
UNSUPPORTED = {
    "restricted": {
        "multiprocessing_pool": "no private /dev/shm without a mount namespace, and the "
                                "host's is shared: multiprocessing's semaphores need it",
        "multiprocessing_queue": "no private /dev/shm without a mount namespace, and the "
                                 "host's is shared: multiprocessing's semaphores need it",
        "literal_tmp": "the host's /tmp is shared: restricted gives a private tmp through "
                       "TMPDIR (the tempfile module), not at the literal /tmp",
    },
}


@pytest.mark.parametrize("feature", sorted(FEATURES))
@pytest.mark.parametrize("level", LEVEL)
def test_common_script_features(level, feature, engines, tmp_path):
    reason = UNSUPPORTED.get(level, {}).get(feature)
    code, expected = FEATURES[feature]
    result = engines(level).execute(code, mode="project", cwd=str(tmp_path))
    if reason:
        # documented, and still true: if this starts to work, update the table
        assert result.status == "error", result.output
        pytest.skip(f"unsupported at {level}: {reason}")
    assert result.status == "success", (result.error, result.stderr)
    assert result.output.strip() == expected


@pytest.mark.parametrize("level", LEVEL)
def test_own_proc_entry_is_not_a_window_on_others(level, engines, tmp_path):
    """/proc/self is readable; a sibling's /proc entry is not, except where a pid
    namespace makes every visible process part of the same execution."""
    code = ("import os, subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
            "try:\n    open(f'/proc/{p.pid}/status').read(); print('readable')\n"
            "except OSError:\n    print('denied')\n"
            "p.kill(); p.wait()\n")
    result = engines(level).execute(code, mode="project", cwd=str(tmp_path))
    assert result.status == "success", (result.error, result.stderr)
    assert result.output.strip() == ("denied" if level == "restricted" else "readable")
