"""Level ``none``: process hygiene without OS isolation.

The child runs as the host's user in a new session (its own process group), stdin from
``/dev/null``, the environment exactly as given (built from an allow-list by the engine),
every file descriptor closed except ``pass_fds``, and no ``preexec_fn`` (safe with threads).

Killing must also reach processes that left the group: they still carry
``EXECENGINE_RUN_TOKEN`` in ``/proc/<pid>/environ``, and while the child lives its
descendants are found through its process tree. The child is not a subreaper here (that
would cost it importing ``ctypes``), so a ``setsid`` and double-forked descendant leaves
the tree, and one that also clears its environment escapes: level ``none`` is hygiene,
not a boundary. :meth:`LocalChild.kill` is :meth:`execengine.proctree.ProcessSet.kill`
over that set: freeze everything with SIGSTOP until no new member appears, SIGKILL it,
confirm it is gone, all within a bounded time.

A script's interpreter is started ahead (``code_execution.warm_entries``; see
``sandbox/zygote.py``): started the way the last script's was, under the environment every
execution shares, it waits for the plan (descriptors, working directory, the per-execution
variables, the code) and runs it as ``python -c`` would have, or ``exec``s the plan's
program where a start now would have gone differently. Its run token is chosen when it
starts, so that what it forks without an ``exec`` (and so with its start's environment)
carries one too.
"""

from __future__ import annotations

import contextlib
import functools
import marshal
import os
import re
import secrets
import select
import signal
import socket
import subprocess
from collections.abc import Callable
from typing import IO, Any

from execengine._resources import sandbox_dir
from execengine._runtime import ZYGOTE_LOADER, runtime_module, zygote_program
from execengine.config import Config
from execengine.errors import SandboxError
from execengine.isolation import cgroups, leftovers
from execengine.isolation.detect import IsolationReport
from execengine.isolation.owner import host_umask
from execengine.isolation.uids import SANDBOX_GID
from execengine.launch.base import Background, Launcher, LaunchSpec, PopenChild, WarmEntry, WarmPool
from execengine.proctree import RUN_TOKEN_VAR, Mark, ProcessSet

#: how long kill() waits for the main process to be reaped after SIGKILL
REAP_SECONDS = 2.0
#: the plan's message to a pre-started interpreter (it reads up to 1 MiB)
PLAN_BUFFER = 1 << 20
#: how long a launch waits for a pre-started interpreter to take its plan (the rest of
#: its start, when it is still starting) before it starts one of its own instead
START_SECONDS = 5.0


class LocalChild(PopenChild):
    def __init__(self, proc: subprocess.Popen[bytes], run_token: str,
                 before: Mark | None = None,
                 pipes: tuple[IO[bytes], IO[bytes]] | None = None) -> None:
        super().__init__(proc, pipes)
        self.run_token = run_token
        self.processes = ProcessSet.of_popen(proc, RUN_TOKEN_VAR, run_token, before)
        #: a confirmed sweep ran after the main process was reaped: nothing of the
        #: execution is left that a second sweep could find
        self._swept = False
        #: called once the execution is over (see :meth:`release`)
        self.on_release: Callable[[], None] | None = None

    def release(self) -> None:
        if self.on_release is not None:
            self.on_release()

    def terminate(self) -> None:
        self.processes.signal(signal.SIGTERM)

    def kill(self) -> None:
        if self._swept:
            return
        reaped_before = self._proc.returncode is not None
        confirmed = self.processes.kill()
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
        self.wait(REAP_SECONDS)
        self._swept = reaped_before and confirmed



class LocalLauncher(Launcher):
    """Starts children with :mod:`subprocess` at isolation level ``none``; keeps ``warm``
    script interpreters started ahead."""

    level = "none"

    def __init__(self, warm: int = 0) -> None:
        # what killed hosts at the other levels left (cgroups and their processes, ACL
        # grants, private tmp folders) is cleaned up here too: an engine at this level
        # may be the next one to start on the host
        # (no probe of the host for it: where no cgroup can be found there is none to sweep)
        root = os.geteuid() == 0
        layout = None
        if root:
            with contextlib.suppress(OSError):
                layout = cgroups.discover()
        leftovers.sweep(layout, SANDBOX_GID if root else None)
        self._background = Background("execengine-prestart")
        self._pool = WarmPool(self._prestart, _discard, self._background, warm)
        self._late: frozenset[str] = frozenset()
        self._source = ""
        self._programs: dict[tuple[Any, ...], bytes] = {}
        self._umask = host_umask()

    @classmethod
    def from_config(cls, config: Config, report: IsolationReport | None = None
                    ) -> LocalLauncher:
        return cls(warm=config.code_execution.warm_entries)

    def launch(self, spec: LaunchSpec) -> LocalChild:
        if not spec.argv or not os.path.isabs(spec.argv[0]):
            raise SandboxError(f"the child's interpreter must be an absolute path, got "
                               f"{spec.argv[0] if spec.argv else None!r}")
        key = self._key(spec)
        entry = self._pool.take(key) if key is not None else None
        child = _enter(entry, spec, self._umask) if entry is not None else None
        if child is None:
            child = self._cold(spec)
        if key is not None:
            # the next interpreter starts once this execution is over, not beside it: on
            # 2 cores a start beside a script's tool calls doubled their round trip
            child.on_release = functools.partial(self._pool.refill, key)
        return child

    def prestarted(self) -> list[int]:
        """The pids of the interpreters started ahead and not taken yet."""
        return [entry.pid for entry in self._pool.entries()]

    def close(self) -> None:
        """Kill the interpreters started ahead (idempotent)."""
        self._pool.close()
        self._background.close()

    def _key(self, spec: LaunchSpec) -> tuple[Any, ...] | None:
        """What an interpreter started ahead for ``spec`` must have been started with (its
        interpreter and the environment but the per-execution variables); None when
        ``spec`` may not run in one (not a script, or none are kept)."""
        if not spec.prestart or not self._pool.size or len(spec.argv) < 3 \
                or spec.argv[1] != "-c" or not _python(spec.argv[0]):
            return None
        if not self._late:
            self._late = frozenset(runtime_module("zygote").LATE_VARS)
            self._source = (sandbox_dir() / "zygote.py").read_text()
        return (spec.argv[0], tuple(sorted((k, v) for k, v in spec.env.items()
                                           if k not in self._late)))

    def _prestart(self, key: tuple[Any, ...]) -> WarmEntry:
        """Start ``key``'s interpreter (on the pool's thread), waiting for its plan."""
        argv0, shared = key[0], dict(key[1])
        token = secrets.token_hex(16)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PLAN_BUFFER)
        # the same for every interpreter of ``key`` (the plan's socket is named in argv)
        program = self._programs.get(key)
        if program is None:
            if len(self._programs) > 8:  # a caller cycling through environments
                self._programs.clear()
            program = self._programs[key] = zygote_program(self._source, "main", {
                "argv0": argv0, "env": shared, "ruleset": None, "landlock": None}, argv0)
        # its start-up's stdout and stderr: a pipe nobody reads (until the plan's are
        # placed, a write that would block fails), its read end held by the interpreter
        # (close-on-exec here, as every descriptor the host makes: Popen passes them)
        hold, stdio = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        text_r, text_w = os.pipe()
        fds = [hold, stdio, text_r, text_w]
        try:
            if len(program) > 65536 or os.write(text_w, program) != len(program):
                raise SandboxError("the pre-started interpreter's program does not fit "
                                   "in a pipe")
            os.close(text_w)
            fds.remove(text_w)
            before = Mark.now()
            proc = subprocess.Popen(
                [argv0, "-c", ZYGOTE_LOADER, str(text_r), str(theirs.fileno())],
                env={**shared, RUN_TOKEN_VAR: token}, cwd="/",
                stdin=subprocess.DEVNULL, stdout=stdio, stderr=stdio,
                start_new_session=True, close_fds=True,
                pass_fds=(hold, text_r, theirs.fileno()))
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
            for fd in fds:
                os.close(fd)
        return WarmEntry(token, key, (proc, ours, before), proc.pid, prestarted=True)

    def _cold(self, spec: LaunchSpec) -> LocalChild:
        before = Mark.now()
        try:
            proc = subprocess.Popen(
                list(spec.argv),
                env=dict(spec.env),
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(spec.pass_fds),
            )
        except OSError as exc:
            raise SandboxError(f"cannot start {spec.argv[0]}: {exc}") from exc
        return LocalChild(proc, spec.run_token, before)


def _enter(entry: WarmEntry, spec: LaunchSpec, umask: int) -> LocalChild | None:
    """Hand ``spec``'s plan to the interpreter ``entry`` started ahead; None when it is
    gone (the caller starts one)."""
    proc, ctl, before = entry.resources
    token = entry.id
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe2(os.O_CLOEXEC)
    plan = {"argv": list(spec.argv), "env": {**spec.env, RUN_TOKEN_VAR: token},
            "cwd": spec.cwd, "fd_targets": list(spec.pass_fds), "umask": umask}
    try:
        socket.send_fds(ctl, [marshal.dumps({"plan": plan}, 4)],
                        [out_w, err_w, st_w, *spec.pass_fds])
    except OSError:
        for fd in (out_r, err_r, st_r):
            os.close(fd)
        _discard(entry)
        return None
    finally:
        for fd in (out_w, err_w, st_w):
            os.close(fd)
    pipes = (open(out_r, "rb"), open(err_r, "rb"))  # noqa: SIM115 - the child's to close
    child = LocalChild(proc, token, before, pipes)
    # closed on exec or once the code is about to run; what failed before, written there
    # (an interpreter that does not get there in time, stopped say, is not waited for).
    # Our end of its socket stays open until then: one still starting says ready on it
    with ctl, open(st_r, "rb") as status:
        poller = select.poll()
        poller.register(status, select.POLLIN)
        if not poller.poll(START_SECONDS * 1000):
            child.close()
            return None
        failed = status.read(4096)
        if not failed and not _said_ready(ctl):
            # its start-up ended it (a .pth hook, a signal) before it took the plan,
            # whose descriptors went with it: the plan is run by a start of its own
            child.close()
            return None
    if failed:
        child.close()
        raise SandboxError(f"cannot start {spec.argv[0]}: "
                           f"{failed.decode('utf-8', 'replace')}")
    return child


def _said_ready(ctl: socket.socket) -> bool:
    """Whether the interpreter said its start-up was over (it does before it takes the
    plan, so by the time the plan's status descriptor is closed the word is here)."""
    try:
        return ctl.recv(64, socket.MSG_DONTWAIT).startswith(b"ready")
    except OSError:
        return False


@functools.lru_cache(maxsize=16)
def _python(argv0: str) -> bool:
    """Whether ``argv0`` names a Python interpreter, the only program that can wait for
    a plan (a spec that may run in one says it is, but another program there is only
    exec'd for it: started at launch instead, it leaves the interpreters for scripts)."""
    return re.fullmatch(r"(python|pypy)[0-9.]*", os.path.basename(
        os.path.realpath(argv0))) is not None


def _discard(entry: WarmEntry) -> None:
    proc, ctl, _ = entry.resources
    ctl.close()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(REAP_SECONDS)
