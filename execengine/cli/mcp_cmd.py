"""``execengine mcp``: serve execute_code (and optionally the tools) to MCP clients."""

from __future__ import annotations

import argparse
import os
from typing import Any

from execengine.cli._common import config_from, registry_from, require_extra
from execengine.engine import Engine, SessionManager
from execengine.errors import McpError
from execengine.mcp.fairness import ClientLimits
from execengine.mcp.server import parse_address, serve_http, serve_stdio


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "mcp", help="serve execute_code to MCP clients (stdio or streamable HTTP)",
        description="Run execengine as an MCP server. Over stdio by default (for clients "
                    "that start it as a subprocess); --http HOST:PORT serves streamable "
                    "HTTP at /mcp instead (loopback by default). Every HTTP request must "
                    "carry a bearer token, loopback included: yours (--token-env), or one "
                    "made at start and written to a file only you can read (its path is "
                    "printed). See docs/mcp.md.")
    p.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP on this address (e.g. 127.0.0.1:8765)")
    p.add_argument("--token-env", metavar="VAR", action="append",
                   help="environment variable holding the bearer token HTTP clients must "
                        "send (required unless HOST is loopback; without it a token is "
                        "made and written to --token-file). Give it once per client: each "
                        "token is one client, with its own limits (named after VAR)")
    p.add_argument("--token-file", metavar="PATH",
                   help="where the token made at start is written, mode 0600 (default "
                        "~/.execengine/mcp/http-HOST-PORT.token); removed at exit")
    p.add_argument("--threads", type=int, metavar="N",
                   help="threads that run tool calls (default: code_execution.max_sessions "
                        "+ 4)")
    p.add_argument("--calls-per-client", type=int, metavar="N",
                   help="calls of one client running at once; more wait their turn "
                        "(default: --sessions-per-client)")
    p.add_argument("--sessions-per-client", type=int, metavar="N",
                   help="session kernels one client may hold (default: a quarter of "
                        "code_execution.max_sessions, at least 1)")
    p.add_argument("--tools", action="store_true",
                   help="also expose the registry's tools themselves (mcp.serve_tools)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    require_extra("mcp", ("mcp", "anyio"), what="execengine mcp", error=McpError)
    import anyio

    config = config_from(args)
    tokens: dict[str, str] = {}
    for var in args.token_env or ():
        value = os.environ.get(var)
        if not value:
            raise McpError(f"--token-env {var}: the variable is not set or empty")
        if value in tokens.values():
            raise McpError(f"--token-env {var}: the same token as another client's")
        tokens[var] = value
    for flag in ("threads", "calls_per_client", "sessions_per_client"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise McpError(f"--{flag.replace('_', '-')} must be at least 1")
    limits = ClientLimits.from_config(config, threads=args.threads,
                                      calls_per_client=args.calls_per_client,
                                      sessions_per_client=args.sessions_per_client)
    serve_tools = True if args.tools else None
    with registry_from(args, config) as registry, Engine(config, registry) as engine:
        def sessions() -> SessionManager:
            return engine.sessions

        if args.http:
            host, port = parse_address(args.http)
            anyio.run(lambda: serve_http(registry, host, port, token=tokens or None,
                                         serve_tools=serve_tools, token_file=args.token_file,
                                         limits=limits, sessions=sessions))
        else:
            anyio.run(lambda: serve_stdio(registry, serve_tools=serve_tools, limits=limits,
                                          sessions=sessions))
    return 0
