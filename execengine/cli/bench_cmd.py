"""``execengine bench tokens`` and ``execengine bench speed``."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from execengine._text import plural, shorten
from execengine.bench import report, suite, userflows
from execengine.bench.chart import chart
from execengine.bench.cost import load_prices
from execengine.bench.live.run import run_live_cli
from execengine.bench.runner import DEFAULT_SEED, MINIMAL, Prefix, run_suite
from execengine.bench.speed import SUITES, run_all
from execengine.cli._common import config_from, require_extra, table
from execengine.errors import BenchError, did_you_mean


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="measure token savings and speed",
                       description="Benchmarks: what programmatic tool calling saves in "
                       "context tokens (tokens), and how fast the engine is (speed).")
    bsub = p.add_subparsers(dest="bench_command", metavar="WHAT")

    t = bsub.add_parser("tokens", help="token savings of programmatic tool calling",
                        description="An oracle upper bound: run each workflow's hand-written "
                        "strategies for real both ways (sequential tool calls, batched as a "
                        "model issuing parallel calls; one execute_code call) on generated "
                        "fixtures, check every answer against the expected one, and compare "
                        "the cheapest plan with the cheapest script per task: billed cost, "
                        "context tokens and round trips, medians over tasks first. With "
                        "--model, a live model does the tasks and the report puts its usage "
                        "beside the oracle's.")
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
    t.add_argument("--prefix", default="realistic", choices=("realistic", "minimal"),
                   help="what precedes the task: a real-sized system prompt and every tool of "
                        "the session (default), or two sentences and the workflow's tools")
    t.add_argument("--system-tokens", type=int, default=4000, metavar="N",
                   help="size of the realistic system prompt (default 4000)")
    t.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="N",
                   help=f"seed of the fixtures and call ids (default {DEFAULT_SEED}: the "
                        "committed figures)")
    t.add_argument("--reasoning-tokens", type=int, metavar="N",
                   help="hidden reasoning tokens per model call, both sides, billed as output "
                        "(default: the price sheet's; 0 for non-reasoning models)")
    t.add_argument("--price", metavar="SHEET", help="price sheet for costs (default: the "
                   "prices file's default; see --prices)")
    t.add_argument("--prices", metavar="FILE", help="a prices file of the shape of "
                   "execengine/bench/prices.yaml")
    t.add_argument("--cache", default="warm", choices=("warm", "cold", "off"),
                   help="prompt cache for costs (default warm)")
    t.add_argument("--figures", metavar="PATH",
                   help="also rewrite the figures block of this file (docs/benchmarks.md)")
    t.add_argument("--readme", metavar="PATH",
                   help="also rewrite the short headline block of this file (a README)")
    live = t.add_argument_group("live model (--model)")
    live.add_argument("--model", metavar="URL/NAME",
                      help="run the tasks with a real model: an OpenAI-compatible or Anthropic "
                           "endpoint and model name, e.g. https://api.openai.com/v1/gpt-4.1")
    live.add_argument("--api", choices=("auto", "openai", "anthropic"), default="auto",
                      help="API shape (default: anthropic for api.anthropic.com, else openai)")
    live.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the "
                      "key (default OPENAI_API_KEY or ANTHROPIC_API_KEY)")
    live.add_argument("--runs", type=int, default=3, metavar="N",
                      help="runs per task and mode (default 3)")
    live.add_argument("--modes", default="tools,code", metavar="LIST",
                      help="tools (its own tool calls), code (execute_code offered too); "
                           "default both")
    live.add_argument("--max-turns", type=int, default=40, metavar="N",
                      help="model calls allowed per run (default 40)")
    t.set_defaults(func=run_tokens)


    s = bsub.add_parser("speed", help="engine speed against same-run baselines",
                        description="Start-up, launch, tool round trips, concurrency, "
                        "throughput, scaling and memory; every figure (median, min, p90) "
                        "beside a baseline measured in the same run, interleaved with it.")
    s.add_argument("--quick", action="store_true", help="fewer, smaller runs")
    s.add_argument("--suite", action="append", choices=SUITES, metavar="NAME",
                   help=f"run only this suite (repeatable): {', '.join(SUITES)}")
    s.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    s.add_argument("--reference", metavar="PYTHON",
                   help="also run the reference suite: ours against the reference system's "
                        "execute_code, run by this interpreter (one with hermes-agent "
                        "installed: pip install -r benchmarks/reference-requirements.txt)")
    s.set_defaults(func=run_speed)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


#: columns ``bench tokens --list`` fits in
LIST_WIDTH = 100
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _readable(task: str) -> str:
    """A task as listed, before its fixtures exist: ``{first_config}`` (filled in with a
    generated file's name when the workflow runs) reads ``<first config>``."""
    return _PLACEHOLDER.sub(lambda m: "<" + m.group(1).replace("_", " ") + ">", task)


def _workflows(args: argparse.Namespace) -> list[Any]:

    if args.workflow:
        return [wf for path in args.workflow for wf in userflows.load(path)]
    named = suite.by_name()
    wanted = list(args.only or (suite.QUICK if args.quick else named))
    unknown = [n for n in wanted if n not in named]
    if unknown:

        raise BenchError(f"unknown workflow {unknown[0]!r}{did_you_mean(unknown[0], named)}")
    return [named[n] for n in wanted]


def run_tokens(args: argparse.Namespace) -> int:

    workflows = _workflows(args)
    if args.list:
        # each workflow's question on the line below its row, indented, cut to fit
        rows = [[w.name, w.family, w.group, ",".join(s.name for s in w.strategies())]
                for w in workflows]
        lines = table(rows, ["WORKFLOW", "FAMILY", "TASK", "STRATEGIES"]).splitlines()
        print("\n".join(lines[:2]))
        for line, w in zip(lines[2:], workflows, strict=True):
            print(line)
            print("    " + shorten(_readable(w.task), LIST_WIDTH - 4))
        return 0
    if args.reasoning_tokens is not None and args.reasoning_tokens < 0:
        raise BenchError("--reasoning-tokens must be 0 or more")
    prices = load_prices(args.prices)
    prices.sheet(args.price)  # a bad name fails before anything runs
    if args.chart:  # before the runs, not after them
        require_extra("bench", ("matplotlib",), what="bench tokens --chart", error=BenchError)
    realistic = Prefix("realistic", system_tokens=args.system_tokens, session_tools=True)
    if args.model:

        return run_live_cli(args, workflows, prices, config=config_from(args),
                            prefixes=(MINIMAL, realistic))

    def progress(r: Any) -> None:
        if not args.json:
            print(f"  {r.name:32} {plural(r.sequential.tool_calls, 'call'):>10}  "
                  f"{plural(len(r.strategies), 'strategy', 'strategies')}  "
                  f"{'right' if r.agree else 'WRONG'}", file=sys.stderr, flush=True)

    run = run_suite(workflows, config=config_from(args), encoding=args.encoding,
                    prefixes=(MINIMAL, realistic), progress=progress, seed=args.seed)
    summary = report.summarize(run, prices=prices, sheet=args.price, cache=args.cache,
                               reasoning=args.reasoning_tokens, prefix=args.prefix,
                               encoding=args.encoding, system_tokens=args.system_tokens)
    for path, block in ((args.figures, report.figures_block),
                        (args.readme, report.headline_block)):
        if path:
            report.update_block(path, block(summary))
            print(f"figures written to {path}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(report.to_json(summary) + "\n", encoding="utf-8")
    if args.chart:
        print(f"chart written to {chart(summary, args.chart)}", file=sys.stderr)
    print(report.to_json(summary) if args.json else report.table(summary))
    return 0 if all(r.agree for r in run.results) else 1


def run_speed(args: argparse.Namespace) -> int:

    return run_all(quick=args.quick, config_path=getattr(args, "config", None),
                   suites=args.suite, json_path=args.json, reference_python=args.reference)
