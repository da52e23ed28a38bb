"""``execengine doctor``: which isolation layers this host has, and which level runs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from execengine.cli._common import config_from, print_json, registry_from, table
from execengine.cli.tools_cmd import mcp_status, print_mcp_status
from execengine.errors import IsolationError
from execengine.host.factory import host_class
from execengine.isolation.detect import detect
from execengine.launch.factory import choose_level
from execengine.remote.doctor import Check

if TYPE_CHECKING:
    from execengine.config import Config


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="report the isolation layers available on this host",
        description="Probe every isolation layer (rlimits, uid drop, Landlock, seccomp, "
                    "namespaces, cgroups), say why any is missing, which level 'auto' picks "
                    "and which level the configuration would run at. With terminal.backend: "
                    "ssh, check the remote too: reachability, host key, interpreter, socket "
                    "forwarding, installed runtime.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    config = config_from(args)
    ce = config.code_execution
    report = detect()
    try:
        chosen: str | None = choose_level(ce.isolation, ce.min_isolation, report)
        problem = None
    except IsolationError as exc:
        chosen, problem = None, str(exc)
    remote = _remote_checks(config)
    failed = [c for c in remote if c.required and not c.ok]
    servers = _mcp_servers(args, config)
    if args.json:
        data = report.to_json()
        data.update({"configured": ce.isolation, "min_isolation": ce.min_isolation,
                     "chosen": chosen, "error": problem, "mcp_servers": servers})
        if remote:
            data["remote"] = {"ok": not failed, "checks": [c.to_json() for c in remote]}
        print_json(data)
        return 0 if problem is None and not failed else 1
    rows = [[x.name, "yes" if x.available else "no", x.detail] for x in report.layers]
    print(table(rows, ["layer", "available", "detail"]))
    print()
    for level in ("none", "restricted", "isolated"):
        ok = report.levels.get(level)
        why = "" if ok else f"  ({report.reasons.get(level, '')})"
        print(f"level {level:<10} {'available' if ok else 'unavailable'}{why}")
    print(f"auto would choose: {report.best}")
    print(f"configured: isolation={ce.isolation}, min_isolation={ce.min_isolation or '-'}"
          f" -> {chosen or 'ERROR'}")
    if remote:
        print()
        print(f"remote (terminal.backend: {config.terminal.backend}): "
              f"{'ok' if not failed else 'FAILED'}")
        print(table([[c.name, "yes" if c.ok else "no", c.detail] for c in remote],
                    ["check", "ok", "detail"]))
    if servers:
        print()
        print_mcp_status(servers)
    if problem:
        print(f"error: {problem}")
        return 1
    return 1 if failed else 0


def _remote_checks(config: Config) -> list[Check]:
    return host_class(config).doctor_checks(config)


def _mcp_servers(args: argparse.Namespace, config: Any) -> list[dict[str, Any]]:
    """Start the configured MCP servers once and report each one's state."""
    if not config.mcp_servers:
        return []
    with registry_from(args, config) as reg:
        return mcp_status(reg)
