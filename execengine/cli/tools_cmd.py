"""``execengine tools`` and ``execengine toolsets``."""

from __future__ import annotations

import argparse
from typing import Any

from execengine.cli._common import print_json, registry_from, table

#: columns ``tools`` fits in (the AVAILABLE column wraps)
WIDTH = 100


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tools", help="list tools and whether they are available",
                       description="List registered tools, their toolset, and whether they "
                       "are available here (with the reason when not).")
    p.add_argument("--toolset", action="append", metavar="NAME",
                   help="only tools of this toolset (repeatable; includes are resolved)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_tools)

    p = sub.add_parser("toolsets", help="list toolsets",
                       description="List toolsets with what they include and their tools.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run_toolsets)


def run_tools(args: argparse.Namespace) -> int:
    with registry_from(args) as reg:
        return _list_tools(args, reg)


def mcp_status(reg: Any) -> list[dict[str, Any]]:
    """Each configured MCP server's state (empty without MCP servers)."""
    if not reg.config.mcp_servers:
        return []
    manager = reg.services.mcp
    if manager is None:
        return []
    return [vars(s) for s in manager.status()]


def print_mcp_status(servers: list[dict[str, Any]]) -> None:
    rows = [[s["name"], s["transport"], s["state"], s["tools"], s["catalogue"], s["restarts"],
             s["error"] or "-"] for s in servers]
    print(table(rows, ["MCP SERVER", "TRANSPORT", "STATE", "TOOLS", "CATALOGUE", "RESTARTS",
                       "ERROR"]))


def _list_tools(args: argparse.Namespace, reg: Any) -> int:
    names = sorted(reg.resolve_toolsets(args.toolset)) if args.toolset else reg.names()
    avail = reg.availability(names)
    items: list[dict[str, Any]] = []
    for name in names:
        e = reg.get(name)
        items.append({
            "name": name, "toolset": e.toolset, "available": avail[name].available,
            "reason": avail[name].reason, "requires_env": list(e.requires_env),
            "agent_level": e.agent_level,
            "description": e.description.split("\n")[0],
        })
    if args.json:
        print_json({"tools": items, "load_errors": reg.load_errors,
                    "mcp_servers": mcp_status(reg)})
        return 0
    rows = []
    for it in items:
        status = "yes" if it["available"] else f"no: {it['reason']}"
        if it["agent_level"]:
            status += " (host-handled)"
        env = ",".join(it["requires_env"]) or "-"
        rows.append([it["name"], it["toolset"], status, env])
    print(table(rows, ["TOOL", "TOOLSET", "AVAILABLE", "REQUIRES_ENV"], width=WIDTH, wrap=2))
    servers = mcp_status(reg)
    if servers:
        print()
        print_mcp_status(servers)
    for where, why in reg.load_errors.items():
        print(f"warning: {where} failed to load: {why}")
    return 0


def run_toolsets(args: argparse.Namespace) -> int:
    with registry_from(args) as reg:
        return _list_toolsets(args, reg)


def _list_toolsets(args: argparse.Namespace, reg: Any) -> int:
    status = reg.toolset_availability()
    items: list[dict[str, Any]] = []
    for name, ts in sorted(reg.toolsets.items()):
        items.append({
            "name": name, "description": ts.description, "includes": list(ts.includes),
            "tools": sorted(reg.resolve_toolsets([name])),
            "available": status[name].available, "status": status[name].reason,
        })
    if args.json:
        print_json(items)
        return 0
    # the description, then the tools: one column, wrapped to fit the width
    rows = [[i["name"], "yes" if i["available"] else "no",
             f"{i['description']}: {', '.join(i['tools']) or '-'}"] for i in items]
    print(table(rows, ["TOOLSET", "AVAILABLE", "WHAT: TOOLS"], width=WIDTH, wrap=2))
    return 0
