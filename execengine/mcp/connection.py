"""One MCP server's connection: start, handshake, calls, crash and restart, refresh.

A :class:`ServerConnection` lives on the manager's event loop. One task (the *runner*)
holds the transport and the SDK session open until told to stop; calls from every
execution share that session, many in flight at once. A stdio server's stderr goes to the
log line by line; its end (EOF) is how a crash is noticed even between calls. A crashed or
failed server is started again on the next call, after a backoff that doubles from
``mcp.restart_backoff`` up to :data:`MAX_BACKOFF` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from execengine.config import McpServerConfig
from execengine.errors import McpError
from execengine.mcp import lifeline
from execengine.mcp.expand import expand_server
from execengine.mcp.results import to_value
from execengine.terminal.guard import CommandGuard

log = logging.getLogger(__name__)

MAX_BACKOFF = 30.0
STATES = ("stopped", "starting", "ready", "crashed", "failed", "closed")


@dataclass(frozen=True)
class ServerStatus:
    """What ``execengine tools`` and ``doctor`` show for one server."""

    name: str
    transport: str
    state: str
    tools: int
    restarts: int
    error: str
    catalogue: str  # "live", "cached" or "none"


class ServerConnection:
    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        environ: Mapping[str, str],
        origins: Mapping[str, str],
        backoff: float,
        on_tools: Callable[[ServerConnection, list[Any]], None],
        guard: CommandGuard | None = None,
    ) -> None:
        self.name = name
        #: stops this server's processes should the host die (see :mod:`.lifeline`)
        self.guard = guard
        self.config = config
        self._environ = environ
        self._origins = origins
        self._base_backoff = backoff
        self._on_tools = on_tools
        self.state = "stopped"
        self.error = ""
        self.restarts = 0
        self.tools: list[Any] = []
        self.catalogue = "none"
        self._failures = 0
        self._next_start = 0.0
        self._session: Any = None
        self._gen = 0
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        self._output_schemas: set[str] = set()
        self._stderr_threads: list[threading.Thread] = []
        self._http_status = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.config.command else "http"

    def status(self) -> ServerStatus:
        return ServerStatus(self.name, self.transport, self.state, len(self.tools),
                            self.restarts, self.error, self.catalogue)

    def use_tools(self, tools: list[Any], *, catalogue: str) -> None:
        self.tools = list(tools)
        self.catalogue = catalogue
        self._output_schemas = {t.name for t in tools if getattr(t, "output_schema", None)}

    # -- start and stop ---------------------------------------------------------------------

    async def start(self) -> None:
        """Make sure a session is up (start or restart it); McpError when it cannot be."""
        async with self._start_lock:
            if self._session is not None and self.state == "ready":
                return
            if self.state == "closed":
                raise McpError(f"MCP server {self.name!r} is closed")
            wait = self._next_start - time.monotonic()
            if wait > 0:
                if wait > self.config.connect_timeout:
                    raise McpError(f"MCP server {self.name!r} is {self.state} ({self.error}); "
                                   f"next start attempt in {wait:.0f}s")
                await asyncio.sleep(wait)
            if self.state in ("crashed", "failed"):
                self.restarts += 1
            await self._start_once()

    async def _start_once(self) -> None:
        try:
            params = expand_server(self.name, self.config, self._environ, self._origins)
        except McpError as exc:
            self.state, self.error = "failed", str(exc)
            raise
        self.state = "starting"
        self._gen += 1
        gen = self._gen
        stop = asyncio.Event()
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        # a start abandoned on timeout still gets its outcome; nobody reads it then
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._stop = stop
        self._runner = asyncio.create_task(self._run(params, gen, stop, ready),
                                           name=f"mcp-{self.name}")
        try:
            tools = await asyncio.wait_for(asyncio.shield(ready), self.config.connect_timeout)
        except TimeoutError:
            await self._fail(gen, f"did not start and finish its handshake within "
                                  f"{self.config.connect_timeout:g}s (connect_timeout)")
            raise McpError(f"MCP server {self.name!r} {self.error}") from None
        except McpError as exc:
            reason = f"{exc} ({self._http_status})" if self._http_status else str(exc)
            await self._fail(gen, reason)
            raise McpError(f"MCP server {self.name!r} failed to start: {reason}") from None
        self._failures = 0
        self.state, self.error = "ready", ""
        changed = [t.model_dump() for t in tools] != [t.model_dump() for t in self.tools]
        self.use_tools(tools, catalogue="live")
        if changed:
            self._on_tools(self, tools)

    async def _fail(self, gen: int, reason: str) -> None:
        if gen != self._gen:
            return
        self.state, self.error = "failed", reason
        self._schedule_backoff()
        await self._stop_runner()

    def _schedule_backoff(self) -> None:
        delay = min(MAX_BACKOFF, self._base_backoff * (2 ** self._failures))
        self._failures += 1
        self._next_start = time.monotonic() + delay

    def mark_crashed(self, gen: int, reason: str) -> None:
        """The session of generation ``gen`` is gone; the next call restarts it."""
        if gen != self._gen or self.state != "ready":
            return
        log.warning("MCP server %s: %s", self.name, reason)
        self.state, self.error = "crashed", reason
        self._session = None
        self._schedule_backoff()
        if self._stop is not None:
            self._stop.set()

    async def _stop_runner(self) -> None:
        runner, self._runner = self._runner, None
        starting = self._session is None
        self._session = None
        if self._stop is not None:
            self._stop.set()
        if runner is None:
            return
        if starting:  # stuck in the handshake: it never looks at the stop event
            runner.cancel()
        # the SDK's stdio shutdown is bounded (stdin close, SIGTERM, SIGKILL, ~6 s at most)
        try:
            await asyncio.wait_for(asyncio.shield(runner), 10.0)
        except TimeoutError:
            runner.cancel()
            with contextlib.suppress(BaseException):
                await runner
        except BaseException:
            log.debug("MCP server %s: runner ended with an error", self.name, exc_info=True)

    async def close(self) -> None:
        self.state = "closed"
        await self._stop_runner()
        for thread in self._stderr_threads:
            await asyncio.to_thread(thread.join, 2.0)

    async def _run(self, params: Any, gen: int, stop: asyncio.Event,
                   ready: asyncio.Future[list[Any]]) -> None:
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open(stack, params, gen)
                session = await stack.enter_async_context(ClientSession(
                    read, write, message_handler=self._message_handler(gen)))
                await session.initialize()
                tools = await _list_all(session)
                self._session = session
                if not ready.done():
                    ready.set_result(tools)
                await stop.wait()
        except BaseException as exc:  # the runner reports; it never raises into the loop
            if not ready.done():
                ready.set_exception(McpError(_describe(exc)))
            elif not stop.is_set():
                self.mark_crashed(gen, f"connection lost: {_describe(exc)}")
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            if gen == self._gen:
                self._session = None
            if not stop.is_set() and gen == self._gen and self.state == "ready":
                self.mark_crashed(gen, "the connection ended")

    async def _open(self, stack: contextlib.AsyncExitStack, params: Any, gen: int) -> Any:
        if self.transport == "stdio":
            from mcp.client.stdio import get_default_environment, stdio_client

            # tied to this process: it dies with the host (see .lifeline)
            params = lifeline.tie(params, self.guard,
                                  get_default_environment() | (params.env or {}))
            errlog = self._stderr_pipe(gen)
            try:
                streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            finally:
                errlog.close()  # the server holds its own copy of the write end
            return streams
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async def note_status(response: Any) -> None:
            # the SDK reports a refused request generically; keep the status for the message
            if response.status_code >= 400:
                self._http_status = f"HTTP {response.status_code} from {response.url}"

        self._http_status = ""
        client = await stack.enter_async_context(httpx2.AsyncClient(
            headers=params["headers"], event_hooks={"response": [note_status]},
            timeout=httpx2.Timeout(self.config.connect_timeout, read=self.config.timeout)))
        return await stack.enter_async_context(
            streamable_http_client(params["url"], http_client=client))

    def _stderr_pipe(self, gen: int) -> Any:
        """A pipe for the server's stderr: each line goes to the log, EOF means it exited."""
        rfd, wfd = os.pipe()
        loop = asyncio.get_running_loop()
        name = self.name

        def pump() -> None:
            with os.fdopen(rfd, "rb") as f:
                for raw in f:
                    log.info("MCP server %s stderr: %s", name,
                             raw.decode("utf-8", "replace").rstrip())
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                loop.call_soon_threadsafe(self.mark_crashed, gen, "the server process exited")

        thread = threading.Thread(target=pump, name=f"mcp-{name}-stderr", daemon=True)
        thread.start()
        self._stderr_threads = [t for t in self._stderr_threads if t.is_alive()] + [thread]
        return os.fdopen(wfd, "w")

    def _message_handler(self, gen: int) -> Any:
        async def handle(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                asyncio.get_running_loop().create_task(self._refresh(gen))
            elif isinstance(message, Exception):
                log.debug("MCP server %s: transport error: %s", self.name, message)

        return handle

    async def _refresh(self, gen: int) -> None:
        session = self._session
        if session is None or gen != self._gen:
            return
        try:
            tools = await asyncio.wait_for(_list_all(session), self.config.timeout)
        except Exception as exc:
            log.warning("MCP server %s: refreshing the tool list failed: %s", self.name,
                        _describe(exc))
            return
        self.use_tools(tools, catalogue="live")
        self._on_tools(self, tools)

    # -- calls ------------------------------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """One tools/call; every outcome is a value (``{"error": ...}`` when it failed)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

        try:
            await self.start()
        except McpError as exc:
            return {"error": str(exc)}
        session, gen = self._session, self._gen
        if session is None:
            return {"error": f"MCP server {self.name!r} is {self.state}: {self.error}"}
        try:
            result = await session.call_tool(tool, args,
                                             read_timeout_seconds=self.config.timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return {"error": f"MCP server {self.name!r}: tool {tool!r} did not answer "
                                 f"within {self.config.timeout:g}s (timeout); the call was "
                                 "abandoned"}
            if exc.code == CONNECTION_CLOSED:
                self.mark_crashed(gen, f"the connection closed during a call to {tool!r}")
                return {"error": f"MCP server {self.name!r} exited or closed the connection "
                                 f"during the call to {tool!r}; it is restarted for the "
                                 "next call"}
            return {"error": f"MCP server {self.name!r}: {exc.message}"}
        except Exception as exc:
            return {"error": f"MCP server {self.name!r}: call to {tool!r} failed: "
                             f"{_describe(exc)}"}
        return to_value(result, has_output_schema=tool in self._output_schemas)


async def _list_all(session: Any) -> list[Any]:
    from mcp_types import PaginatedRequestParams

    tools: list[Any] = []
    cursor = None
    for _ in range(1000):  # a server that pages forever is cut off
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _describe(exc: BaseException) -> str:
    """A one-line reason, looking inside exception groups (anyio task groups)."""
    while getattr(exc, "exceptions", None):  # an exception group (3.11+, or anyio's)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or text}"
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, McpError) else text
