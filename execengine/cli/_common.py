"""Helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

from execengine.config import Config, load_config
from execengine.errors import ExecEngineError
from execengine.mcp.manager import attach
from execengine.registry import ToolRegistry


def config_from(args: argparse.Namespace) -> Config:
    return load_config(getattr(args, "config", None))


def registry_from(args: argparse.Namespace, config: Config | None = None) -> ToolRegistry:
    """The built-in tools, plugins and the configured MCP servers' tools; close it (the
    MCP servers stop with it)."""
    registry = ToolRegistry.with_builtins(config or config_from(args))
    if registry.config.mcp_servers:
        try:
            attach(registry)
        except BaseException:
            registry.close()
            raise
    return registry


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


def table(rows: list[list[Any]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)
