"""An in-process launcher: the "child" is a Python callable run on a thread of the host.

With :class:`~execengine.rpc.memory.MemoryServer` it lets the engine's whole execution path
(limits, hello deadline, timeout and interrupt escalation, output capture, result mapping,
budget and refusals of tool calls) run in milliseconds without spawning: tests hand it a
*scripted child*, a function ``script(proc) -> exit status`` that plays what a real child
would do through :class:`ScriptedProcess` (print, call tools, say ready or not, hang,
ignore SIGTERM). It is a test double, not an isolation level: nothing is confined.

What a real child's bootstrap does is done here by default before the script runs:
connect to the channel named by ``EXECENGINE_RPC_ENDPOINT``, say hello with the
execution's credentials, and write the ready byte on the watchdog descriptor.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import traceback
from collections.abc import Callable
from typing import IO, Any

from execengine.launch.base import Child, Launcher, LaunchSpec
from execengine.launch.supervise import READY
from execengine.rpc.memory import MemoryPeer, MemoryServer

#: how long kill() waits for a scripted child's thread to notice it was stopped
JOIN_SECONDS = 2.0


class ScriptedProcess:
    """What a scripted child sees and does (its side of the pipes, the RPC, signals)."""

    def __init__(self, spec: LaunchSpec, out_w: int, err_w: int, ready_fd: int) -> None:
        self.spec = spec
        self.env = dict(spec.env)
        self._pipes = {1: out_w, 2: err_w}
        self._ready_fd = ready_fd
        self._lock = threading.Lock()
        self.peer: MemoryPeer | None = None
        #: set when the host asks the child to stop (SIGTERM) or kills it
        self.stop = threading.Event()
        #: when False, a terminate() is ignored (a child that ignores SIGTERM)
        self.honours_sigterm = True
        self._ids = 0

    # -- output ----------------------------------------------------------------------------

    def print(self, *parts: Any, err: bool = False) -> None:
        self.write(" ".join(map(str, parts)) + "\n", err=err)

    def write(self, text: str | bytes, *, err: bool = False) -> None:
        data = text.encode() if isinstance(text, str) else text
        with self._lock:
            fd = self._pipes.get(2 if err else 1, -1)
            if fd < 0:
                return  # killed: the pipe is gone
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(fd, view):]
                except BrokenPipeError:
                    return

    # -- the bootstrap's part ------------------------------------------------------------------

    def say_ready(self) -> None:
        with self._lock:
            if self._ready_fd >= 0:
                os.write(self._ready_fd, READY)

    def connect(self, server: MemoryServer) -> MemoryPeer:
        """Connect and say hello as the runtime does; the welcome (or denial) is returned
        by :meth:`MemoryPeer.hello`."""
        self.peer = server.connect(self.env["EXECENGINE_RPC_ENDPOINT"])
        self.welcome = self.peer.hello(self.env["EXECENGINE_EXEC_ID"],
                                       self.env["EXECENGINE_RPC_TOKEN"])
        return self.peer

    def call(self, tool: str, args: dict[str, Any] | None = None,
             timeout: float = 5.0) -> Any:
        """One tool call, as ``hermes_tools`` makes it; the decoded result."""
        assert self.peer is not None, "not connected"
        with self._lock:
            self._ids += 1
            msg_id = f"m{self._ids}"
        return self.peer.call(tool, args, id=msg_id, timeout=timeout)

    # -- teardown (by the launcher) ---------------------------------------------------------------

    def close_fds(self) -> None:
        with self._lock:
            for key, fd in list(self._pipes.items()):
                os.close(fd)
                self._pipes[key] = -1
            if self._ready_fd >= 0:
                os.close(self._ready_fd)
                self._ready_fd = -1


Script = Callable[[ScriptedProcess], "int | None"]


class InProcessChild(Child):
    """A scripted child running on a daemon thread of the host."""

    def __init__(self, proc: ScriptedProcess, script: Script, out_r: int, err_r: int) -> None:
        self.pid = -1  # no process: signals go to the script through ``proc.stop``
        self.proc = proc
        self.stdout: IO[bytes] = os.fdopen(out_r, "rb", buffering=0)
        self.stderr: IO[bytes] = os.fdopen(err_r, "rb", buffering=0)
        self._status: int | None = None
        self._signal: int | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(script,), daemon=True,
                                        name="execengine-inprocess-child")
        self._thread.start()

    def _run(self, script: Script) -> None:
        status = 1
        try:
            status = script(self.proc) or 0
        except Exception:
            self.proc.write(traceback.format_exc(), err=True)
        finally:
            self._status = -self._signal if self._signal else status
            self.proc.close_fds()
            self._done.set()

    def poll(self) -> int | None:
        return self._status if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int | None:
        self._done.wait(timeout)
        return self.poll()

    def terminate(self) -> None:
        if self.proc.honours_sigterm and not self._done.is_set():
            self._signal = self._signal or signal.SIGTERM
            self.proc.stop.set()

    def kill(self) -> None:
        if not self._done.is_set():
            self._signal = signal.SIGKILL
            self.proc.stop.set()
            if not self._done.wait(JOIN_SECONDS):
                self.proc.close_fds()  # a thread cannot be killed: cut it off
                self._status = -signal.SIGKILL
                self._done.set()

class InProcessLauncher(Launcher):
    """Starts scripted children in-process; ``bootstrap=False`` leaves the hello and the
    ready byte to the script (to play a child that never says hello)."""

    level = "none"

    def __init__(self, server: MemoryServer, script: Script, *, bootstrap: bool = True) -> None:
        self.server = server
        self.script = script
        self.bootstrap = bootstrap
        self.specs: list[LaunchSpec] = []

    def launch(self, spec: LaunchSpec) -> Child:
        self.specs.append(spec)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # the engine closes its copy of the watchdog descriptor once launch() returns
        ready_fd = os.dup(spec.pass_fds[0]) if spec.pass_fds else -1
        proc = ScriptedProcess(spec, out_w, err_w, ready_fd)
        script = self.script
        if self.bootstrap:
            def boot(p: ScriptedProcess) -> int | None:
                p.connect(self.server)
                if p.welcome.get("type") != "welcome":
                    p.write(json.dumps(p.welcome) + "\n", err=True)
                    return 1
                p.say_ready()
                return self.script(p)
            script = boot
        return InProcessChild(proc, script, out_r, err_r)
