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
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from execengine.errors import SandboxError
from execengine.isolation import cgroups, leftovers
from execengine.isolation.uids import SANDBOX_GID
from execengine.launch.base import Launcher, LaunchSpec, PopenChild
from execengine.proctree import RUN_TOKEN_VAR, Mark, ProcessSet

#: how long kill() waits for the main process to be reaped after SIGKILL
REAP_SECONDS = 2.0


class LocalChild(PopenChild):
    def __init__(self, proc: subprocess.Popen[bytes], run_token: str,
                 before: Mark | None = None) -> None:
        super().__init__(proc)
        self.run_token = run_token
        self.processes = ProcessSet.of_popen(proc, RUN_TOKEN_VAR, run_token, before)
        #: a confirmed sweep ran after the main process was reaped: nothing of the
        #: execution is left that a second sweep could find
        self._swept = False

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
    """Starts children with :mod:`subprocess` at isolation level ``none``."""

    level = "none"

    def __init__(self) -> None:
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

    def launch(self, spec: LaunchSpec) -> LocalChild:
        if not spec.argv or not os.path.isabs(spec.argv[0]):
            raise SandboxError(f"the child's interpreter must be an absolute path, got "
                               f"{spec.argv[0] if spec.argv else None!r}")
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
