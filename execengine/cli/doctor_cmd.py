"""``execengine doctor``: which isolation layers this host has, and which level runs."""

from __future__ import annotations

import argparse
from typing import Any

from execengine.cli._common import config_from, print_json, table
from execengine.errors import IsolationError
from execengine.isolation.choose import choose_level
from execengine.isolation.detect import detect


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="report the isolation layers available on this host",
        description="Probe every isolation layer (rlimits, uid drop, Landlock, seccomp, "
                    "namespaces, cgroups), say why any is missing, which level 'auto' picks "
                    "and which level the configuration would run at.")
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
    if args.json:
        data = report.to_json()
        data.update({"configured": ce.isolation, "min_isolation": ce.min_isolation,
                     "chosen": chosen, "error": problem})
        print_json(data)
        return 0 if problem is None else 1
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
    if problem:
        print(f"error: {problem}")
        return 1
    return 0
