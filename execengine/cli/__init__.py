"""The ``execengine`` command line. Each sub-command lives in its own module here and
contributes ``add_parser(subparsers)``; the parsed namespace carries the function to run.

The global options (``--config``, ``--verbose``) are accepted before the command and after
it, at any depth (``execengine config check --config x.yaml``); an unknown option is
reported with the usage of the command it was given to."""

from __future__ import annotations

import argparse
import logging
import platform
import sys
from collections.abc import Sequence
from importlib import import_module

from execengine import __version__
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
#: where the namespace keeps the parser of the command that was given
PARSER_DEST = "_command_parser"


def version_text() -> str:
    """``execengine X.Y.Z (Python A.B.C, PATH)``: what ``--version`` prints."""
    package = sys.modules["execengine"].__file__ or "?"
    return f"execengine {__version__} (Python {platform.python_version()}, {package})"


def _add_global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The options every command takes. Below the top, their default is to leave the
    namespace alone (``SUPPRESS``), so a value given before the command stands."""
    default = None if top else argparse.SUPPRESS
    group = parser if top else parser.add_argument_group("global options")
    group.add_argument("--config", metavar="PATH", default=default,
                       help="config.yaml to use (default: $EXECENGINE_CONFIG, then "
                            "~/.execengine/config.yaml, then built-in defaults)")
    group.add_argument("-v", "--verbose", action="store_true",
                       default=False if top else argparse.SUPPRESS, help="log debug messages")


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [choice for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for choice in dict.fromkeys(action.choices.values())]


def _finish(parser: argparse.ArgumentParser) -> None:
    """Give every command below ``parser`` the global options and its own parser in the
    namespace (a nested command's default replaces its parent's)."""
    for sub in _subparsers(parser):
        _add_global_options(sub, top=False)
        sub.set_defaults(**{PARSER_DEST: sub})
        _finish(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="execengine",
        description="A sandboxed code-execution engine for programmatic tool calling.",
    )
    parser.add_argument("--version", action="version", version=version_text())
    _add_global_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in COMMANDS:
        import_module(modname).add_parser(sub)
    _finish(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the command they were given to, with its usage
        getattr(args, PARSER_DEST, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
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
