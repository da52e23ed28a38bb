"""``execengine run``: run a script (or ``-c CODE``) the way the ``execute_code`` tool does."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

from execengine._text import plural
from execengine.cli._common import config_from, on_sigint, print_json, registry_from
from execengine.engine import Engine, ExecutionResult
from execengine.engine.result import STDERR_HEADER
from execengine.errors import ConfigError

#: process exit status per execution status (an error keeps the script's own code)
EXIT_CODES = {"success": 0, "error": 1, "timeout": 124, "interrupted": 130}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="run a Python script that calls tools through hermes_tools",
        description="Run a script in a sandboxed child exactly as the execute_code tool "
        "does. The script's output goes to stdout; a summary (status, tool calls, time) "
        "to stderr. Exit status: 0 success, the script's code (or 1) on error, 124 "
        "timeout, 130 interrupted.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("script", nargs="?", metavar="SCRIPT.py",
                     help="the script to run ('-' reads it from stdin)")
    src.add_argument("-c", dest="code", metavar="CODE", help="run this code instead")
    p.add_argument("--mode", choices=("project", "strict"),
                   help="project: current directory and project Python; strict: host Python "
                   "in a private directory (default: code_execution.mode)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="wall-clock limit (default: code_execution.timeout)")
    p.add_argument("--toolsets", metavar="A,B", action="append",
                   help="toolsets whose tools the script may call (default: the config's)")
    p.add_argument("--cwd", metavar="DIR",
                   help="working directory (project mode only: a strict-mode script runs "
                        "in a private folder)")
    p.add_argument("--isolation", choices=("auto", "none", "restricted", "isolated"),
                   help="OS isolation level (default: code_execution.isolation; "
                        "`execengine doctor` shows what this host supports)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _read_code(args: argparse.Namespace) -> str:
    if args.code is not None:
        return str(args.code)
    if args.script == "-":
        return sys.stdin.read()
    try:
        with open(args.script, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read script: {exc}", path=args.script) from exc


def script_name(args: argparse.Namespace) -> str:
    """What tracebacks call the code, as ``python`` would: the script's absolute path,
    ``<string>`` for ``-c``, ``<stdin>`` for ``-``."""
    if args.code is not None:
        return "<string>"
    if args.script == "-":
        return "<stdin>"
    return os.path.abspath(str(args.script))


def exit_status(result: ExecutionResult) -> int:
    if result.status == "error" and result.exit_code and 0 < result.exit_code < 124:
        return result.exit_code
    return EXIT_CODES[result.status]


def run(args: argparse.Namespace) -> int:
    code = _read_code(args)
    overrides: dict[str, Any] = {}
    if args.mode:
        overrides["code_execution.mode"] = args.mode
    if args.timeout is not None:
        overrides["code_execution.timeout"] = args.timeout
    config = config_from(args)
    if args.isolation:
        overrides["code_execution.isolation"] = args.isolation
    if overrides:
        config = config.with_overrides(overrides, origin="command line")
    if args.cwd is not None and config.code_execution.mode == "strict":
        # strict mode runs the script in a private staging folder: --cwd would be ignored
        where = ("--mode strict" if args.mode else "strict mode (code_execution.mode, "
                 f"{config.origins.get('code_execution.mode', 'default')})")
        args.command_parser.error(
            f"--cwd cannot be used with {where}: a strict-mode script runs in a private "
            "folder of its own; leave out --cwd, or use --mode project")
    toolsets = ([t.strip() for group in args.toolsets for t in group.split(",") if t.strip()]
                if args.toolsets else None)
    registry = registry_from(args, config)
    with registry, Engine(config=config, registry=registry) as engine:
        if toolsets is not None:
            registry.resolve_toolsets(toolsets)  # unknown names: a clear error, early
        result = _run_interruptibly(engine, code, toolsets, args.cwd, script_name(args))
    if args.json:
        print_json(result.to_model_dict())
        return exit_status(result)
    _print_human(result)
    return exit_status(result)


def _run_interruptibly(engine: Engine, code: str, toolsets: list[str] | None,
                       cwd: str | None, filename: str) -> ExecutionResult:
    """Run in a worker thread so Ctrl-C interrupts the script (same escalation as a
    timeout) instead of tearing through the teardown.

    Ctrl-C sets ``stop`` from a SIGINT handler instead of raising KeyboardInterrupt in the
    main thread: an exception raised between the bytecodes of ``Event.wait`` can leave the
    event's lock held, and the worker's ``done.set()`` then waits for it for ever (the CLI
    hung once, in a loaded run). A second Ctrl-C changes nothing: the teardown is bounded."""
    stop = threading.Event()
    done = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = engine.execute(code, enabled_toolsets=toolsets, interrupt=stop,
                                           cwd=cwd, filename=filename)
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    t = threading.Thread(target=work, name="execengine-run")
    with on_sigint(lambda signum, frame: stop.set()):
        t.start()
        done.wait()
    t.join()
    if "error" in box:
        raise box["error"]
    result: ExecutionResult = box["result"]
    return result


def _print_human(result: ExecutionResult) -> None:
    """The script's stdout on stdout, its stderr (a traceback) once on stderr, then why it
    failed when the stderr does not say it, and the summary. (``output`` carries the
    stderr too, and ``error`` repeats it, for a model that reads only one of them.)"""
    out = result.output
    appended = STDERR_HEADER + result.stderr.strip("\n")
    if result.stderr.strip() and out.endswith(appended):
        out = out[:-len(appended)]
    sys.stdout.write(out if out.endswith("\n") or not out else out + "\n")
    sys.stdout.flush()
    err = sys.stderr
    if result.stderr:
        err.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")
    if (result.error and result.status == "error"
            and result.error.strip() != result.stderr.strip()):
        err.write(result.error.rstrip("\n") + "\n")
    summary = (f"[{result.status}] {plural(result.tool_calls_made, 'tool call')}, "
               f"{result.duration_seconds:.2f}s")
    if result.exit_code is not None:
        summary += f", exit code {result.exit_code}"
    err.write(summary + "\n")
    if result.full_output_path:
        err.write(f"full output: {result.full_output_path}\n")
    if result.hint:
        err.write(f"hint: {result.hint}\n")
