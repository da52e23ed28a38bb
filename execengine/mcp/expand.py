"""``${VAR}`` references in a server's settings, taken from the host environment.

Expansion happens when the server starts, so ``execengine config show`` never prints a
secret; the values go to the server process (its environment, its HTTP headers) and never
into a script's environment. A variable that is not set is an error naming the option, the
config file and line, and the variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from execengine.config import McpServerConfig
from execengine.errors import McpError

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, key: str, environ: Mapping[str, str],
           origins: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            where = origins.get(key) or origins.get(key.rsplit(".", 1)[0], "config")
            raise McpError(f"{where}: {key}: ${{{name}}} is not set in the environment")
        return environ[name]

    return _REF.sub(replace, value)


def expand_server(name: str, config: McpServerConfig, environ: Mapping[str, str],
                  origins: Mapping[str, str]) -> Any:
    """The SDK's stdio parameters, or ``{"url", "headers"}`` for an HTTP server."""
    base = f"mcp_servers.{name}"

    def x(value: str, key: str) -> str:
        return expand(value, f"{base}.{key}", environ, origins)

    if config.url:
        return {"url": x(config.url, "url"),
                "headers": {k: x(v, f"headers.{k}") for k, v in config.headers.items()}}
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=x(config.command or "", "command"),
        args=[x(a, "args") for a in config.args],
        env={k: x(v, f"env.{k}") for k, v in config.env.items()},
        cwd=x(config.cwd, "cwd") if config.cwd else None,
    )
