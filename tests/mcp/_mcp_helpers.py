"""Helpers shared by the MCP tests (a uniquely named module: every test directory has a
conftest, so importing from "conftest" would be ambiguous)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from execengine.engine import Engine
from execengine.launch.local import LocalLauncher
from execengine.registry import ToolRegistry

TOY = str(Path(__file__).parent / "servers" / "toy.py")
BIN = Path(sys.executable).parent
#: how long ``execengine mcp`` may take to serve (about 3 s idle, over 30 s on a loaded
#: 2-core host)
START = 150.0


def toy_server(name: str, *extra: str, **options: str) -> str:
    args = ", ".join([repr(TOY), *map(repr, extra)])
    opts = "".join(f"    {k}: {v}\n" for k, v in options.items())
    return f"  {name}:\n    command: {sys.executable}\n    args: [{args}]\n{opts}"


def run_script(reg: ToolRegistry, code: str, **kw):
    with Engine(registry=reg, launcher=LocalLauncher()) as engine:
        return engine.execute(code, **kw)


def cli_env(home: Path | str, **extra: str) -> dict[str, str]:
    """The environment of an ``execengine`` process a test starts: this one's without the
    ``EXECENGINE_`` variables, ``HOME`` at ``home`` (no user config, no cache in the real
    home), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXECENGINE_")}
    env.update(HOME=str(home), **extra)
    return env


@dataclass(frozen=True)
class Served:
    """An ``execengine mcp --http`` process serving on ``url``; ``token_file``: where it
    said its token is (None: it made none)."""

    proc: subprocess.Popen[str]
    url: str
    token_file: str | None

    @property
    def auth(self) -> dict[str, str]:
        """The bearer header of the token the server made (none when it made none)."""
        if self.token_file is None:
            return {}
        with open(self.token_file) as fh:
            return {"Authorization": f"Bearer {fh.read().strip()}"}


def serve_http(args: list[str], env: dict[str, str]) -> Served:
    """``execengine *args`` (an ``mcp --http`` command line), read until it serves; an
    AssertionError with what it printed if it does not within :data:`START`."""
    proc = subprocess.Popen([sys.executable, "-m", "execengine", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    token_file = None
    deadline = time.monotonic() + START
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if found := re.search(r"the token is in (\S+) ", line):
            token_file = found.group(1)
        if found := re.search(r"serving streamable HTTP on (http://\S+)", line):
            return Served(proc, found.group(1), token_file)
    stop(proc)
    raise AssertionError(f"server did not start: {''.join(lines)}")


def stop(proc: subprocess.Popen[str], wait: float = 30.0) -> None:
    """End a server process (SIGTERM, then SIGKILL after ``wait`` seconds) and close its
    pipes."""
    proc.terminate()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
