"""Which Python runs the script.

``strict`` mode: the host's interpreter. ``project`` mode: ``code_execution.python`` when
set, else ``$VIRTUAL_ENV`` then ``$CONDA_PREFIX`` (``bin/python3``, ``bin/python``), each
used only if it runs and is Python >= 3.8; else the host's. A probe runs the candidate once
(bounded); verdicts are cached per path and modification time.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping

log = logging.getLogger(__name__)

MIN_VERSION = (3, 8)
PROBE_TIMEOUT = 5.0

_cache: dict[tuple[str, int], bool] = {}
_lock = threading.Lock()


def host_python() -> str:
    return os.path.abspath(sys.executable)  # not realpath: a venv's symlink is the venv


def probe(path: str) -> bool:
    """True if ``path`` is an executable Python >= 3.8 (cached)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    key = (os.path.abspath(path), st.st_mtime_ns)
    with _lock:
        if key in _cache:
            return _cache[key]
    ok = _run_probe(path)
    with _lock:
        _cache[key] = ok
    return ok


def _run_probe(path: str) -> bool:
    if not os.access(path, os.X_OK):
        return False
    try:
        out = subprocess.run(
            [path, "-I", "-S", "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, check=False,
        )
        major, minor = (int(x) for x in out.stdout.split())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and (major, minor) >= MIN_VERSION


def candidates(environ: Mapping[str, str], configured: str | None) -> list[str]:
    out: list[str] = []
    if configured:
        out.append(os.path.abspath(os.path.expanduser(configured)))
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = environ.get(var)
        if prefix:
            out += [os.path.join(prefix, "bin", "python3"), os.path.join(prefix, "bin", "python")]
    return out


def choose(mode: str, *, configured: str | None = None,
           environ: Mapping[str, str] | None = None) -> str:
    """The absolute interpreter path for ``mode``."""
    if mode == "project":
        for path in candidates(os.environ if environ is None else environ, configured):
            if probe(path):
                return os.path.abspath(path)
            log.debug("interpreter %s unusable (missing, not runnable or < 3.8)", path)
    return host_python()
