"""The staging directory of one execution: the script, the rendered stub, the runtime.

Layout (the contract with the child runtime in ``sandbox/``)::

    <staging>/script.py          the user's code
    <staging>/hermes_tools.py    the rendered stub
    <staging>/_execengine/       a copy of sandbox/

``<staging>`` is private (0700), goes on the child's ``PYTHONPATH`` and is removed on close,
whatever the outcome.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from execengine._resources import sandbox_dir

RUNTIME_PACKAGE = "_execengine"


class Staging:
    """A context manager; :meth:`close` is idempotent."""

    def __init__(self, code: str, stub_source: str, *, base: str | None = None) -> None:
        self.path = tempfile.mkdtemp(prefix="execengine-run-", dir=base)
        try:
            os.chmod(self.path, 0o700)
            shutil.copytree(sandbox_dir(), os.path.join(self.path, RUNTIME_PACKAGE),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
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
