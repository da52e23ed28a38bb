"""Unified diffs of what an edit changed, for the tool result."""

from __future__ import annotations

import difflib


def unified(before: str, after: str, shown: str, *, created: bool = False,
            deleted: bool = False) -> str:
    """A ``git diff``-style unified diff from ``before`` to ``after`` of file ``shown``."""
    old_label = "/dev/null" if created else f"a/{shown}"
    new_label = "/dev/null" if deleted else f"b/{shown}"
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        old_label, new_label, n=3,
    )
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)
