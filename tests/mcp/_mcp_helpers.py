"""Helpers shared by the MCP tests (a uniquely named module: every test directory has a
conftest, so importing from "conftest" would be ambiguous)."""

from __future__ import annotations

import sys
from pathlib import Path

from execengine.engine import Engine
from execengine.launch.local import LocalLauncher
from execengine.registry import ToolRegistry

TOY = str(Path(__file__).parent / "servers" / "toy.py")
BIN = Path(sys.executable).parent


def toy_server(name: str, *extra: str, **options: str) -> str:
    args = ", ".join([repr(TOY), *map(repr, extra)])
    opts = "".join(f"    {k}: {v}\n" for k, v in options.items())
    return f"  {name}:\n    command: {sys.executable}\n    args: [{args}]\n{opts}"


def run_script(reg: ToolRegistry, code: str, **kw):
    with Engine(registry=reg, launcher=LocalLauncher()) as engine:
        return engine.execute(code, **kw)
