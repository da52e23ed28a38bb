"""``execengine config check`` and ``execengine config show``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from execengine._configload import find_config
from execengine._text import plural
from execengine.cli._common import config_from, print_json, table
from execengine.config import Config, iter_options, option_choices

#: columns ``config show`` fits in (long values wrap)
WIDTH = 100


def add_parser(sub: Any) -> None:
    p = sub.add_parser("config", help="check or show the configuration",
                       description="Validate config.yaml or show the effective configuration.")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    c = csub.add_parser("check", help="validate the config file and report problems")
    c.set_defaults(func=run_check)
    s = csub.add_parser("show", help="print every option, its value and where it came from")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--show-secrets", action="store_true", help="do not mask secret values")
    s.set_defaults(func=run_show)
    r = csub.add_parser("reference", help="print every option as a Markdown table")
    r.set_defaults(func=run_reference)


def run_check(args: argparse.Namespace) -> int:
    path, why = find_config(args.config)
    config = config_from(args)  # raises ConfigError -> exit 2 with the message
    if path is None:
        print("no config file found; built-in defaults are in effect")
    else:
        print(f"{path}: ok ({why}, {plural(len(config.origins), 'option')} set)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    config = config_from(args)
    rows = []
    for key, f in iter_options(names=config.mcp_servers):
        value = config.get(key)
        if f.metadata.get("secret") and value and not args.show_secrets:
            value = "***"
        rows.append({"key": key, "value": value,
                     "origin": config.origins.get(key, "default"),
                     "doc": f.metadata.get("doc", "")})
    if args.json:
        print_json({"source": config.source, "options": rows})
        return 0
    print(f"# config file: {config.source or 'none (defaults)'}")
    print(table([[r["key"], _fmt(r["value"]), _origin(r["origin"], config.source)]
                 for r in rows], ["KEY", "VALUE", "FROM"], width=WIDTH, wrap=1))
    return 0


def _origin(origin: str, source: str | None) -> str:
    """Where a value came from, short: ``line 12`` of the file named above the table."""
    if source and origin.startswith(source + ":"):
        return "line " + origin[len(source) + 1:].split(":")[0]
    return origin


def _fmt(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def reference_table() -> str:
    """Every option with its default and meaning, as Markdown (the README's reference)."""
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, f in iter_options():
        doc = f.metadata.get("doc", "")
        section, _, name = key.rpartition(".")
        owner = _owner(section)
        choices = option_choices(owner, name)
        if choices:
            doc += " (" + " / ".join(_fmt(c) for c in choices) + ")"
        default = f.default
        if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        shown = f"{len(default)} entries" if isinstance(default, tuple) and len(default) > 3 \
            else _fmt(default)
        lines.append(f"| `{key}` | `{shown}` | {doc} |")
    return "\n".join(lines)


def _owner(section: str) -> type:
    """The dataclass holding the options of ``section`` (``mcp_servers.<name>.tools``)."""
    owner: type = Config
    parts = section.split(".") if section else []
    while parts:
        f = next(f for f in dataclasses.fields(owner) if f.name == parts[0])
        if f.metadata.get("named"):
            owner, parts = f.metadata["named"], parts[2:]  # skip the entry's name
        else:
            owner, parts = f.default_factory, parts[1:]  # type: ignore[assignment]
    return owner


def run_reference(args: argparse.Namespace) -> int:
    print(reference_table())
    return 0
