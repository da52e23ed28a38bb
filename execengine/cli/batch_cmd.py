"""``execengine batch``: run every task of a JSONL file, locally or on a Ray cluster."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from typing import Any

from execengine.batch import Executor, LocalExecutor, RayExecutor, run_batch
from execengine.cli._common import config_from, on_sigint
from execengine.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "batch", help="run many scripts from a JSONL file, locally or on Ray",
        description="Run each task of TASKS.jsonl (one JSON object a line: id, code, and "
        "optionally cwd, toolsets, timeout, mode, session, retry_safe, meta) and append "
        "one result a line to RESULTS.jsonl in completion order. A rerun skips the ids "
        "already recorded. Ctrl-C stops cleanly (a second one aborts). See docs/batch.md.")
    p.add_argument("tasks", metavar="TASKS.jsonl", help="the tasks, one JSON object a line")
    p.add_argument("--out", required=True, metavar="RESULTS.jsonl",
                   help="results file (appended to; existing results are skipped)")
    p.add_argument("--ray", metavar="auto|ADDRESS",
                   help="run on a Ray cluster: 'auto' joins the one this machine belongs to, "
                        "or give its address (needs the execengine[ray] extra)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="tasks in flight at most (default: local, one per CPU; Ray, one per "
                        "CPU of each node)")
    p.add_argument("--retries", type=int, default=2, metavar="N",
                   help="Ray: runs again of a retry_safe task whose worker was lost "
                        "(default: 2)")
    p.add_argument("--prefetch", type=int, default=0, metavar="N",
                   help="Ray: tasks waiting on each node beyond those running, so tiny tasks "
                        "do not wait for the driver; a waiting task lost with its worker is "
                        "reported worker_lost unstarted (default: 0)")
    p.add_argument("--restart", action="store_true",
                   help="empty RESULTS.jsonl first and run every task")
    p.add_argument("--isolation", choices=("auto", "none", "restricted", "isolated"),
                   help="OS isolation level (default: code_execution.isolation)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.concurrency is not None and args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1", path="command line")
    config = config_from(args)
    if args.isolation:
        config = config.with_overrides({"code_execution.isolation": args.isolation},
                                       origin="command line")
    # the batch's own files, when a task's working directory holds them: no task may
    # change them (read-only at isolated; a replaced results file is reported at the end)
    config = config.with_overrides({"policy.protected_paths": [
        *config.policy.protected_paths, os.path.abspath(args.out),
        os.path.abspath(args.tasks)]}, origin="command line")
    stop = threading.Event()
    executor: Executor
    if args.ray:
        executor = RayExecutor(config=config, address=args.ray,
                               concurrency=args.concurrency, retries=args.retries,
                               prefetch=args.prefetch)
    else:
        executor = LocalExecutor(config=config, concurrency=args.concurrency)
    with executor, _stop_on_sigint(stop):
        summary = run_batch(args.tasks, args.out, executor, restart=args.restart, stop=stop)
    if args.json:
        json.dump(summary.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print(summary.text(), file=sys.stderr)
    return 130 if summary.stopped else 0


def _stop_on_sigint(stop: threading.Event) -> contextlib.AbstractContextManager[None]:
    """The first Ctrl-C sets ``stop`` (finish cleanly); the second raises KeyboardInterrupt."""

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nexecengine: stopping (results so far are kept; Ctrl-C again to abort)",
              file=sys.stderr)

    return on_sigint(handler)
