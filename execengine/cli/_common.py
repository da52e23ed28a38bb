"""Helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from execengine._text import table as table
from execengine.config import Config, load_config
from execengine.engine.core import configured_registry
from execengine.errors import ExecEngineError
from execengine.registry import ToolRegistry


def config_from(args: argparse.Namespace) -> Config:
    return load_config(getattr(args, "config", None))


def registry_from(args: argparse.Namespace, config: Config | None = None) -> ToolRegistry:
    """The built-in tools, plugins and the configured MCP servers' tools; close it (the
    MCP servers stop with it)."""
    return configured_registry(config or config_from(args))


def require_extra(extra: str, modules: tuple[str, ...], *, what: str,
                  error: type[ExecEngineError]) -> None:
    """Raise ``error`` saying which extra to install when one of ``modules`` (what ``what``
    needs) cannot be imported; before anything starts, never a bare traceback."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise error(f"{what} needs the {extra} extra ({exc.name or name} is not "
                        f"installed): pip install 'execengine[{extra}]'") from exc


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


@contextlib.contextmanager
def on_sigint(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` answers SIGINT (Ctrl-C) while the block runs, instead of a
    KeyboardInterrupt raised wherever the main thread is. Only the main thread gets
    signals: elsewhere there is nothing to install, and the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
