"""The ``execengine`` command line. Each sub-command lives in its own module here and
contributes ``add_parser(subparsers)``; the parsed namespace carries the function to run."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import import_module

from execengine.errors import ExecEngineError

#: sub-command modules, in the order ``--help`` lists them
COMMANDS = (
    "execengine.cli.config_cmd",
    "execengine.cli.tools_cmd",
    "execengine.cli.run_cmd",
    "execengine.cli.batch_cmd",
    "execengine.cli.chat_cmd",
    "execengine.cli.doctor_cmd",
    "execengine.cli.mcp_cmd",
    "execengine.cli.bench_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="execengine",
        description="A sandboxed code-execution engine for programmatic tool calling.",
    )
    parser.add_argument("--config", metavar="PATH",
                        help="config.yaml to use (default: $EXECENGINE_CONFIG, then "
                             "~/.execengine/config.yaml, then built-in defaults)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in COMMANDS:
        import_module(modname).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ExecEngineError as exc:
        print(f"execengine: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("execengine: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
