"""Starting the child of a plan: one path for a one-shot script and a session's kernel.

:func:`launch_child` makes, in order, what every child of an :class:`~.plan.ExecutionPlan`
needs: the stub's folder, the working directory (the plan's, or the staging folder in
strict mode), the one policy of the script and its tool calls (the host's), the RPC
channel, the allow-listed environment and the launch itself at the engine's level; then
only the child's uid may talk on the channel. :func:`script_context` is the context every
tool call of the script is dispatched with. What differs between the two runners is
passed in: the program (``argv``), the descriptors it inherits and its limits.

Where a child's files live: a :class:`Staging` directory per execution, a
:class:`Runtime` per engine. The layout (the contract with the child runtime in
``sandbox/``)::

    <staging>/script.py                    the user's code
    <runtime>/_execengine/                 a copy of sandbox/, compiled once
    <runtime>/stubs/<hash>/hermes_tools.py the rendered stub of one tool set, compiled once

``<staging>`` is private (0700) and is removed on close, whatever the outcome; the stub's
directory goes first on the child's ``PYTHONPATH``. Both names carry the owning host's pid
and start time, so an engine started after a host was killed removes what that host left
(:func:`execengine.hostdirs.sweep`). ``<runtime>`` is shared by every execution of one
engine (it holds no per-run data), read-only for children (0755 / 0644) and removed when
the engine closes; copying and compiling the runtime once saves every execution that work.
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import os
import py_compile
import secrets
import shutil
import tempfile
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from execengine._resources import sandbox_dir
from execengine._runtime import RUNTIME_PACKAGE, entry_program
from execengine.confine.policy import ExecutionPolicy
from execengine.context import CallContext
from execengine.engine.plan import ExecutionPlan
from execengine.errors import SandboxError
from execengine.host.confinement import CONFINING_LEVELS
from execengine.hostdirs import RUNTIME_PREFIX as RUNTIME_PREFIX  # (defined there: see it)
from execengine.hostdirs import STAGING_PREFIX as STAGING_PREFIX
from execengine.hostdirs import make_dir
from execengine.launch.base import Child, LaunchLimits, LaunchSpec
from execengine.rpc.channel import CallHandler, Channel

if TYPE_CHECKING:
    from execengine.engine.core import Engine


#: the child's ``python -c`` program (``-c`` rather than ``-m``: no runpy at start-up);
#: the same text as ``sandbox/bootstrap.py``'s ``ENTRY``
BOOTSTRAP_ENTRY = entry_program("bootstrap")
#: the project directory in project mode, which the runtime puts last on ``sys.path``
#: (``sandbox/bootstrap.py``'s ``ENV_PROJECT_DIR``)
PROJECT_DIR_VAR = "EXECENGINE_PROJECT_DIR"
#: what tracebacks call a script's code (``sandbox/bootstrap.py``'s ``ENV_SCRIPT_NAME``),
#: and the name of a model's code: never the staging copy's path
SCRIPT_NAME_VAR = "EXECENGINE_SCRIPT_NAME"


class Staging:
    """A context manager; :meth:`close` is idempotent."""

    def __init__(self, code: str, *, base: str | None = None) -> None:
        self.path = make_dir(STAGING_PREFIX, base)
        try:
            self._write("script.py", code)
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        self.closed = False

    @property
    def script_path(self) -> str:
        return os.path.join(self.path, "script.py")

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.path, name), "w", encoding="utf-8",
                  errors="surrogatepass") as f:
            f.write(text)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: stub directories kept per runtime (least recently used beyond this are removed)
MAX_STUBS = 64


class Runtime:
    """The child runtime, copied and byte-compiled once (lazily); idempotent :meth:`close`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None
        self._closed = False
        self._stubs: OrderedDict[str, str] = OrderedDict()
        self._stub_users: Counter[str] = Counter()

    @property
    def path(self) -> str:
        """The directory to put on ``PYTHONPATH`` (it contains ``_execengine/``)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the runtime directory is closed")
            if self._path is None:
                path = make_dir(RUNTIME_PREFIX)
                try:
                    target = os.path.join(path, RUNTIME_PACKAGE)
                    shutil.copytree(sandbox_dir(), target,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                    compileall.compile_dir(target, quiet=1)
                    _readable_by_all(path)
                except BaseException:
                    shutil.rmtree(path, ignore_errors=True)
                    raise
                self._path = path
            return self._path

    @contextlib.contextmanager
    def stub_dir(self, source: str) -> Iterator[str]:
        """The directory holding ``hermes_tools.py`` with this source, written and
        byte-compiled on first use; not removed while in use."""
        key = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        root = self.path
        with self._lock:
            path = self._stubs.get(key)
            if path is not None:
                self._stubs.move_to_end(key)
            self._stub_users[key] += 1
        try:
            if path is None:
                path = self._write_stub(root, key, source)
            yield path
        finally:
            with self._lock:
                self._stub_users[key] -= 1
                if not self._stub_users[key]:
                    del self._stub_users[key]
                stale = [k for k in list(self._stubs)[:max(0, len(self._stubs) - MAX_STUBS)]
                         if k not in self._stub_users]
                for k in stale:
                    shutil.rmtree(self._stubs.pop(k), ignore_errors=True)

    def _write_stub(self, root: str, key: str, source: str) -> str:
        stubs = os.path.join(root, "stubs")
        os.makedirs(stubs, mode=0o755, exist_ok=True)
        path = os.path.join(stubs, key)
        with self._lock:
            if key in self._stubs:  # another execution wrote it meanwhile
                return self._stubs[key]
            tmp = tempfile.mkdtemp(prefix=f".{key}-", dir=stubs)
            try:
                target = os.path.join(tmp, "hermes_tools.py")
                with open(target, "w", encoding="utf-8", errors="surrogatepass") as f:
                    f.write(source)
                py_compile.compile(target, doraise=True)
                _readable_by_all(tmp)
                os.rename(tmp, path)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            self._stubs[key] = path
            return path

    def close(self) -> None:
        with self._lock:
            path, self._path, self._closed = self._path, None, True
            self._stubs.clear()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def _readable_by_all(tree: str) -> None:
    """Folders 0755 and files 0644 under ``tree``: a child of any uid reads, none writes."""
    for folder, _dirs, files in os.walk(tree):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


@dataclass(frozen=True)
class Launched:
    """A started child and what it was started with."""

    child: Child
    channel: Channel
    policy: ExecutionPolicy
    #: where it runs
    workdir: str
    #: the secret of its RPC channel and the marker of its processes
    exec_id: str


def script_context(engine: Engine, plan: ExecutionPlan, policy: ExecutionPolicy,
                   workdir: str, ended: object) -> CallContext:
    """The context of the script's tool calls: its cwd (confined, relative paths start
    where the script runs; unconfined, the task's unless the caller named one), its policy,
    the event set when the run ends (a call still running is stopped then) and, in a
    sandbox, the launcher its terminal commands run through."""
    launcher = engine.launcher
    return plan.call.replace(
        task_id=plan.task_id, cwd=plan.cwd or (workdir if policy.confined else None),
        policy=policy, interrupt=ended,
        sandbox_launcher=launcher if launcher.level in CONFINING_LEVELS else None)


def limits_for(engine: Engine, timeout: float, policy: ExecutionPolicy, *,
               cpu_seconds: int | str | None = "default") -> LaunchLimits:
    """The configured limits of a child; the CPU-time limit is ``code_execution.cpu_seconds``
    or the timeout's (``cpu_seconds`` given: that, None for none)."""
    ce = engine.config.code_execution
    if cpu_seconds == "default":
        cpu: int | None = ce.cpu_seconds if ce.cpu_seconds is not None else int(timeout) + 1
    else:
        cpu = cpu_seconds  # type: ignore[assignment]
    return LaunchLimits(memory_mb=ce.memory_mb, cpu_seconds=cpu,
                        max_processes=ce.max_processes, max_file_mb=ce.max_file_mb,
                        tmp_mb=ce.tmp_mb, network=policy.network == "on",
                        proxy_port=policy.proxy_port, proxy_socket=policy.proxy_socket,
                        workdir_as_owner=ce.workdir_as_owner)


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
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(parts)), PROJECT_DIR_VAR: workdir}


def launch_child(
    engine: Engine,
    plan: ExecutionPlan,
    stack: contextlib.ExitStack,
    staging: Staging,
    *,
    argv: list[str],
    handler: Callable[[ExecutionPolicy, str], CallHandler] | None,
    max_tool_calls: int,
    pass_fds: tuple[int, ...] = (),
    extra_env: Mapping[str, str] | None = None,
    cpu_seconds: int | str | None = "default",
    prestart: bool = False,
) -> Launched:
    """Start ``argv`` for ``plan``; what it holds is closed with ``stack``. ``handler``
    makes the channel's call handler from the policy and working directory (None: the
    channel starts with no authority, as a kernel's does until a cell opens it)."""
    exec_id, token, run_token = (secrets.token_hex(8), secrets.token_hex(32),
                                 secrets.token_hex(16))
    stub_dir = stack.enter_context(engine.runtime.stub_dir(plan.stub))
    # resolved once: the policy checks this very path, and the launcher binds it as named
    # (a link swapped in since fails the launch, see LaunchSpec.resolved)
    try:
        workdir = os.path.realpath(plan.workdir or staging.path)
    except OSError as exc:  # a link swapped in and out meanwhile (realpath's readlink)
        raise SandboxError(f"cannot resolve the working directory {plan.workdir!r}: "
                           f"{exc.strerror or exc} (it is changing)") from exc
    # one policy for the script and every tool call it makes (see execengine.confine)
    try:
        policy = engine.host.execution_policy(cwd=workdir, level=engine.launcher.level,
                                              extra_writable=(staging.path,), stack=stack)
    except OSError as exc:  # a folder resolved while another execution swaps it
        raise SandboxError(f"cannot check the working directory {workdir!r}: "
                           f"{exc.strerror or exc}") from exc
    channel = stack.enter_context(engine.server.open(
        exec_id=exec_id, token=token, allowed=plan.tools,
        handler=_OnFirstCall(lambda: handler(policy, workdir)) if handler is not None
        else _refuse,
        max_tool_calls=max_tool_calls if handler is not None else 0, check_peer=True))
    if handler is None:
        channel.close_cell()  # no authority until a cell opens it
    runtime = engine.runtime.path
    # the host's allow-listed variables (the plan's), then the execution's own
    env = {
        **plan.env,
        **path_env(plan.mode, stub_dir, runtime, workdir),
        "EXECENGINE_RPC_ENDPOINT": channel.socket_path,
        "EXECENGINE_RPC_TOKEN": token,
        "EXECENGINE_EXEC_ID": exec_id,
        "EXECENGINE_RUN_TOKEN": run_token,
        # the reference system's names, for scripts and helpers reading them
        "HERMES_RPC_SOCKET": channel.socket_path,
        "HERMES_RPC_TOKEN": token,
        **(extra_env or {}),
        **policy.proxy_env(),
    }
    writable = [workdir, os.path.realpath(staging.path)]
    writable += [os.path.realpath(p) for p in map(os.path.expanduser,
                                                  engine.config.policy.writable_roots)
                 if os.path.isdir(p)]
    spec = LaunchSpec(
        argv=argv, env=env, cwd=workdir, run_token=run_token,
        writable_paths=tuple(dict.fromkeys(writable)),
        readable_paths=(staging.path, runtime),
        socket_dir=channel.socket_dir, pass_fds=pass_fds,
        protected_paths=policy.protected, hidden_paths=policy.denied_paths,
        limits=limits_for(engine, plan.timeout, policy, cpu_seconds=cpu_seconds),
        prestart=prestart, resolved=True,
    )
    child = engine.launcher.launch(spec)
    try:
        # only the child's uid may talk on its socket (SO_PEERCRED, checked first)
        slot_uid = getattr(child, "uid", None)
        channel.expect_peer([slot_uid if slot_uid is not None else os.geteuid()])
    except BaseException:
        child.close()
        raise
    return Launched(child, channel, policy, workdir, exec_id)


class _OnFirstCall:
    """A call handler made when the first call arrives: most scripts call no tool."""

    def __init__(self, make: Callable[[], CallHandler]) -> None:
        self._make = make
        self._handler: CallHandler | None = None

    def __call__(self, tool: str, args: dict[str, Any]) -> str:
        handler = self._handler
        if handler is None:  # two first calls at once make two alike: no harm
            handler = self._handler = self._make()
        return handler(tool, args)


def _refuse(tool: str, args: dict[str, object]) -> str:
    return '{"error": "no cell is running"}'
