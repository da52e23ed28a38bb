"""The file tools on the remote: one long-lived channel to a file server running there.

The file operations (:mod:`execengine.fileops.ops`) and their server
(:mod:`execengine.fileops.serve`) use only the standard library and the modules they import
from this package; :func:`files_archive` packs exactly those (found by following their
imports) and :class:`RemoteFiles` installs them once per content hash next to the child
runtime, then starts ``python -I -c ...serve...`` on one channel of the shared connection
and keeps it. A call is one JSON line each way: one round trip. The server runs the same
code as the engine does locally, so results, messages and path rules are the same; ``~``
means the remote user's home. It needs Python >= 3.10 on the remote (this package's own
minimum); the child runtime alone needs 3.8.

A channel that fails (the connection dropped) is restarted: a read is repeated once on the
new channel; a write that was under way reports the failure instead of guessing whether it
was applied.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import json
import os
import selectors
import subprocess
import tarfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine.fileops.ops import FileSettings, ToolResult
from execengine.proctree import ProcessSet
from execengine.remote.launcher import INSTALL_SCRIPT, REMOTE_PATH
from execengine.remote.ssh import RemoteError, quote
from execengine.workdirs import task_cwd

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.context import ToolContext
    from execengine.host.ssh import SshHost

#: the module the remote runs, and the oldest Python it accepts
SERVER_MODULE = "execengine.fileops.serve"
MIN_PYTHON = (3, 10)
#: operations without side effects: repeated once on a new channel if the old one died
READ_ONLY = frozenset({"read_file", "search_files"})
#: seconds one operation may take on the remote (a search of a huge tree) before the
#: channel is given up
CALL_TIMEOUT = 300.0
#: this package's folder (``execengine/``)
PACKAGE_DIR = Path(__file__).resolve().parent.parent
_PACKAGE_DOC = '"""The part of execengine the remote file server needs."""\n'


def _module_file(name: str) -> Path | None:
    root = PACKAGE_DIR
    rel = Path(*name.split(".")[1:])
    for candidate in (root / rel / "__init__.py", (root / rel).with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, package: str) -> set[str]:
    """``execengine`` modules imported at module level (not under ``TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text("utf-8"))
    found: set[str] = set()
    for sub in _module_level(tree.body):
        if isinstance(sub, ast.Import):
            found.update(a.name for a in sub.names)
        elif isinstance(sub, ast.ImportFrom):
            base = sub.module or ""
            if sub.level:
                parts = package.split(".")[: len(package.split(".")) - sub.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in sub.names)
    return {m for m in found if m == "execengine" or m.startswith("execengine.")}


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run on import: not function bodies, not ``if TYPE_CHECKING:``."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out += _module_level(node.orelse)
            continue
        out.append(node)
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                out += _module_level(inner)
            elif field == "handlers" and inner:
                for h in inner:
                    out += _module_level(h.body)
    return out


def server_modules() -> dict[str, Path]:
    """Every module of this package the file server imports, by name."""
    todo, seen = [SERVER_MODULE], {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            continue  # an imported name, not a module
        seen[name] = path
        parts = name.split(".")
        for i in range(1, len(parts)):  # its packages
            todo.append(".".join(parts[:i]))
        package = name if path.name == "__init__.py" else ".".join(parts[:-1])
        if name != "execengine":
            todo.extend(_imports(path, package))
    return seen


def files_archive() -> tuple[str, bytes]:
    """The file server's modules as a tar archive, and its content hash."""
    root = PACKAGE_DIR.parent
    digest = hashlib.sha256()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, path in sorted(server_modules().items()):
            rel = path.relative_to(root).as_posix()
            # the real package __init__ re-exports everything: the remote gets a bare one
            data = _PACKAGE_DOC.encode() if name == "execengine" else path.read_bytes()
            digest.update(rel.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return digest.hexdigest()[:16], buf.getvalue()


def server_entry(bundle: str) -> str:
    return (f"import sys\nif sys.version_info < {MIN_PYTHON!r}:\n"
            f"    sys.exit('the remote file tools need Python >= "
            f"{'.'.join(map(str, MIN_PYTHON))} on the remote, found ' + sys.version.split()[0])\n"
            f"sys.path.insert(0, {bundle!r})\n"
            f"from {SERVER_MODULE} import main\nsys.exit(main())\n")


def denied_paths(config: Config) -> list[str]:
    """The denied paths as configured (the remote resolves ``~`` to its own user's home)."""
    denied = list(config.files.denied_paths)
    if config.source:
        denied.append(config.source)
    return denied


class RemoteFiles:
    """The file backend of one remote (see :class:`execengine.host.base.FileBackend`)."""

    def __init__(self, host: SshHost) -> None:
        self.host = host
        self._lock = threading.Lock()
        self._bundle: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ids = 0
        self._buf = bytearray()
        self._closed = False

    def install(self) -> str:
        """Install the server's modules for this content hash unless they are there."""
        if self._bundle is None:
            digest, archive = files_archive()
            base = os.path.dirname(self.host.runtime())
            bundle = f"{base}/files-{digest}"
            self.host.connection.check(
                quote([self.host.launcher.python, "-I", "-c", INSTALL_SCRIPT, bundle]),
                input=archive, timeout=120)
            self._bundle = bundle
        return self._bundle

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop()
        bundle = self.install()
        line = (f"exec env -i PATH={REMOTE_PATH} LANG=C.UTF-8 "
                f"{quote([self.host.launcher.python, '-I', '-c', server_entry(bundle)])}")
        argv = self.host.connection.command(line)
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, start_new_session=True,
                                      env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        self._buf = bytearray()
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()  # EOF: the server ends
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            ProcessSet.of_popen(proc).kill()  # ssh and its group
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()

    def run(self, ctx: ToolContext, op: str, args: dict[str, Any],
            settings: FileSettings) -> ToolResult:
        """The call's operation in its task's (remote) working directory."""
        return self.call(op, args, cwd=task_cwd(ctx), denied=denied_paths(ctx.config),
                         settings=settings)

    def call(self, op: str, args: dict[str, Any], *, cwd: str, denied: Sequence[str],
             settings: FileSettings) -> ToolResult:
        """Run ``op`` in ``cwd`` on the remote, refusing ``denied``."""
        request: dict[str, Any] = {
            "op": op, "args": args, "cwd": cwd, "denied": list(denied),
            "settings": {"max_read_chars": settings.max_read_chars,
                         "search_backend": settings.search_backend}}
        with self._lock:
            if self._closed:
                return {"error": "the remote file backend is closed"}
            self._ids += 1
            request["id"] = self._ids
            reused = self._proc is not None
            try:
                reply = self._call(request)
            except RemoteError as exc:
                self._stop()
                if not (reused and op in READ_ONLY):
                    return {"error": f"{op} on the remote failed: {exc}"}
                try:  # a channel of a dropped connection: a read is safe to repeat
                    reply = self._call(request)
                except RemoteError as again:
                    self._stop()
                    return {"error": f"{op} on the remote failed: {again}"}
        if "error" in reply and "result" not in reply:
            return {"error": f"{op} on the remote failed: {reply['error']}"}
        result = reply.get("result")
        return result if isinstance(result, dict) else {"error": "bad reply from the remote"}

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            proc = self._start()
        except (OSError, subprocess.SubprocessError) as exc:
            raise RemoteError(f"cannot start ssh: {exc}") from exc
        assert proc.stdin is not None and proc.stdout is not None
        data = json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass")
        try:
            proc.stdin.write(data + b"\n")
            proc.stdin.flush()
        except OSError as exc:
            raise RemoteError(self._why(proc, "the channel closed")) from exc
        line = self._readline(proc, time.monotonic() + CALL_TIMEOUT)
        reply = json.loads(line.decode("utf-8", "surrogatepass"))
        if not isinstance(reply, dict) or reply.get("id") != request["id"]:
            raise RemoteError("the remote file server answered out of order")
        return reply

    def _readline(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes:
        """One reply line, read unbuffered from the channel (bounded by ``deadline``)."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RemoteError(f"no answer within {CALL_TIMEOUT:g}s")
                if not sel.select(min(left, 1.0)):
                    continue
                data = os.read(fd, 1 << 20)
                if not data:
                    raise RemoteError(self._why(proc, "the channel closed"))
                self._buf += data
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        return line

    @staticmethod
    def _why(proc: subprocess.Popen[bytes], what: str) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(2)
        said = b""
        if proc.stderr is not None and proc.poll() is not None:
            with contextlib.suppress(OSError, ValueError):
                said = proc.stderr.read()
        text = said.decode("utf-8", "replace").strip()
        return f"{what}: {text[-500:]}" if text else what

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop()
