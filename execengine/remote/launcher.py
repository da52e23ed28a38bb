"""Running a script's child on a remote machine over SSH (backend ``ssh``).

The engine prepares an execution as for a local child (staging, stub, allow-listed
environment, RPC channel); :class:`SshLauncher` then runs it on the remote:

- the child runtime (``sandbox/``, standard library only) is installed once per remote and
  content hash under ``<remote_dir>/runtime-<hash>`` and reused;
- the RPC channel's Unix socket is forwarded over the same connection to
  ``<remote_dir>/s/<token>.sock`` (``ssh -O forward -R``), so a tool call costs one round
  trip on the link: no polling, no files;
- the child starts as ``env -i ... python3 -c ENTRY`` (the remote login environment is
  dropped) and reads the script, the stub and its environment from a header on its
  standard input, so no secret is on a command line; that input then serves as its
  watchdog: ``T`` asks for SIGTERM, EOF (the host closed it, died, or the connection
  dropped) kills every process of the execution and removes its files.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import tarfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from execengine._resources import sandbox_dir
from execengine._runtime import entry_program
from execengine.launch.base import Launcher, LaunchSpec, PopenChild
from execengine.proctree import ProcessSet
from execengine.remote.kernel import kernel_fds, relay
from execengine.remote.ssh import RemoteError, SshConnection, SshTarget, quote

if TYPE_CHECKING:
    from typing_extensions import Self

    from execengine.config import Config
    from execengine.isolation.detect import IsolationReport

#: the remote child's ``python -c`` program (the same text as ``sandbox/remote.py``'s)
REMOTE_ENTRY = entry_program("remote")
#: environment of the remote child: these come from the host's allow-listed environment
_KEEP = ("LANG", "LANGUAGE", "TZ", "TERM")
_KEEP_PREFIX = ("LC_", "PYTHON", "EXECENGINE_", "HERMES_")
#: set by the host for a local child only
_LOCAL_ONLY = frozenset({"PYTHONPATH", "EXECENGINE_WATCHDOG_FD", "EXECENGINE_SUBREAPER"})
REMOTE_PATH = "/usr/local/bin:/usr/bin:/bin"
#: how long kill() waits for the remote to finish after EOF
KILL_WAIT = 5.0


def runtime_archive() -> tuple[str, bytes]:
    """The child runtime as a tar archive, and its content hash (names and bytes)."""
    root = sandbox_dir()
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in files:
            rel = path.relative_to(root).as_posix()
            data = path.read_bytes()
            digest.update(rel.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(f"_execengine/{rel}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return digest.hexdigest()[:16], buf.getvalue()


INSTALL_SCRIPT = """
import io, os, sys, tarfile
dest = sys.argv[1]
if os.path.isfile(os.path.join(dest, ".complete")):
    sys.exit(0)
parent = os.path.dirname(dest)
os.makedirs(os.path.join(parent, "s"), mode=0o700, exist_ok=True)
tmp = dest + ".tmp-%d" % os.getpid()
with tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read())) as tar:
    for m in tar.getmembers():
        if not m.isfile() or m.name.startswith("/") or ".." in m.name.split("/"):
            raise SystemExit("bad member " + m.name)
    tar.extractall(tmp)
open(os.path.join(tmp, ".complete"), "w").close()
try:
    os.rename(tmp, dest)
except OSError:  # another host installed it meanwhile
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
print(sys.version_info[0], sys.version_info[1])
"""


class SshLauncher(Launcher):
    """Starts children on one remote; owns its :class:`SshConnection`."""

    level = "ssh"

    def __init__(self, target: SshTarget, *, remote_dir: str = "~/.execengine-remote",
                 python: str = "python3", cwd: str | None = None,
                 connection: SshConnection | None = None, owns_connection: bool = True) -> None:
        self.connection = connection or SshConnection(target)
        self._owns_connection = owns_connection or connection is None
        self.python = python
        self.cwd = cwd
        self._remote_dir_setting = remote_dir
        self._lock = threading.Lock()
        self._base: str | None = None
        self._runtime: str | None = None

    @classmethod
    def from_config(cls, config: Config, report: IsolationReport | None = None) -> Self:
        s = config.ssh
        return cls(SshTarget.from_config(config), remote_dir=s.remote_dir, python=s.python,
                   cwd=s.cwd)

    # -- the remote runtime -----------------------------------------------------------------

    def _remote_base(self) -> str:
        """``remote_dir`` with ``~`` expanded on the remote (once)."""
        if self._base is None:
            out = self.connection.check(
                f"mkdir -p {self._remote_dir_setting} && chmod 700 "
                f"{self._remote_dir_setting} && cd {self._remote_dir_setting} && pwd")
            self._base = out.decode().strip()
        return self._base

    def install(self) -> str:
        """Install the runtime for this content hash unless it is there; its directory."""
        with self._lock:
            if self._runtime is not None:
                return self._runtime
            digest, archive = runtime_archive()
            base = self._remote_base()
            runtime = f"{base}/runtime-{digest}"
            self.connection.check(
                quote([self.python, "-I", "-c", INSTALL_SCRIPT, runtime]), input=archive,
                timeout=120)
            self._runtime = runtime
            return runtime

    # -- launching --------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> SshChild:
        """Start ``spec`` on the remote: a script (``python -c BOOTSTRAP script.py``), or a
        session's kernel (its environment names the kernel's pipes, see
        :mod:`.kernel`), whose streams the remote helper relays over the channel."""
        runtime = self.install()
        base = self._remote_base()
        env = dict(spec.env)
        kernel = kernel_fds(env)
        script = None if kernel is not None else Path(spec.argv[-1])
        stub_dir = env.get("PYTHONPATH", "").split(os.pathsep)[0]
        stub = Path(stub_dir, "hermes_tools.py").read_text("utf-8", "surrogatepass")
        # strict mode: the child runs in its staging folder (the first readable path, see
        # execengine.engine.prepare), which the remote makes a copy of itself
        staging = spec.readable_paths[0] if spec.readable_paths else None
        strict = staging is not None and os.path.abspath(spec.cwd) == os.path.abspath(staging)
        local_sock = env.get("EXECENGINE_RPC_ENDPOINT")
        remote_sock = f"{base}/s/{spec.run_token[:24]}.sock"
        if local_sock:
            self.connection.forward_socket(remote_sock, local_sock)
        header = encode_header({
            "script": script.read_text("utf-8", "surrogatepass") if script else None,
            "kernel": "1" if kernel is not None else None, "stub": stub,
            "cwd": None if strict else spec.cwd, "base": base,
            "socket": remote_sock if local_sock else None,
        }, remote_env(env, remote_sock if local_sock else None))
        argv = self.connection.command(
            f"exec env -i PATH={REMOTE_PATH} PYTHONPATH={quote([runtime])} "
            f"{quote([self.python, '-c', REMOTE_ENTRY])}")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True,
                                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        except OSError as exc:
            if local_sock:
                self.connection.cancel_socket(remote_sock, local_sock)
            raise RemoteError(f"cannot start ssh: {exc}") from exc
        assert proc.stdin is not None
        try:
            proc.stdin.write(header)
            proc.stdin.flush()
        except OSError:
            pass  # the channel failed: the exit status says so
        forward = (remote_sock, local_sock) if local_sock else None
        if kernel is not None:  # the kernel says ready itself, on its reply pipe
            return SshChild(proc, self.connection, forward, stderr=relay(proc, *kernel))
        # the handshake the engine waits for: the channel is up and the header delivered
        for fd in spec.pass_fds[:1]:
            with contextlib.suppress(OSError):
                os.write(fd, b"R")
        return SshChild(proc, self.connection, forward)

    def close(self) -> None:
        if self._owns_connection:
            self.connection.close()


def encode_header(fields: Mapping[str, str | None], env: Mapping[str, str]) -> bytes:
    """The remote helpers' start header (see ``sandbox/remote.py``): netstrings of keys and
    values, ``env:NAME`` for the environment; ``None`` values are left out."""
    words = [w for k, v in fields.items() if v is not None for w in (k, v)]
    words += [w for k, v in env.items() for w in (f"env:{k}", v)]
    body = b"".join(b"%d:%s," % (len(b), b) for b in
                    (w.encode("utf-8", "surrogatepass") for w in words))
    return b"EE1 %d\n" % len(body) + body


def remote_env(env: Mapping[str, str], rpc_socket: str | None) -> dict[str, str]:
    """The remote child's environment, from the host's allow-listed one: only variables
    that mean the same there; paths of this machine are left behind."""
    out = {k: v for k, v in env.items()
           if k not in _LOCAL_ONLY and (k in _KEEP or k.startswith(_KEEP_PREFIX))}
    out["PATH"] = REMOTE_PATH
    if rpc_socket:
        out["EXECENGINE_RPC_ENDPOINT"] = rpc_socket
        if "HERMES_RPC_SOCKET" in out:
            out["HERMES_RPC_SOCKET"] = rpc_socket
    return out


class SshChild(PopenChild):
    """The local ``ssh`` client carrying a remote child (``stderr``: a kernel's, taken
    apart from its replies, see :mod:`.kernel`)."""

    def __init__(self, proc: subprocess.Popen[bytes], connection: SshConnection,
                 forward: tuple[str, str] | None, *, stderr: IO[bytes] | None = None) -> None:
        super().__init__(proc)
        self._connection = connection
        self._forward = forward
        if stderr is not None:
            self.stderr = stderr

    def terminate(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError, ValueError):
                stdin.write(b"T")
                stdin.flush()

    def kill(self) -> None:
        """EOF on the remote child's input: it kills everything of the execution there;
        the local ssh process is killed if the remote does not finish in time."""
        stdin = self._proc.stdin
        if stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                stdin.close()
        if self.wait(KILL_WAIT) is None:
            ProcessSet.of_popen(self._proc).kill()  # ssh and its group
            self._proc.wait()

    def release(self) -> None:
        if self._forward is not None:
            self._connection.cancel_socket(*self._forward)
