"""Run the real command line: ``python -m execengine ARGS`` in a child interpreter, with
this checkout first on ``PYTHONPATH``, no user configuration (``HOME`` in a temporary
folder, ``$EXECENGINE_CONFIG`` unset) and a bounded wait."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "EXECENGINE_CONFIG"}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env.update(extra or {})
    return env


def cli(home: Path, *args: str, cwd: Path | None = None, stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 50) -> subprocess.CompletedProcess[str]:
    """``execengine ARGS`` run to its end; ``home`` is an empty folder of the test's."""
    return subprocess.run([sys.executable, "-m", "execengine", *args], capture_output=True,
                          text=True, input=stdin, cwd=cwd or home, env=cli_env(home, env),
                          timeout=timeout)
