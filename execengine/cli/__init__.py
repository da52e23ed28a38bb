"""The ``execengine`` command line. Each sub-command lives in its own module here and
contributes ``add_parser(subparsers)``; the parsed namespace carries the function to run.

The global options (``--config``, ``--verbose``) are accepted before the command and after
it, at any depth (``execengine config check --config x.yaml``); an unknown option is
reported with the usage of the command it was given to."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from execengine.cli.version_cmd import version_text
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
    "execengine.cli.version_cmd",
)


class CommandParser(argparse.ArgumentParser):
    """The parser of a command (and of its sub-commands, which argparse makes of the same
    class): it takes the global options too, defaulting to leave the namespace alone
    (``SUPPRESS``) so that a value given before the command stands, and puts itself in
    the namespace as ``command_parser`` (a nested command's replaces its parent's) to
    report what the command did not recognise with its own usage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        add_global_options(self.add_argument_group("global options"),
                           default=argparse.SUPPRESS)
        self.set_defaults(command_parser=self)


def add_global_options(group: Any, *, default: Any = None) -> None:
    """``--config`` and ``--verbose`` on ``group`` (a parser or an argument group)."""
    group.add_argument("--config", metavar="PATH", default=default,
                       help="config.yaml to use (default: $EXECENGINE_CONFIG, then "
                            "~/.execengine/config.yaml, then built-in defaults)")
    group.add_argument("-v", "--verbose", action="store_true",
                       default=False if default is None else default,
                       help="log debug messages")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="execengine",
        description="A sandboxed code-execution engine for programmatic tool calling.",
    )
    parser.add_argument("--version", action="version", version=version_text())
    add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for modname in COMMANDS:
        import_module(modname).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the command they were given to, with its usage
        getattr(args, "command_parser", parser).error(
            f"unrecognized arguments: {' '.join(unknown)}")
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
