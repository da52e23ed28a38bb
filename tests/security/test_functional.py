"""What scripts need still works at every level, through the real engine: threads,
subprocess, asyncio, the RPC, tool calls from a subprocess, writing the working directory,
importing the project's packages in project mode."""

from __future__ import annotations

import textwrap
import threading

import pytest

from execengine.config import Config
from execengine.engine import Engine
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
                       "required": ["query"]}}, web_search)
    return reg


@pytest.fixture(scope="module")
def engines():
    made: dict[str, Engine] = {}

    def get(level: str) -> Engine:
        if level not in made:
            from execengine.isolation import make_launcher

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
    result = engines(level).execute(
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "if os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
        "print('started', flush=True)\ntime.sleep(60)\n",
        mode="project", cwd=str(tmp_path), timeout=1.5)
    assert result.status == "timeout"
    assert "started" in result.output
