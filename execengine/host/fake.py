"""An in-memory host for fast tests of the layers above the host seam.

:class:`FakeHost` runs scripts with whatever launcher the test gives (an
:class:`~execengine.launch.inprocess.InProcessLauncher` plays scripted children on
threads), answers terminal commands with a :class:`~execengine.terminal.fake.FakeBackend`
and runs file operations here, under a folder of the test's. Nothing is confined: it is a
test double, not a host a script should run on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

from execengine.config import Config
from execengine.confine.policy import ExecutionPolicy
from execengine.host.base import Host, LocalFiles
from execengine.launch.base import Launcher
from execengine.terminal.backend import TerminalBackend
from execengine.terminal.fake import FakeBackend


class FakeHost(Host):
    """``launcher``: makes each engine's launcher; ``cwd``: where tasks start."""

    kind = "fake"

    def __init__(self, config: Config, *, launcher: Callable[[], Launcher],
                 cwd: str, terminal: Callable[[], TerminalBackend] = FakeBackend) -> None:
        super().__init__(config)
        self._launcher = launcher
        self._terminal = terminal
        self.cwd = os.path.abspath(cwd)
        self.files = LocalFiles()
        #: the policies it made, newest last (what a test may look at)
        self.policies: list[ExecutionPolicy] = []

    def new_launcher(self) -> Launcher:
        return self._launcher()

    def execution_policy(self, *, cwd: str, level: str, extra_writable: Sequence[str],
                         stack: contextlib.ExitStack) -> ExecutionPolicy:
        policy = ExecutionPolicy.for_execution(self.config, cwd=cwd, level=level,
                                               extra_writable=tuple(extra_writable))
        self.policies.append(policy)
        return policy

    def terminal_backend(self) -> TerminalBackend:
        return self._terminal()

    def default_cwd(self) -> str:
        return self.cwd

    def folder_problem(self, path: str) -> str | None:
        return None if os.path.isdir(path) else "does not exist"
