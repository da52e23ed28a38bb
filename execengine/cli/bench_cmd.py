"""``execengine bench tokens`` and ``execengine bench speed``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from execengine.bench.errors import BenchError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="measure token savings and speed",
                       description="Benchmarks: what programmatic tool calling saves in "
                       "context tokens (tokens), and how fast the engine is (speed).")
    bsub = p.add_subparsers(dest="bench_command", metavar="WHAT")

    t = bsub.add_parser("tokens", help="token savings of programmatic tool calling",
                        description="Run each workflow for real both ways (sequential tool "
                        "calls, one execute_code call) on generated fixtures, check both reach "
                        "the same answer, and count context tokens and round trips.")
    t.add_argument("--quick", action="store_true", help="one small workflow per family")
    t.add_argument("--json", action="store_true", help="print the report as JSON")
    t.add_argument("--chart", metavar="PATH", help="also draw the chart to this PNG")
    t.add_argument("--out", metavar="PATH", help="also write the JSON report to this file")
    t.add_argument("--workflow", action="append", metavar="FILE",
                   help="run the workflows of this .py or .yaml file instead of the built-in "
                        "ones (repeatable)")
    t.add_argument("--only", action="append", metavar="NAME",
                   help="run only this built-in workflow (repeatable)")
    t.add_argument("--encoding", default="o200k_base", choices=("o200k_base", "cl100k_base"),
                   help="tokenizer (both exact; default o200k_base)")
    t.add_argument("--list", action="store_true", help="list the workflows and exit")
    t.set_defaults(func=run_tokens)

    from execengine.bench.speed import SUITES

    s = bsub.add_parser("speed", help="engine speed against same-run baselines",
                        description="Start-up, launch, tool round trips, concurrency, "
                        "throughput, scaling and memory; every figure (median, min, p90) "
                        "beside a baseline measured in the same run, interleaved with it.")
    s.add_argument("--quick", action="store_true", help="fewer, smaller runs")
    s.add_argument("--suite", action="append", choices=SUITES, metavar="NAME",
                   help=f"run only this suite (repeatable): {', '.join(SUITES)}")
    s.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    s.set_defaults(func=run_speed)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _workflows(args: argparse.Namespace) -> list[Any]:
    from execengine.bench import suite, userflows

    if args.workflow:
        return [wf for path in args.workflow for wf in userflows.load(path)]
    named = suite.by_name()
    wanted = list(args.only or (suite.QUICK if args.quick else named))
    unknown = [n for n in wanted if n not in named]
    if unknown:
        from execengine.errors import did_you_mean

        raise BenchError(f"unknown workflow {unknown[0]!r}{did_you_mean(unknown[0], named)}")
    return [named[n] for n in wanted]


def run_tokens(args: argparse.Namespace) -> int:
    from execengine.bench import report
    from execengine.bench.runner import run_suite
    from execengine.cli._common import config_from, table

    workflows = _workflows(args)
    if args.list:
        print(table([[w.name, w.family, w.task[:70]] for w in workflows],
                    ["WORKFLOW", "FAMILY", "TASK"]))
        return 0

    def progress(r: Any) -> None:
        if not args.json:
            print(f"  {r.name:32} {r.sequential.tool_calls:4} calls  saved "
                  f"{report.pct(r.savings):>6}  {'same answer' if r.agree else 'DIFFERENT'}",
                  file=sys.stderr, flush=True)

    results = run_suite(workflows, config=config_from(args), encoding=args.encoding,
                        progress=progress)
    summary = report.summarize(results, encoding=args.encoding)
    if args.out:
        Path(args.out).write_text(report.to_json(summary) + "\n", encoding="utf-8")
    if args.chart:
        path = report.chart(summary, args.chart)
        print(f"chart written to {path}", file=sys.stderr)
    print(report.to_json(summary) if args.json else report.table(summary))
    return 0 if all(r.agree for r in results) else 1


def run_speed(args: argparse.Namespace) -> int:
    from execengine.bench.speed import run_all

    return run_all(quick=args.quick, config_path=getattr(args, "config", None),
                   suites=args.suite, json_path=args.json)
