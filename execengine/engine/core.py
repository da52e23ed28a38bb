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
import secrets
import socket
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from execengine.childenv import build_child_env
from execengine.config import MODES, Config, Mode, checked_timeout
from execengine.confine.policy import ExecutionPolicy
from execengine.context import CallContext
from execengine.engine import spill
from execengine.engine.allowed import (
    allowed_tools,
    function_schemas,
    script_call_handler,
    tool_groups,
)
from execengine.engine.capture import OutputCapture
from execengine.engine.confinement import execution_policy
from execengine.engine.exiting import close_at_exit
from execengine.engine.interpreter import choose
from execengine.engine.result import (
    INTERRUPTED,
    TIMEOUT_MARK,
    ExecutionResult,
    exit_message,
    hint_for,
    no_code_result,
    no_hello_message,
    no_runtime_message,
    oom_message,
    timeout_message,
    with_stderr,
)
from execengine.engine.sessions import SessionManager
from execengine.engine.staging import (
    BOOTSTRAP_ENTRY,
    PROJECT_DIR_VAR,
    RUNTIME_PREFIX,
    STAGING_PREFIX,
    Runtime,
    Staging,
)
from execengine.engine.stub import render_stub
from execengine.engine.supervise import supervise
from execengine.errors import ConfigError, SandboxError, ToolError
from execengine.hostdirs import sweep
from execengine.launch.base import Launcher, LaunchLimits, LaunchSpec
from execengine.launch.factory import make_launcher
from execengine.registry import ToolRegistry
from execengine.remote.host import REMOTE, RemoteHost
from execengine.rpc import RpcServer
from execengine.rpc.channel import SOCKET_DIR_PREFIX, socket_roots
from execengine.rpc.memory import MemoryServer
from execengine.workdirs import WORKDIRS, TaskDirs

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
    """Runs scripts. A context manager; :meth:`close` is idempotent."""

    def __init__(self, config: Config | None = None, registry: ToolRegistry | None = None,
                 launcher: Launcher | None = None, *,
                 server: RpcServer | MemoryServer | None = None) -> None:
        """``launcher`` and ``server`` are seams: by default the level the config picks and
        the socket RPC server; tests pass :class:`~execengine.launch.inprocess.
        InProcessLauncher` and :class:`~execengine.rpc.memory.MemoryServer`. The engine
        closes what it is given."""
        self.config = config or (registry.config if registry is not None else Config())
        self._own_registry = registry is None
        self.registry = registry if registry is not None else ToolRegistry.with_builtins(
            self.config)
        # the registry's execute_code tool runs on the first engine built on it (one per
        # registry); later engines on the same registry run only what they are given
        with contextlib.suppress(ToolError):
            self.registry.attach_engine(self)
        if launcher is None:
            # The level comes from code_execution.isolation (auto: the highest this host
            # supports; min_isolation turns a downgrade into IsolationError).

            if self.config.terminal.backend == "ssh":  # the registry's one connection
                launcher = self.registry.service(REMOTE, RemoteHost).launcher
            else:
                launcher = make_launcher(self.config)
        self.launcher = launcher
        clean_leftovers(self.config)
        self.runtime = Runtime()
        self._server: RpcServer | MemoryServer | None = server
        self._sessions: SessionManager | None = None
        self._lock = threading.Lock()
        self._closed = False
        close_at_exit(self)  # a program that forgets close() leaves nothing behind

    # -- lifecycle ------------------------------------------------------------------------

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
        self.registry.detach_engine(self)
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
        return self._allowed(self.registry.available_tools(enabled_toolsets), tools)

    def _allowed(self, available: list[str], tools: Iterable[str] | None) -> list[str]:
        """:meth:`allowed_tools`, given the available tools of the toolsets."""
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
        mode: Mode | None = None,
        context: CallContext | None = None,
        session: str | None = None,
        reset: bool = False,
    ) -> ExecutionResult:
        """Run ``code`` and return its :class:`ExecutionResult` (never raises for what the
        script does; :class:`SandboxError` when the engine itself cannot run it).

        The script's tool calls are dispatched with ``context`` (the host's approver, a
        session id...), its ``task_id`` and ``cwd`` set from the arguments here and its
        origin ``execute_code``. With ``session``, ``code`` runs as a cell of that
        session's persistent kernel (``reset=True`` starts it fresh); see
        :mod:`execengine.engine.sessions`.
        """
        if session is not None:
            return self.sessions.run(
                session, code, reset=reset, task_id=task_id, cwd=cwd,
                enabled_toolsets=enabled_toolsets, tools=tools, interrupt=interrupt,
                timeout=timeout, mode=mode, context=context)
        started = time.monotonic()
        if not code or not code.strip():
            return no_code_result()
        ce = self.config.code_execution
        mode = mode or ce.mode
        if mode not in MODES:
            raise ConfigError(f"unknown mode {mode!r}; expected one of "
                              f"{', '.join(map(repr, MODES))}", key="code_execution.mode")
        limit = ce.timeout if timeout is None else checked_timeout(timeout)
        # the availability checks run once: for the names and for their schemas
        available = self.registry.available_tools(enabled_toolsets)
        names = self._allowed(available, tools)
        stub = render_stub(function_schemas(self.registry, names, enabled_toolsets,
                                            available=available),
                           groups=tool_groups(self.registry, names))
        call = context or CallContext()
        if interrupt is None:
            interrupt = call.interrupt  # the context's: "execute_code stops its script"
        task_id = task_id if task_id is not None else call.task_id
        cwd = cwd or call.cwd
        exec_id, token, run_token = (secrets.token_hex(8), secrets.token_hex(32),
                                     secrets.token_hex(16))
        stdout = OutputCapture(ce.max_stdout_bytes, spill=True, spill_dir=spill.spill_dir())
        stderr = OutputCapture(ce.max_stderr_bytes, name="stderr")
        with contextlib.ExitStack() as stack:
            # set when the execution ends, however: a tool call still running for it (a
            # terminal command a script left behind) is stopped, not left to its own timeout
            ended = threading.Event()
            stack.callback(ended.set)
            staging = stack.enter_context(Staging(code))
            stub_dir = stack.enter_context(self.runtime.stub_dir(stub))
            workdir = self.workdir_for(mode, cwd, task_id, staging.path)
            # one policy for the script and every tool call it makes (see execengine.confine)
            policy = execution_policy(self.config, cwd=workdir, level=self.launcher.level,
                                      extra_writable=(staging.path,), stack=stack)
            # the script's tool calls: its cwd, its policy, and (in a sandbox) the launcher
            # its terminal commands run through
            # (confined, relative paths start where the script runs; unconfined, as before:
            # the task's working directory)
            call = call.replace(
                task_id=task_id,
                cwd=os.path.abspath(cwd) if cwd else (workdir if policy.confined else None),
                policy=policy, interrupt=ended,
                sandbox_launcher=(self.launcher if self.launcher.level not in ("none", "ssh")
                                  else None))
            handler = script_call_handler(self.registry, call)
            channel = stack.enter_context(self.server.open(
                exec_id=exec_id, token=token, allowed=names, handler=handler,
                max_tool_calls=ce.max_tool_calls, check_peer=True))
            runtime = self.runtime.path
            interpreter = choose(mode, configured=ce.python)
            # the watchdog socket: the child says ready on it, and EOF on it tells the child
            # the host is gone (a socket pair, so one descriptor serves both directions)
            watch_host, watch_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            stack.callback(watch_host.close)  # EOF for the child's watchdog, at the latest
            watch_r = watch_child.detach()
            try:
                env = build_child_env(
                    os.environ, passthrough=self.registry.env_passthrough, tz=ce.tz,
                    extra={
                        **self.path_env(mode, stub_dir, runtime, workdir),
                        "EXECENGINE_RPC_ENDPOINT": channel.socket_path,
                        "EXECENGINE_RPC_TOKEN": token,
                        "EXECENGINE_EXEC_ID": exec_id,
                        "EXECENGINE_WATCHDOG_FD": str(watch_r),
                        "EXECENGINE_RUN_TOKEN": run_token,
                        # the reference system's names, for scripts and helpers reading them
                        "HERMES_RPC_SOCKET": channel.socket_path,
                        "HERMES_RPC_TOKEN": token,
                        **policy.proxy_env(),
                    })
                spec = LaunchSpec(
                    argv=[interpreter, "-c", BOOTSTRAP_ENTRY, staging.script_path],
                    env=env, cwd=workdir, run_token=run_token,
                    writable_paths=tuple(dict.fromkeys((
                        workdir, staging.path,
                        *(os.path.expanduser(p) for p in self.config.policy.writable_roots
                          if os.path.isdir(os.path.expanduser(p)))))),
                    readable_paths=(staging.path, runtime),
                    socket_dir=channel.socket_dir, pass_fds=(watch_r,),
                    protected_paths=policy.protected, hidden_paths=policy.denied_paths,
                    limits=self.launch_limits(limit, policy),
                    prestart=True,
                )
                child = self.launcher.launch(spec)
            finally:
                os.close(watch_r)
            # only the child's uid may talk on its socket (SO_PEERCRED, checked first)
            slot_uid = getattr(child, "uid", None)
            try:
                channel.expect_peer([slot_uid if slot_uid is not None else os.geteuid()])
            except BaseException:
                child.close()
                raise
            outcome = supervise(child, stdout=stdout, stderr=stderr, timeout=limit,
                                kill_grace=ce.kill_grace, interrupt=interrupt,
                                ready=watch_host, hello_timeout=ce.hello_timeout)
            calls = channel.tool_calls_made
        out, err = stdout.result(), stderr.result()
        text, error, status = out.text, None, "success"
        code_ = outcome.exit_code
        if outcome.reason == "timeout":
            status, error = "timeout", timeout_message(limit)
            text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + TIMEOUT_MARK + error
        elif outcome.reason == "interrupted":
            status, error = "interrupted", INTERRUPTED
            text = (text.rstrip("\n") + "\n" if text.strip() else "") + INTERRUPTED
        elif outcome.reason == "no_hello":
            status, error = "error", no_hello_message(ce.hello_timeout)
        elif not outcome.said_ready:
            # the interpreter ended without running our runtime: whatever ran, it was not
            # the script as the engine runs it (a failed start, a planted module)
            status = "error"
            error = no_runtime_message(code_, err.text)
            text = with_stderr(text, err.text)
        elif outcome.oom_kills and code_ != 0:
            status, error = "error", oom_message(ce.memory_mb)
            text = with_stderr(text, err.text)
        elif code_ != 0:
            status = "error"
            error = err.text.strip() or exit_message(code_ if code_ is not None else -1)
            text = with_stderr(text, err.text)
        result = ExecutionResult(
            status=status,  # type: ignore[arg-type]
            output=text, stderr=err.text, exit_code=code_, tool_calls_made=calls,
            duration_seconds=time.monotonic() - started, error=error,
            stdout_truncated=out.truncated, stdout_bytes_total=out.total_bytes,
            stdout_bytes_omitted=out.omitted_bytes, stderr_truncated=err.truncated,
            stderr_bytes_total=err.total_bytes, full_output_path=out.spill_path,
            full_output_complete=out.spill_path is None or out.spill_complete,
            full_output_bytes=out.spill_bytes, ended_by=outcome.ended_by,
            oom_kills=outcome.oom_kills,
        )
        hint = hint_for(result, names)
        if outcome.oom_kills and status != "error":
            # the script went on (a subprocess was the victim) or timed out: say so anyway
            hint = oom_message(ce.memory_mb, "A process of the script")
        if hint:
            result = replace(result, hint=hint)
        return result

    @staticmethod
    def path_env(mode: str, stub_dir: str, runtime: str, workdir: str) -> dict[str, str]:
        """The child's ``PYTHONPATH``: the stub's directory and the runtime first; in
        project mode the host's PYTHONPATH follows, and the project directory is named
        apart (``EXECENGINE_PROJECT_DIR``): the runtime puts it last on ``sys.path``, so
        scripts import the project's packages, but a module left there (a
        ``sitecustomize.py``, a ``json.py``) cannot run at the next start or stand in for
        the standard library, a package or the runtime."""
        parts = [stub_dir, runtime]
        if mode != "project":
            return {"PYTHONPATH": os.pathsep.join(parts)}
        parts.extend(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                     if p and os.path.abspath(p) != os.path.abspath(workdir))
        return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(parts)),
                PROJECT_DIR_VAR: workdir}

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

    def workdir_for(self, mode: str, cwd: str | None, task_id: str | None, staging: str) -> str:
        """Where a script of ``mode`` runs (sessions' kernels run there too)."""
        if mode == "strict":
            return staging
        if cwd:
            return os.path.abspath(cwd)
        try:
            return self.registry.service(WORKDIRS, TaskDirs).get(task_id or "default")
        except Exception:  # a closed registry: fall back to the process's cwd
            return os.getcwd()

    def launch_limits(self, timeout: float, policy: ExecutionPolicy | None = None) -> LaunchLimits:
        """The configured limits of a child (one-shot or a session's kernel)."""
        ce = self.config.code_execution
        cpu = ce.cpu_seconds if ce.cpu_seconds is not None else int(timeout) + 1
        network = policy.network == "on" if policy is not None else ce.network
        return LaunchLimits(memory_mb=ce.memory_mb, cpu_seconds=cpu,
                            max_processes=ce.max_processes, max_file_mb=ce.max_file_mb,
                            tmp_mb=ce.tmp_mb, network=network,
                            proxy_port=policy.proxy_port if policy is not None else None,
                            proxy_socket=policy.proxy_socket if policy is not None else None,
                            workdir_as_owner=ce.workdir_as_owner)


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


