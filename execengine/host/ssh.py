"""The host of ``terminal.backend: ssh``: one connection for everything.

An :class:`SshHost` owns the :class:`SshConnection`; the engine's launcher, the terminal
backend and the file tools' channel all run over it, so a registry holds one SSH
connection per remote. It is closed with the registry that owns it.
"""

from __future__ import annotations

import posixpath
import threading
from typing import TYPE_CHECKING

from execengine.host.base import Host
from execengine.remote.doctor import Check, check_remote
from execengine.remote.files import RemoteFiles
from execengine.remote.launcher import REMOTE_PATH, SshLauncher
from execengine.remote.ssh import SshConnection, SshTarget, quote
from execengine.remote.terminal import SshBackend

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.terminal.backend import TerminalBackend


class SshHost(Host):
    """The connection, the installed runtime and the remote's directories, shared."""

    kind = "ssh"
    local = False

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        s = config.ssh
        self.connection = SshConnection(SshTarget.from_config(config))
        self._launcher = SshLauncher(self.connection.target, remote_dir=s.remote_dir,
                                     python=s.python, cwd=s.cwd, connection=self.connection,
                                     owns_connection=False)
        self._lock = threading.Lock()
        self._home: str | None = None
        #: the file tools' channel, started on first use
        self.files: RemoteFiles = RemoteFiles(self)

    # -- Host ------------------------------------------------------------------------------

    @classmethod
    def doctor_checks(cls, config: Config) -> list[Check]:
        """Connect once and check what the remote needs (``execengine doctor``)."""
        return check_remote(config)

    def new_launcher(self) -> SshLauncher:
        """The engine's launcher (closing it leaves the shared connection open)."""
        return self._launcher

    @property
    def launcher(self) -> SshLauncher:
        return self._launcher

    def terminal_backend(self) -> TerminalBackend:
        cfg = self.config.terminal
        return SshBackend(self, kill_grace=cfg.kill_grace,
                          buffer_chars=cfg.background_buffer_chars,
                          max_background=cfg.max_background)

    def default_cwd(self) -> str:
        """The remote working directory of new tasks: ``ssh.cwd`` or the remote home."""
        where = self.expanduser(self.config.ssh.cwd or "~")
        return posixpath.normpath(posixpath.join(self.home(), where))

    def script_command_dir(self, execution_cwd: str | None) -> str | None:
        return None  # the task's remote directory, where cd sticks

    # -- the remote ------------------------------------------------------------------------

    def runtime(self) -> str:
        """The installed child runtime's directory (installed on first use)."""
        return self._launcher.install()

    def python_command(self, entry: str) -> str:
        """The shell command line running ``python -c entry`` with the runtime importable,
        under ``env -i`` (the remote login environment is dropped)."""
        return (f"exec env -i PATH={REMOTE_PATH} PYTHONPATH={quote([self.runtime()])} "
                f"{quote([self._launcher.python, '-c', entry])}")

    def home(self) -> str:
        """The remote user's home directory (asked once)."""
        with self._lock:
            if self._home is None:
                out = self.connection.check("cd && pwd")
                self._home = out.decode("utf-8", "surrogateescape").strip()
            return self._home

    def expanduser(self, path: str) -> str:
        """``~`` and ``~/...`` made absolute on the remote."""
        if path == "~" or path.startswith("~/"):
            return posixpath.normpath(self.home() + path[1:])
        return path

    @property
    def holds_resources(self) -> bool:
        return True  # the connection

    def close(self) -> None:
        self.files.close()
        self.connection.close()
