"""Helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
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
