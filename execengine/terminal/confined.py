"""A ``terminal`` command run inside a sandbox, like the script that asked for it.

A script at level ``restricted`` or ``isolated`` must not get a host shell through the
terminal tool. Its commands are started by the execution's own launcher (the same layers:
slot uid, no-new-privileges, rlimits, Landlock, seccomp, cgroup, and at ``isolated`` the
namespaces and the minimal root) with the policy's writable roots as the only writable
paths and the policy's network, so a command can do in the working directory what the
script can, and nothing more. The agent's own terminal can be sandboxed the same way
(``terminal.isolation``; :class:`AgentSandbox`).

Inside the sandbox the approval prompts for ordinary dangerous patterns are not needed
(the sandbox is the boundary); hard blocks are still refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import sys
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from execengine.childenv import build_child_env
from execengine.confine.domains import DomainPolicy
from execengine.confine.files import sandbox_may_enter
from execengine.confine.policy import ExecutionPolicy
from execengine.confine.proxy import AllowListProxy
from execengine.confine.workdir import refuse_home
from execengine.errors import SandboxError, TerminalError
from execengine.fileops.paths import PathGuard
from execengine.launch.base import Launcher, LaunchLimits, LaunchSpec
from execengine.launch.factory import make_launcher
from execengine.launch.supervise import OutputCapture, oom_message, supervise
from execengine.rpc.channel import make_socket_dir
from execengine.terminal.backend import (
    INTERRUPTED_EXIT_CODE,
    INTERRUPTED_TEXT,
    TIMEOUT_EXIT_CODE,
    CommandResult,
)
from execengine.terminal.procs import PWD_FD_MIN, shell_script

if TYPE_CHECKING:
    from execengine.config import Config


def _bash() -> str:
    found = shutil.which("bash") or "/bin/bash"
    return os.path.realpath(found)


def _python() -> tuple[str, list[str]]:
    """(folder of this host's interpreter, the prefixes a sandbox must read to run it)."""
    exe = os.path.abspath(sys.executable)
    prefixes = [os.path.dirname(os.path.dirname(exe))]
    real = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
    if real not in ("/usr", "/"):
        prefixes.append(real)
    return os.path.dirname(exe), [p for p in prefixes if p not in ("/usr", "/")]


def check_cwd(policy: ExecutionPolicy, cwd: str, guard: PathGuard | None = None) -> str:
    """``cwd`` if a sandboxed command may start there, else :class:`TerminalError`:
    beneath a readable root, reached without leaving it, not denied (``guard``), and a
    folder the sandbox's uid could enter by itself (the command starts there before it
    drops to that uid, so a folder the owner keeps from it must be refused here)."""
    real = os.path.realpath(cwd)
    if policy.root_of(real, write=False) is None or policy.root_of(
            os.path.abspath(cwd), write=False) is None:
        raise TerminalError(f"workdir {cwd!r} is outside this execution's roots "
                            f"({', '.join(policy.readable_roots)})")
    if not os.path.isdir(real):
        raise TerminalError(f"workdir is not a directory: {cwd}")
    hit = guard.reason(real) if guard is not None else None
    if hit is not None:
        raise TerminalError(f"workdir {cwd!r} is a protected location ({hit})")
    if not sandbox_may_enter(policy, real):
        raise TerminalError(f"workdir {cwd!r}: the sandbox's uid may not enter it (a "
                            "private folder of its owner, or one on the way)")
    return real


def _limits(config: Config, policy: ExecutionPolicy, timeout: float) -> LaunchLimits:
    ce = config.code_execution
    return LaunchLimits(memory_mb=ce.memory_mb, cpu_seconds=int(timeout) + 1,
                        max_processes=ce.max_processes, max_file_mb=ce.max_file_mb,
                        tmp_mb=ce.tmp_mb, network=policy.network == "on",
                        proxy_port=policy.proxy_port, proxy_socket=policy.proxy_socket,
                        workdir_as_owner=ce.workdir_as_owner)


def run_sandboxed(launcher: Launcher, command: str, *, config: Config,
                  policy: ExecutionPolicy, cwd: str, timeout: float,
                  max_output_chars: int, passthrough: tuple[str, ...] = (),
                  interrupt: threading.Event | None = None) -> CommandResult:
    """Run ``bash -c command`` through ``launcher`` under ``policy``; its output (stdout
    and stderr together, head + tail), exit code and duration."""
    start = time.monotonic()
    real_cwd = check_cwd(policy, cwd, PathGuard.from_config(config, policy))
    token = secrets.token_hex(16)
    env = build_child_env(os.environ, passthrough=passthrough, tz=config.code_execution.tz,
                          extra={"EXECENGINE_RUN_TOKEN": token, **policy.proxy_env()})
    env.pop("PYTHONPATH", None)
    # `python3` in a command is this host's interpreter (a shim under a private home, such
    # as pyenv's, would be out of the sandbox's reach)
    bindir, prefixes = _python()
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", "/usr/bin:/bin")])
    # the real forms of the roots (each root is listed as written and as resolved)
    writable = tuple(r for r in policy.writable_roots
                     if r == os.path.realpath(r) and os.path.isdir(r))
    system = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
    readable = tuple(r for r in policy.readable_roots
                     if r == os.path.realpath(r) and os.path.isdir(r) and r not in writable
                     and r not in system)
    readable += tuple(p for p in prefixes if p not in readable)
    # the final working directory comes back on a pipe (as the host terminal's does)
    pwd_r, pwd_w0 = os.pipe()
    pwd_w = fcntl.fcntl(pwd_w0, fcntl.F_DUPFD_CLOEXEC, PWD_FD_MIN)
    os.close(pwd_w0)
    spec = LaunchSpec(argv=[_bash(), "--noprofile", "--norc", "-c",
                            shell_script(command, pwd_w)],
                      env=env, cwd=real_cwd, run_token=token, writable_paths=writable,
                      readable_paths=readable, pass_fds=(pwd_w,),
                      protected_paths=policy.protected, hidden_paths=policy.denied_paths,
                      limits=_limits(config, policy, timeout), resolved=True)
    # one capture for both streams: the model sees them interleaved, as in a terminal
    output = OutputCapture(max(256, max_output_chars), name="output")
    try:
        try:
            child = launcher.launch(spec)
        except SandboxError as exc:
            raise TerminalError(f"cannot start the sandboxed command: {exc}") from exc
        finally:
            os.close(pwd_w)
        outcome = supervise(child, stdout=output, stderr=output, timeout=timeout,
                            kill_grace=config.terminal.kill_grace, interrupt=interrupt)
        new_cwd = _read_pwd(pwd_r)
    finally:
        os.close(pwd_r)
    captured = output.result()
    text = captured.text
    code = outcome.exit_code
    timed_out = outcome.reason == "timeout"
    if timed_out:
        text = _noted(text, f"command timed out after {timeout:g} s and was killed")
        exit_code = TIMEOUT_EXIT_CODE
    elif outcome.reason == "interrupted":
        text = _noted(text, INTERRUPTED_TEXT)
        exit_code = INTERRUPTED_EXIT_CODE
    elif code is None:
        exit_code = -1
    else:
        exit_code = 128 - code if code < 0 else code
    if outcome.oom_kills:  # counted through the command's cgroup, before its teardown
        text = _noted(text, oom_message(config.code_execution.memory_mb,
                                        "A process of the command"))
    return CommandResult(output=text, exit_code=exit_code, duration=time.monotonic() - start,
                         cwd=new_cwd if outcome.reason == "exited" else None, timed_out=timed_out,
                         truncated=captured.truncated, total_chars=captured.total_bytes)


def _noted(text: str, note: str) -> str:
    """The command's output with ``[note]`` on a line of its own after it."""
    return (text.rstrip("\n") + "\n" if text.strip() else "") + f"[{note}]"


def _read_pwd(fd: int) -> str | None:
    """What the command's EXIT trap wrote (everything of it is dead: EOF or nothing)."""
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 4096):
            data += chunk
            if len(data) > 8192:
                return None
    text = data.decode("utf-8", "replace")
    return text if text.startswith("/") else None


class AgentSandbox:
    """The launcher of the agent's own sandboxed terminal (``terminal.isolation``), one
    per host (:meth:`execengine.host.local.LocalHost.agent_sandbox`), started on first use
    and closed with the host."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._launcher: Launcher | None = None
        self._proxy: AllowListProxy | None = None
        self._proxy_dir = ""
        self._root = ""
        self._closed = False

    @property
    def level(self) -> str:
        return self.config.terminal.isolation

    def launcher(self) -> Launcher | None:
        """None when the agent's terminal is not sandboxed (``terminal.isolation: none``)."""
        if self.level == "none":
            return None
        with self._lock:
            if self._closed:
                raise TerminalError("the terminal sandbox is closed")
            if self._launcher is None:
                config = self.config.with_overrides(
                    {"code_execution.isolation": self.level})
                self._launcher = make_launcher(config)
            return self._launcher

    @property
    def root(self) -> str:
        """The one writable root of the agent's sandboxed commands: ``terminal.cwd`` (else
        the process's working directory when the sandbox was made). Fixed: a ``cd``
        elsewhere moves where commands start, never what they may write."""
        if not self._root:
            base = self.config.terminal.cwd
            self._root = os.path.abspath(os.path.expanduser(base)) if base else os.getcwd()
        return self._root

    def policy(self) -> ExecutionPolicy:
        """The policy of the agent's sandboxed commands; under a network allow-list they
        share one proxy, started on first use."""
        launcher = self.launcher()
        level = launcher.level if launcher is not None else "none"
        policy = ExecutionPolicy.for_execution(self.config, cwd=self.root,
                                               level=level)
        home = refuse_home(self.root, policy.allow_home) if level != "none" else None
        if home is not None:  # its commands would act there as the folder's owner
            raise TerminalError(home.replace("a sandbox's working directory",
                                             "the agent's sandboxed terminal's root"))
        if policy.network != "allowlist":
            return policy
        with self._lock:
            if self._closed:
                raise TerminalError("the terminal sandbox is closed")
            if self._proxy is None:
                self._proxy_dir = make_socket_dir()
                self._proxy = AllowListProxy(
                    DomainPolicy.of(policy.allowed_domains, policy.denied_domains),
                    unix_path=os.path.join(self._proxy_dir, "proxy.sock"))
            port, path = self._proxy.port, self._proxy.unix_path
        return replace(policy, proxy_port=port, proxy_socket=path)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            launcher, self._launcher = self._launcher, None
            proxy, self._proxy = self._proxy, None
        if proxy is not None:
            proxy.close()
            shutil.rmtree(self._proxy_dir, ignore_errors=True)
        if launcher is not None:
            with contextlib.suppress(Exception):
                launcher.close()
