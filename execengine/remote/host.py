"""The remote of one registry (``terminal.backend: ssh``): one connection for everything.

Get it with ``registry.service(REMOTE, RemoteHost)``. It owns the :class:`SshConnection`;
the engine's launcher, the terminal backend and the file tools' channel all run over it, so
a registry holds one SSH connection per remote. ``registry.close()`` closes it.
"""

from __future__ import annotations

import posixpath
import threading
from typing import TYPE_CHECKING

from execengine.remote.files import RemoteFiles
from execengine.remote.launcher import REMOTE_PATH, SshLauncher
from execengine.remote.ssh import SshConnection, SshTarget, quote

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.registry import ToolRegistry

REMOTE = "remote"


def target_of(config: Config) -> SshTarget:
    return SshTarget.from_config(config)


class RemoteHost:
    """The connection, the installed runtime and the remote's directories, shared."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.config: Config = registry.config
        s = self.config.ssh
        self.connection = SshConnection(target_of(self.config))
        self._launcher = SshLauncher(self.connection.target, remote_dir=s.remote_dir,
                                     python=s.python, cwd=s.cwd, connection=self.connection,
                                     owns_connection=False)
        self._lock = threading.Lock()
        self._home: str | None = None
        self._files: RemoteFiles | None = None

    @property
    def launcher(self) -> SshLauncher:
        """The engine's launcher (closing it leaves the shared connection open)."""
        return self._launcher

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

    def default_cwd(self) -> str:
        """The remote working directory of new tasks: ``ssh.cwd`` or the remote home."""
        where = self.expanduser(self.config.ssh.cwd or "~")
        return posixpath.normpath(posixpath.join(self.home(), where))

    def files(self) -> RemoteFiles:
        """The file tools' channel, started on first use."""
        with self._lock:
            if self._files is None:
                self._files = RemoteFiles(self)
            return self._files

    def close(self) -> None:
        files, self._files = self._files, None
        if files is not None:
            files.close()
        self.connection.close()

    def __enter__(self) -> RemoteHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
