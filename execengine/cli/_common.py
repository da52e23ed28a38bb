"""Helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import textwrap
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


def table(rows: list[list[Any]], header: list[str], *, width: int | None = None,
          wrap: int | None = None) -> str:
    """Columns padded to their widest cell. With ``width`` and ``wrap`` (a column's
    index), that column is narrowed so that the table fits ``width`` and its cells are
    wrapped onto more lines (at spaces; a word longer than the column is split)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(header))]
    if width is not None and wrap is not None:
        others = sum(w for i, w in enumerate(widths) if i != wrap) + 2 * (len(widths) - 1)
        widths[wrap] = max(min(widths[wrap], width - others), len(header[wrap]), 12)

    def line(parts: list[str]) -> str:
        return "  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip()

    lines = [line(header), "  ".join("-" * w for w in widths)]
    for r in cells:
        if wrap is None or len(r[wrap]) <= widths[wrap]:
            lines.append(line(r))
            continue
        pieces = textwrap.wrap(r[wrap], widths[wrap], break_on_hyphens=False) or [""]
        lines.append(line([*r[:wrap], pieces[0], *r[wrap + 1:]]))
        lines.extend(line(["" if i != wrap else p for i in range(len(r))]) for p in pieces[1:])
    return "\n".join(lines)
