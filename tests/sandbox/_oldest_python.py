"""Finding the oldest interpreter the child runtime supports (3.8) on this machine."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

#: an explicit interpreter for the real 3.8 run (CI sets it when it can install one)
ENV = "EXECENGINE_TEST_PYTHON38"


def python38() -> Path | None:
    """A working Python 3.8: $EXECENGINE_TEST_PYTHON38, ``python3.8`` on PATH, or one that
    pyenv installed; None when there is none (the syntax check still runs)."""
    candidates = [os.environ.get(ENV) or "", shutil.which("python3.8") or "",
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))]
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30, check=False)
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 8)":
            return Path(candidate)
    return None
