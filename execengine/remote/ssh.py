"""One persistent, multiplexed SSH connection to a remote machine (the system OpenSSH client).

Why OpenSSH rather than a Python SSH library: it is on every machine that has ``ssh``, it
is the implementation users already trust and configure, its connection multiplexing
(``ControlMaster``) gives every command and port forward a new channel on one connection in
a few milliseconds, and it forwards Unix sockets (``-R remote.sock:local.sock``), which the
script's tool calls use.

The client runs with ``-F /dev/null``: no ``~/.ssh/config`` or system ``SendEnv`` rules, so
no variable of the host's environment travels to the remote. Host keys are always checked
against the configured known-hosts file (``StrictHostKeyChecking=yes``): an unknown or
changed key is refused, never accepted. Authentication is by key only (``BatchMode``).

:class:`SshConnection` starts the master lazily, restarts it when it died (the next
operation reconnects), and stops it on :meth:`close`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from execengine.errors import RemoteError
from execengine.remote import mux

if TYPE_CHECKING:
    from execengine.config import Config

__all__ = ["RemoteError", "SshConnection", "SshTarget", "quote"]


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts_file: str | None = None
    connect_timeout: float = 10.0

    @classmethod
    def from_config(cls, config: Config) -> SshTarget:
        """The ``ssh`` section's remote; :class:`RemoteError` when no host is set."""
        s = config.ssh
        if not s.host:
            raise RemoteError("terminal.backend is 'ssh' but ssh.host is not set")
        return cls(s.host, s.port, s.user, s.identity_file, s.known_hosts_file,
                   s.connect_timeout)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


class SshConnection:
    """A ControlMaster connection; thread-safe; a context manager with idempotent close."""

    def __init__(self, target: SshTarget, *, ssh: str = "ssh") -> None:
        self.target = target
        self._ssh = shutil.which(ssh) or ssh
        self._lock = threading.Lock()
        self._dir: str | None = None
        self._master: subprocess.Popen[bytes] | None = None
        self._closed = False

    # -- the master ---------------------------------------------------------------------------

    @property
    def control_path(self) -> str:
        if self._dir is None:
            # short: a Unix socket path (ssh adds a temporary suffix while it binds)
            self._dir = tempfile.mkdtemp(prefix="ee-ssh-")
        return os.path.join(self._dir, "ctl")

    def options(self) -> list[str]:
        t = self.target
        opts = ["-F", "/dev/null", "-p", str(t.port),
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"ConnectTimeout={max(1, round(t.connect_timeout))}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "LogLevel=ERROR", "-o", f"ControlPath={self.control_path}"]
        if t.known_hosts_file:
            opts += ["-o", f"UserKnownHostsFile={os.path.expanduser(t.known_hosts_file)}",
                     "-o", "GlobalKnownHostsFile=/dev/null"]
        if t.identity_file:
            opts += ["-o", "IdentitiesOnly=yes", "-i", os.path.expanduser(t.identity_file)]
        return opts

    def _alive(self) -> bool:
        return self._master is not None and self._master.poll() is None and os.path.exists(
            self.control_path)

    def connect(self) -> None:
        """Start the master connection unless it runs; :class:`RemoteError` on failure
        (the message carries what ssh said: host key, authentication, reachability)."""
        with self._lock:
            if self._closed:
                raise RemoteError("the SSH connection is closed")
            if self._alive():
                return
            self._stop_master()
            argv = [self._ssh, *self.options(), "-M", "-N", "-o", "ControlPersist=no",
                    "-o", "ExitOnForwardFailure=yes", self.target.destination]
            with tempfile.TemporaryFile() as errlog:
                self._master = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL, stderr=errlog,
                                                env=_client_env(), start_new_session=True)
                deadline = time.monotonic() + self.target.connect_timeout + 5
                while not os.path.exists(self.control_path):
                    if self._master.poll() is not None or time.monotonic() > deadline:
                        self._stop_master()
                        errlog.seek(0)
                        said = errlog.read().decode("utf-8", "replace").strip()
                        raise RemoteError(_explain(self.target, said))
                    time.sleep(0.01)

    def _stop_master(self) -> None:
        master, self._master = self._master, None
        if master is not None and master.poll() is None:
            master.terminate()
            try:
                master.wait(5)
            except subprocess.TimeoutExpired:
                master.kill()
                master.wait()
        if self._dir is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.control_path)

    def drop(self) -> None:
        """Kill the master now, as a network failure would (tests; ``reconnect``)."""
        with self._lock:
            if self._master is not None and self._master.poll() is None:
                self._master.kill()
                self._master.wait()

    # -- channels -----------------------------------------------------------------------------

    def command(self, remote_command: str, *, tty: bool = False) -> list[str]:
        """argv running ``remote_command`` (a shell command line) over the connection."""
        self.connect()
        return [self._ssh, *self.options(), "-T" if not tty else "-tt",
                self.target.destination, remote_command]

    def run(self, remote_command: str, *, input: bytes | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
        """Run a shell command line on the remote and wait for it."""
        argv = self.command(remote_command)
        try:
            return subprocess.run(argv, input=input, capture_output=True, timeout=timeout,
                                  env=_client_env())
        except subprocess.TimeoutExpired as exc:
            raise RemoteError(f"{self.target.destination}: command timed out after "
                              f"{timeout:g}s: {remote_command[:80]}") from exc

    def check(self, remote_command: str, *, input: bytes | None = None,
              timeout: float = 60.0) -> bytes:
        """Like :meth:`run`, raising :class:`RemoteError` unless it exits 0; its stdout."""
        done = self.run(remote_command, input=input, timeout=timeout)
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip()
            raise RemoteError(f"{self.target.destination}: `{remote_command[:80]}` exited "
                              f"{done.returncode}: {said[-500:]}")
        return done.stdout

    def forward_socket(self, remote_path: str, local_path: str) -> None:
        """Make ``remote_path`` on the remote a Unix socket forwarded to ``local_path``
        (through the master's control socket: no ``ssh -O`` process per request)."""
        self.connect()
        try:
            mux.open_remote_forward(self.control_path, remote_path, local_path,
                                    timeout=self.target.connect_timeout + 20)
        except (RemoteError, OSError) as exc:
            raise RemoteError(f"{self.target.destination}: forwarding {remote_path} "
                              f"failed: {exc}") from exc

    def cancel_socket(self, remote_path: str, local_path: str) -> None:
        with contextlib.suppress(RemoteError, OSError):
            mux.close_remote_forward(self.control_path, remote_path, local_path, timeout=10)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop_master()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> SshConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _client_env() -> dict[str, str]:
    """The ssh client's own environment: nothing of the host's but what it needs to run."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    return env


def _explain(target: SshTarget, said: str) -> str:
    where = f"{target.destination} port {target.port}"
    if "Host key verification failed" in said or "REMOTE HOST IDENTIFICATION" in said:
        known = target.known_hosts_file or "~/.ssh/known_hosts"
        return (f"{where}: the host key is not the one in {known} (or is missing there); "
                f"refusing to connect. Add the remote's key to that file after checking its "
                f"fingerprint. ssh said: {said}")
    if "Permission denied" in said:
        return f"{where}: authentication refused (key-based only). ssh said: {said}"
    return f"cannot connect to {where}: {said or 'ssh exited without a message'}"


def quote(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)
