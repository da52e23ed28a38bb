"""The MCP client side: configured servers become registry tools.

An :class:`McpManager` belongs to one registry (``registry.services.mcp``, closed with the
registry). Its connections live on the process's one background reactor
(:mod:`execengine._asyncbridge`, shared with async tools); closing the manager closes its
connections and leaves the reactor running for the others. Each server has one
:class:`~execengine.mcp.connection.ServerConnection` shared by every execution and call.
Its tools are registered as ``mcp_<server>_<tool>`` in toolset ``mcp-<server>``, callable
from scripts, with the server's input schema and description. When a server announces
``tools/list_changed`` (or comes back with a different list after a restart) its tools are
registered again.

Start-up: an ``eager`` server starts when the manager starts. A ``lazy`` one registers the
catalogue it served last time (cached under ``mcp.cache_dir``) and starts on its first call;
without a cached catalogue it starts at once, like an eager one, to learn its tools.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from execengine._asyncbridge import AsyncBridge, bridge
from execengine.config import McpServerConfig
from execengine.errors import McpError, ToolError
from execengine.mcp import lifeline
from execengine.mcp.catalogue import withhold_in_search_mode
from execengine.mcp.connection import ServerConnection, ServerStatus
from execengine.mcp.names import tool_name, toolset_name
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

log = logging.getLogger(__name__)



def _policy(tool: Any) -> ToolPolicy:
    """Script-callable; read-only (and so batchable) when the server says so."""
    hints = getattr(tool, "annotations", None)
    read_only = bool(getattr(hints, "read_only_hint", False))
    return ToolPolicy(script_callable=True, read_only=read_only, parallel_safe=read_only)


class McpManager:
    """Connections to the configured MCP servers and their tools in ``registry``."""

    def __init__(self, registry: ToolRegistry,
                 servers: Mapping[str, McpServerConfig] | None = None, *,
                 environ: Mapping[str, str] | None = None,
                 cache_dir: str | Path | None = None,
                 reactor: AsyncBridge | None = None) -> None:
        self.registry = registry
        config = registry.config
        self.servers = dict(config.mcp_servers if servers is None else servers)
        self._environ = dict(os.environ if environ is None else environ)
        cache = cache_dir if cache_dir is not None else config.mcp.cache_dir
        self.cache_dir = Path(cache).expanduser() if cache else None
        self._lock = threading.Lock()
        self._registered: dict[str, dict[str, str]] = {}
        self._closed = False
        self.reactor = reactor if reactor is not None else bridge()
        #: stops the stdio servers' processes should this process die (see .lifeline)
        self.guard = lifeline.make_guard()
        self.connections: dict[str, ServerConnection] = {}
        for name, server in self.servers.items():
            if not server.enabled:
                continue
            self.connections[name] = self._run(self._make(name, server))

    async def _make(self, name: str, server: McpServerConfig) -> ServerConnection:
        return ServerConnection(name, server, environ=self._environ,
                                origins=self.registry.config.origins,
                                backoff=self.registry.config.mcp.restart_backoff,
                                on_tools=self._tools_changed, guard=self.guard)

    def _submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return self.reactor.submit(coro)

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self.reactor.run(coro, timeout)

    # -- start-up ---------------------------------------------------------------------------

    def start(self) -> dict[str, str]:
        """Register every enabled server's tools (see the module docstring for when each
        starts). Returns ``{server: error}`` for those that could not be used; they are
        also in ``registry.load_errors`` and the log, and the rest work regardless."""
        to_start = []
        for name, conn in self.connections.items():
            cached = self._read_cache(name, conn.config)
            if conn.config.startup == "lazy" and cached is not None:
                conn.use_tools(cached, catalogue="cached")
                self._register(conn, cached)
            else:
                to_start.append(conn)
        errors: dict[str, str] = {}
        if not to_start:
            return errors

        async def start_all() -> list[BaseException | None]:
            results = await asyncio.gather(*(c.start() for c in to_start),
                                           return_exceptions=True)
            return [r if isinstance(r, BaseException) else None for r in results]

        for conn, err in zip(to_start, self._run(start_all()), strict=True):
            if err is not None:
                errors[conn.name] = str(err)
                self.registry.load_errors[f"mcp server {conn.name}"] = str(err)
                log.warning("%s", err)
        return errors

    # -- registration -----------------------------------------------------------------------

    def _tools_changed(self, conn: ServerConnection, tools: list[Any]) -> None:
        """Called on the reactor thread when a server's live tool list differs."""
        self._register(conn, tools)
        self._write_cache(conn.name, conn.config, tools)

    def _register(self, conn: ServerConnection, tools: Iterable[Any]) -> None:
        server, flt = conn.name, conn.config.tools
        prefix = f"mcp server {server}: "
        for key in [k for k in self.registry.load_errors if k.startswith(prefix)]:
            self.registry.load_errors.pop(key, None)
        new: dict[str, str] = {}
        for tool in tools:
            if flt.include is not None and tool.name not in flt.include:
                continue
            if tool.name in flt.exclude:
                continue
            full = tool_name(server, tool.name)
            if full in new:
                self._report(server, tool.name, f"its name {full!r} collides with tool "
                             f"{new[full]!r} of the same server; skipped")
                continue
            description = (tool.description or tool.title or
                           f"Tool {tool.name} of MCP server {server}").strip()
            schema = {"description": description,
                      "parameters": tool.input_schema or {"type": "object", "properties": {}}}
            try:
                self.registry.register(
                    full, toolset_name(server), schema, self._handler(server, tool.name),
                    description=description, source=f"MCP server {server!r}",
                    schema_patch=withhold_in_search_mode, policy=_policy(tool))
            except ToolError as exc:
                self._report(server, tool.name, str(exc))
                continue
            new[full] = tool.name
        with self._lock:
            old = self._registered.get(server, {})
            self._registered[server] = new
        for gone in set(old) - set(new):
            self.registry.unregister(gone)

    def _report(self, server: str, tool: str, message: str) -> None:
        self.registry.load_errors[f"mcp server {server}: tool {tool}"] = message
        log.warning("MCP server %s: tool %r: %s", server, tool, message)

    def _handler(self, server: str, tool: str) -> Any:
        def handle(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
            return self.call(server, tool, args)

        return handle

    # -- calls ------------------------------------------------------------------------------

    def call(self, server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool`` on ``server`` from any thread; every outcome is a value."""
        conn = self.connections.get(server)
        if conn is None or self._closed:
            return {"error": f"MCP server {server!r} is not running (closed or not configured)"}
        if self.reactor.on_reactor():  # an async tool calling synchronously: no deadlock
            return {"error": f"MCP server {server!r}: tool {tool!r} was called "
                             "synchronously from the background reactor; call it from an "
                             "async tool with registry.adispatch"}
        future = self._submit(conn.call(tool, args))
        # the connection bounds the call itself; this only guards against a wedged loop
        limit = conn.config.timeout + conn.config.connect_timeout + 30.0
        try:
            value: dict[str, Any] = future.result(timeout=limit)
            return value
        except concurrent.futures.TimeoutError:
            future.cancel()
            return {"error": f"MCP server {server!r}: tool {tool!r} gave no result within "
                             f"{limit:g}s"}
        except concurrent.futures.CancelledError:
            return {"error": f"MCP server {server!r}: the call to {tool!r} was cancelled "
                             "(the registry is closing)"}

    def status(self) -> list[ServerStatus]:
        out = [conn.status() for conn in self.connections.values()]
        for name, server in self.servers.items():
            if not server.enabled:
                out.append(ServerStatus(name, "stdio" if server.command else "http",
                                        "disabled", 0, 0, "", "none"))
        return sorted(out, key=lambda s: s.name)

    def registered(self) -> dict[str, dict[str, str]]:
        """``{server: {registry name: the server's tool name}}``."""
        with self._lock:
            return {k: dict(v) for k, v in self._registered.items()}

    # -- catalogue cache --------------------------------------------------------------------

    def _cache_path(self, name: str, server: McpServerConfig) -> Path | None:
        if self.cache_dir is None:
            return None
        identity = json.dumps([name, server.command, list(server.args), server.url,
                               server.cwd, sorted(server.env)], sort_keys=True)
        digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
        return self.cache_dir / f"{name}-{digest}.json"

    def _read_cache(self, name: str, server: McpServerConfig) -> list[Any] | None:
        path = self._cache_path(name, server)
        if path is None or not path.is_file():
            return None
        try:
            from mcp_types import Tool

            data = json.loads(path.read_text(encoding="utf-8"))
            return [Tool.model_validate(t) for t in data["tools"]]
        except Exception as exc:
            log.warning("MCP server %s: ignoring the cached catalogue %s: %s", name, path, exc)
            return None

    def _write_cache(self, name: str, server: McpServerConfig, tools: list[Any]) -> None:
        path = self._cache_path(name, server)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            body = json.dumps({"tools": [t.model_dump(mode="json", by_alias=True,
                                                      exclude_none=True) for t in tools]})
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(body)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("MCP server %s: cannot cache its catalogue: %s", name, exc)

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every server (bounded); the shared reactor goes on. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True

        async def close_all() -> None:
            await asyncio.gather(*(c.close() for c in self.connections.values()),
                                 return_exceptions=True)

        try:
            self._run(close_all(), timeout=30)
        except Exception:
            log.exception("stopping MCP servers failed")
        finally:
            self.guard.close()  # and whatever the servers left running

    def __enter__(self) -> McpManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def attach(registry: ToolRegistry, *, environ: Mapping[str, str] | None = None,
           cache_dir: str | Path | None = None) -> McpManager | None:
    """Start the registry's configured MCP servers and register their tools (None when
    none is configured). The manager is closed with the registry."""
    if not registry.config.mcp_servers:
        return None
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise McpError("mcp_servers is configured but the MCP SDK is not installed: "
                       "pip install 'execengine[mcp]'") from exc
    services = registry.services
    if services.closed:
        raise ToolError("registry is closed")
    manager = services.mcp
    if manager is None:
        manager = services.mcp = McpManager(registry, environ=environ, cache_dir=cache_dir)
    manager.start()
    return manager
