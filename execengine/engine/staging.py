"""Where a child's files live: a staging directory per execution, a runtime per engine.

Layout (the contract with the child runtime in ``sandbox/``)::

    <staging>/script.py                    the user's code
    <runtime>/_execengine/                 a copy of sandbox/, compiled once
    <runtime>/stubs/<hash>/hermes_tools.py the rendered stub of one tool set, compiled once

``<staging>`` is private (0700) and is removed on close, whatever the outcome; the stub's
directory goes first on the child's ``PYTHONPATH``. Both names carry the owning host's pid
and start time, so an engine started after a host was killed removes what that host left
(:func:`execengine.hostdirs.sweep`). ``<runtime>`` is shared by every execution of one engine (it
holds no per-run data), read-only for children (0755 / 0644) and removed when the engine
closes; copying and compiling the runtime once saves every execution that work.
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import os
import py_compile
import shutil
import tempfile
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator

from execengine._resources import sandbox_dir
from execengine._runtime import RUNTIME_PACKAGE, entry_program
from execengine.hostdirs import RUNTIME_PREFIX as RUNTIME_PREFIX  # (defined there: see it)
from execengine.hostdirs import STAGING_PREFIX as STAGING_PREFIX
from execengine.hostdirs import make_dir

#: the child's ``python -c`` program (``-c`` rather than ``-m``: no runpy at start-up);
#: the same text as ``sandbox/bootstrap.py``'s ``ENTRY``
BOOTSTRAP_ENTRY = entry_program("bootstrap")
#: the project directory in project mode, which the runtime puts last on ``sys.path``
#: (``sandbox/bootstrap.py``'s ``ENV_PROJECT_DIR``)
PROJECT_DIR_VAR = "EXECENGINE_PROJECT_DIR"
#: what tracebacks call a script's code (``sandbox/bootstrap.py``'s ``ENV_SCRIPT_NAME``),
#: and the name of a model's code: never the staging copy's path
SCRIPT_NAME_VAR = "EXECENGINE_SCRIPT_NAME"
SCRIPT_NAME = "<execute_code>"


class Staging:
    """A context manager; :meth:`close` is idempotent."""

    def __init__(self, code: str, *, base: str | None = None) -> None:
        self.path = make_dir(STAGING_PREFIX, base)
        try:
            self._write("script.py", code)
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        self.closed = False

    @property
    def script_path(self) -> str:
        return os.path.join(self.path, "script.py")

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.path, name), "w", encoding="utf-8",
                  errors="surrogatepass") as f:
            f.write(text)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()



#: stub directories kept per runtime (least recently used beyond this are removed)
MAX_STUBS = 64


class Runtime:
    """The child runtime, copied and byte-compiled once (lazily); idempotent :meth:`close`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None
        self._closed = False
        self._stubs: OrderedDict[str, str] = OrderedDict()
        self._stub_users: Counter[str] = Counter()

    @property
    def path(self) -> str:
        """The directory to put on ``PYTHONPATH`` (it contains ``_execengine/``)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the runtime directory is closed")
            if self._path is None:
                path = make_dir(RUNTIME_PREFIX)
                try:
                    target = os.path.join(path, RUNTIME_PACKAGE)
                    shutil.copytree(sandbox_dir(), target,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                    compileall.compile_dir(target, quiet=1)
                    for root, _dirs, files in os.walk(path):
                        os.chmod(root, 0o755)
                        for name in files:
                            os.chmod(os.path.join(root, name), 0o644)
                except BaseException:
                    shutil.rmtree(path, ignore_errors=True)
                    raise
                self._path = path
            return self._path

    @contextlib.contextmanager
    def stub_dir(self, source: str) -> Iterator[str]:
        """The directory holding ``hermes_tools.py`` with this source, written and
        byte-compiled on first use; not removed while in use."""
        key = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        root = self.path
        with self._lock:
            path = self._stubs.get(key)
            if path is not None:
                self._stubs.move_to_end(key)
            self._stub_users[key] += 1
        try:
            if path is None:
                path = self._write_stub(root, key, source)
            yield path
        finally:
            with self._lock:
                self._stub_users[key] -= 1
                if not self._stub_users[key]:
                    del self._stub_users[key]
                stale = [k for k in list(self._stubs)[:max(0, len(self._stubs) - MAX_STUBS)]
                         if k not in self._stub_users]
                for k in stale:
                    shutil.rmtree(self._stubs.pop(k), ignore_errors=True)

    def _write_stub(self, root: str, key: str, source: str) -> str:
        stubs = os.path.join(root, "stubs")
        os.makedirs(stubs, mode=0o755, exist_ok=True)
        path = os.path.join(stubs, key)
        with self._lock:
            if key in self._stubs:  # another execution wrote it meanwhile
                return self._stubs[key]
            tmp = tempfile.mkdtemp(prefix=f".{key}-", dir=stubs)
            try:
                target = os.path.join(tmp, "hermes_tools.py")
                with open(target, "w", encoding="utf-8", errors="surrogatepass") as f:
                    f.write(source)
                py_compile.compile(target, doraise=True)
                for dirpath, _dirs, files in os.walk(tmp):
                    os.chmod(dirpath, 0o755)
                    for name in files:
                        os.chmod(os.path.join(dirpath, name), 0o644)
                os.rename(tmp, path)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            self._stubs[key] = path
            return path

    def close(self) -> None:
        with self._lock:
            path, self._path, self._closed = self._path, None, True
            self._stubs.clear()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
