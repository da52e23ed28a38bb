"""Where a child's files live: a staging directory per execution, a runtime per engine.

Layout (the contract with the child runtime in ``sandbox/``)::

    <staging>/script.py          the user's code
    <staging>/hermes_tools.py    the rendered stub
    <runtime>/_execengine/       a copy of sandbox/, compiled once

``<staging>`` is private (0700), goes first on the child's ``PYTHONPATH`` and is removed on
close, whatever the outcome. Both names carry the owning host's pid and start time, so an
engine started after a host was killed removes what that host left
(:func:`execengine.hostdirs.sweep`). ``<runtime>`` is shared by every execution of one engine (it
holds no per-run data), read-only for children (0755 / 0644) and removed when the engine
closes; copying and compiling the runtime once saves every execution that work.
"""

from __future__ import annotations

import compileall
import os
import shutil
import threading

from execengine._resources import sandbox_dir
from execengine.hostdirs import make_dir

RUNTIME_PACKAGE = "_execengine"
#: the child's ``python -c`` program (``-c`` rather than ``-m``: no runpy at start-up);
#: the same text as ``sandbox/bootstrap.py``'s ``ENTRY``
BOOTSTRAP_ENTRY = f"import sys; from {RUNTIME_PACKAGE}.bootstrap import main; sys.exit(main())"
#: directory name prefixes (followed by the owner tag, see :mod:`execengine.hostdirs`)
STAGING_PREFIX = "execengine-run-"
RUNTIME_PREFIX = "execengine-runtime-"


class Staging:
    """A context manager; :meth:`close` is idempotent."""

    def __init__(self, code: str, stub_source: str, *, base: str | None = None) -> None:
        self.path = make_dir(STAGING_PREFIX, base)
        try:
            self._write("hermes_tools.py", stub_source)
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



class Runtime:
    """The child runtime, copied and byte-compiled once (lazily); idempotent :meth:`close`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None
        self._closed = False

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

    def close(self) -> None:
        with self._lock:
            path, self._path, self._closed = self._path, None, True
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)
