"""Where the templates (``stubs/``) and the child runtime (``sandbox/``) are.

In a built wheel they ship inside the package as ``execengine/_data/<name>``; in a source
checkout (editable install) they sit at the top of the repository. The wheel location is
tried first, so an installed package never reaches outside itself.

Also the one host resource the engine sizes itself by: the CPUs it may use.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from execengine.errors import SandboxError

_PACKAGE = Path(__file__).resolve().parent


@cache
def resource_dir(name: str) -> Path:
    """``stubs`` or ``sandbox``: the folder, or :class:`SandboxError` if it is missing."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise SandboxError(f"execengine is installed without its {name!r} folder (looked in "
                       f"{_PACKAGE / '_data' / name} and {_PACKAGE.parent / name})")


def stubs_dir() -> Path:
    return resource_dir("stubs")


def sandbox_dir() -> Path:
    return resource_dir("sandbox")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where there is one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)
