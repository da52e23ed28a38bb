"""The engine: run one script in a child process, serve its tool calls, return a result.

An :class:`Engine` holds the configuration, the tool registry, the RPC server (one loop
thread for all executions) and the launcher. :meth:`Engine.execute` is safe to call from
many threads at once; :meth:`Engine.aexecute` is its asyncio form. Cancelling the task, or
setting the ``interrupt`` event, stops the script with the same escalation as a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Iterable
from typing import Any

from execengine.config import Config
from execengine.context import CallContext
from execengine.engine import spill, tool
from execengine.engine.exiting import close_at_exit
from execengine.engine.oneshot import run_once
from execengine.engine.plan import ExecutionPlan, Templates, allowed_tools, make_plan
from execengine.engine.prepare import RUNTIME_PREFIX, STAGING_PREFIX, Runtime
from execengine.engine.result import ExecutionResult, no_code_result
from execengine.engine.sessions import SessionManager
from execengine.errors import SandboxError, ToolError
from execengine.host.base import Host
from execengine.hostdirs import sweep
from execengine.launch.base import Launcher
from execengine.mcp import attach
from execengine.registry import ToolRegistry
from execengine.rpc import RpcServer
from execengine.rpc.channel import SOCKET_DIR_PREFIX, socket_roots
from execengine.rpc.memory import MemoryServer
from execengine.workdirs import TaskDirs

log = logging.getLogger(__name__)


def clean_leftovers(config: Config) -> None:
    """Remove what killed hosts left behind (their staging, socket and runtime directories)
    and prune old or excess spill files. Never raises; called when an engine starts."""
    ce = config.code_execution
    try:
        sweep((STAGING_PREFIX, RUNTIME_PREFIX, SOCKET_DIR_PREFIX),
              (tempfile.gettempdir(), *socket_roots()))
        spill.prune(spill.spill_dir(), max_age_seconds=ce.spill_max_age_hours * 3600,
                    max_bytes=ce.spill_max_mb * 1024 * 1024)
    except Exception:  # housekeeping must never stop an engine from starting
        log.warning("cleaning up after earlier hosts failed", exc_info=True)


class Engine:
    """Runs scripts. A context manager; :meth:`close` is idempotent.

    The engine runs on its registry's host (``registry.services.host``: this machine at the
    configured isolation level, or a remote): an execution is planned once
    (:func:`~execengine.engine.plan.make_plan`), then run by a one-shot child
    (:func:`~execengine.engine.oneshot.run_once`) or a session's kernel
    (:class:`~execengine.engine.sessions.SessionManager`), and its result is worded by the
    one :func:`~execengine.engine.result.build_result`.
    """

    def __init__(self, config: Config | None = None, registry: ToolRegistry | None = None,
                 launcher: Launcher | None = None, *,
                 server: RpcServer | MemoryServer | None = None) -> None:
        """``launcher`` and ``server`` are seams: by default the host's launcher and the
        socket RPC server; tests pass :class:`~execengine.launch.inprocess.
        InProcessLauncher` and :class:`~execengine.rpc.memory.MemoryServer`. The engine
        closes what it is given."""
        self.config = config or (registry.config if registry is not None else Config())
        self._own_registry = registry is None
        self._host: Host | None = None
        self.registry = registry if registry is not None else configured_registry(self.config)
        # the registry's execute_code tool runs on the first engine built on it (one per
        # registry); later engines on the same registry run only what they are given
        with contextlib.suppress(ToolError):
            tool.attach(self.registry, self)
        # the level comes from code_execution.isolation (auto: the highest this host
        # supports; min_isolation turns a downgrade into IsolationError)
        self.launcher = launcher if launcher is not None else self.host.new_launcher()
        clean_leftovers(self.config)
        self.runtime = Runtime()
        #: what plans take from the registry, reused for a second (see engine.plan)
        self.templates = Templates()
        #: where truncated outputs are kept whole
        self.spill_dir = spill.spill_dir()
        self._workdirs: TaskDirs | None = None
        self._server: RpcServer | MemoryServer | None = server
        self._sessions: SessionManager | None = None
        self._lock = threading.Lock()
        self._closed = False
        close_at_exit(self)  # a program that forgets close() leaves nothing behind

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def host(self) -> Host:
        """Where this engine's executions run (its registry's host)."""
        host = self._host
        if host is None:
            host = self._host = self.registry.services.host
        return host

    @property
    def server(self) -> RpcServer | MemoryServer:
        with self._lock:
            if self._closed:
                raise SandboxError("the engine is closed")
            if self._server is None:
                ce = self.config.code_execution
                self._server = RpcServer(max_workers=ce.max_tool_threads,
                                         max_parallel_calls=ce.max_parallel_tool_calls,
                                         max_message_bytes=ce.max_message_bytes,
                                         max_inflight_bytes=ce.max_inflight_bytes,
                                         spin=ce.rpc_spin)
            return self._server

    @property
    def sessions(self) -> SessionManager:
        """The persistent sessions (``execute(..., session=name)``): list and close them."""
        with self._lock:
            if self._closed:
                raise SandboxError("the engine is closed")
            if self._sessions is None:
                self._sessions = SessionManager(self)
            return self._sessions

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            server, self._server = self._server, None
            sessions, self._sessions = self._sessions, None
        tool.detach(self.registry, self)
        if sessions is not None:
            sessions.close()
        if server is not None:
            server.close()
        self.launcher.close()
        self.runtime.close()
        if self._own_registry:
            self.registry.close()

    def __enter__(self) -> Engine:
        return self

    def __del__(self) -> None:
        # a finalizer only warns: closing (server thread, spawner, runtime dir) is close()'s
        if not getattr(self, "_closed", True):

            warnings.warn("Engine was not closed (use `with Engine(...)` or close())",
                          ResourceWarning, stacklevel=1)

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a script may call ---------------------------------------------------------

    def allowed_tools(self, enabled_toolsets: Iterable[str] | None = None,
                      tools: Iterable[str] | None = None) -> list[str]:
        """Tools a script may call: ``tools`` (the session's enabled tool names) or the
        tools of ``enabled_toolsets`` (default: the config's), available, intersected with
        the sandbox allow-list. Never widened when empty."""
        available = self.registry.available_tools(enabled_toolsets)
        if tools is not None:
            up = set(available)
            available = [t for t in tools if t in up]
        return allowed_tools(self.registry, available=available)

    # -- running ------------------------------------------------------------------------

    def execute(
        self,
        code: str,
        *,
        task_id: str | None = None,
        cwd: str | None = None,
        enabled_toolsets: Iterable[str] | None = None,
        tools: Iterable[str] | None = None,
        interrupt: threading.Event | None = None,
        timeout: float | None = None,
        mode: str | None = None,
        context: CallContext | None = None,
        session: str | None = None,
        reset: bool = False,
        filename: str | None = None,
    ) -> ExecutionResult:
        """Run ``code`` and return its :class:`ExecutionResult` (never raises for what the
        script does; :class:`SandboxError` when the engine itself cannot run it, and
        :class:`~execengine.errors.InvalidArgumentError`, ``ConfigError`` or
        ``UnknownToolError`` for arguments that are wrong).

        The script's tool calls are dispatched with ``context`` (the host's approver, a
        session id...), its ``task_id`` and ``cwd`` set from the arguments here and its
        origin ``execute_code``. With ``session``, ``code`` runs as a cell of that
        session's persistent kernel (``reset=True`` starts it fresh); see
        :mod:`execengine.engine.sessions`. ``filename`` is what tracebacks call the code
        (the CLI's script path; default ``<execute_code>``; a session's cells are
        ``<cell N>``).
        """
        if isinstance(code, str) and not code.strip() and not (session and reset):
            return no_code_result()
        plan = make_plan(self, code, task_id=task_id, cwd=cwd,
                         enabled_toolsets=enabled_toolsets, tools=tools, interrupt=interrupt,
                         timeout=timeout, mode=mode, context=context, session=session,
                         reset=reset, filename=filename)
        return self.run(plan)

    def run(self, plan: ExecutionPlan) -> ExecutionResult:
        """Run a plan made by :func:`~execengine.engine.plan.make_plan` (what
        :meth:`execute` does once it has one)."""
        if plan.session is not None:
            return self.sessions.run(plan)
        if not plan.has_code:
            return no_code_result()
        return run_once(self, plan)

    async def aexecute(self, code: str, *, interrupt: threading.Event | None = None,
                       **kwargs: Any) -> ExecutionResult:
        """Asyncio form of :meth:`execute`. Cancelling the awaiting task interrupts the
        script and waits (bounded by the kill escalation) for its teardown."""
        event = interrupt or threading.Event()
        task = asyncio.ensure_future(asyncio.to_thread(self.execute, code, interrupt=event,
                                                       **kwargs))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            event.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task),
                                       self.config.code_execution.kill_grace + 10)
            raise

    # -- helpers ------------------------------------------------------------------------

    def task_dir(self, task_id: str | None) -> str:
        """The working directory of ``task_id`` (where its project-mode scripts run)."""
        workdirs = self._workdirs
        if workdirs is None:
            try:
                workdirs = self._workdirs = self.registry.services.workdirs
            except ToolError:  # a closed registry: fall back to the process's cwd
                return os.getcwd()
        return workdirs.get(task_id or "default")


def configured_registry(config: Config) -> ToolRegistry:
    """The registry ``config`` describes: the built-in tools, plugins and the configured MCP
    servers' tools (the servers start now and stop when it closes). What an engine built
    without a registry, ``execengine`` commands and batch workers run with."""
    registry = ToolRegistry.with_builtins(config)
    if config.mcp_servers:
        try:
            attach(registry)
        except BaseException:
            registry.close()
            raise
    return registry


def execute_code(code: str, *, config: Config | None = None,
                 registry: ToolRegistry | None = None, **kwargs: Any) -> ExecutionResult:
    """Run ``code`` once with a short-lived :class:`Engine` (see :meth:`Engine.execute`)."""
    with Engine(config=config, registry=registry) as engine:
        return engine.execute(code, **kwargs)


async def aexecute_code(code: str, *, config: Config | None = None,
                        registry: ToolRegistry | None = None, **kwargs: Any) -> ExecutionResult:
    """Asyncio form of :func:`execute_code`."""
    engine = Engine(config=config, registry=registry)
    try:
        return await engine.aexecute(code, **kwargs)
    finally:
        await asyncio.to_thread(engine.close)
