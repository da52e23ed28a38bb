"""Close-name suggestions for a path that does not exist."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from execengine.fileops.paths import display_path

#: entries looked at when searching the working directory for the same file name
_SCAN_LIMIT = 5000
_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".tox"})


def suggest_paths(missing: Path, cwd: str, *, limit: int = 5) -> list[str]:
    """Existing paths the caller probably meant, best first (relative to ``cwd`` if below)."""

    found: list[str] = []
    # 1. the deepest existing ancestor: names close to the next missing component
    parent = missing.parent
    wanted = missing.name
    while not parent.is_dir() and parent != parent.parent:
        wanted, parent = parent.name, parent.parent
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        names = []
    for name in difflib.get_close_matches(wanted, names, n=limit, cutoff=0.6):
        found.append(str(parent / name))
    lowered = {n.lower(): n for n in names}
    if wanted.lower() in lowered and str(parent / lowered[wanted.lower()]) not in found:
        found.insert(0, str(parent / lowered[wanted.lower()]))
    # 2. the same file name elsewhere under the working directory
    if len(found) < limit and os.path.isdir(cwd):
        seen = 0
        for root, dirs, files in os.walk(cwd):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            seen += len(files) + len(dirs)
            if missing.name in files:
                hit = os.path.join(root, missing.name)
                if hit not in found:
                    found.append(hit)
            if seen > _SCAN_LIMIT or len(found) >= limit:
                break
    return [display_path(p, cwd) for p in found[:limit]]
