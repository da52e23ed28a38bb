"""``patch`` in patch mode: a multi-file patch, validated whole before any write.

Unified diffs (:mod:`.udiff`) and the ``*** Begin Patch`` envelope (:mod:`.v4a`) are read
into the same :class:`FilePatch` values and applied the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from execengine.errors import FileOpError
from execengine.fileops import udiff, v4a
from execengine.fileops.commit import Change, commit_all
from execengine.fileops.diffs import unified
from execengine.fileops.paths import Scope
from execengine.fileops.textio import read_bytes, read_text


@dataclass(frozen=True)
class FileOutcome:
    path: str
    action: str
    hunks: int


def apply_patch(scope: Scope, text: str) -> dict[str, Any]:
    """Apply every file of the patch ``text`` or none; returns the tool result."""
    if not isinstance(text, str) or not text.strip():
        raise FileOpError("mode='patch' needs the patch text in the 'patch' argument")
    changes: list[Change] = []
    outcomes: list[FileOutcome] = []
    diffs: list[str] = []
    claimed: set[str] = set()
    for fp in (v4a.parse(text) if v4a.is_v4a(text) else udiff.parse(text)):
        src = scope.path(fp.old_path, "patching")[0] if fp.old_path else None
        dst = scope.path(fp.new_path, "patching")[0] if fp.new_path else None
        # the paths as named: under a confinement each is anchored on a descriptor of its
        # own, so the same file named twice gives two different anchored paths
        same = src is not None and dst is not None and scope.lexical(src) == scope.lexical(dst)
        for p in (src, dst):
            if p is not None and scope.lexical(p) in claimed:
                raise FileOpError(f"patch changes {scope.show(p)!r} twice; merge its hunks into "
                                  "one file section")
        if src is None:
            assert dst is not None
            if dst.exists() and dst.stat().st_size > 0:
                raise FileOpError(f"patch creates {scope.show(dst)!r}, which already exists; "
                                  "no file was changed")
            before = ""
        else:
            if not src.exists():
                raise FileOpError(f"patch modifies {scope.show(src)!r}, which does not exist; "
                                  "no file was changed")
            before = read_text(src, "patch", strict=True)
        after = "" if fp.whole else udiff.apply(fp, before)
        shown = scope.show(dst or src)  # type: ignore[arg-type]
        if dst is None:
            assert src is not None
            if after.strip():
                raise FileOpError(f"patch deletes {shown!r} but its hunks do not remove all "
                                  "of its content; no file was changed")
            changes.append(Change(src, None, read_bytes(src, "patch")))
        else:
            original = read_bytes(dst, "patch") if dst.exists() else None
            changes.append(Change(dst, after.encode("utf-8"), original))
            if src is not None and not same:
                changes.append(Change(src, None, read_bytes(src, "patch")))
        claimed.update(scope.lexical(p) for p in (src, dst) if p is not None)
        outcomes.append(FileOutcome(shown, fp.action, len(fp.hunks)))
        diffs.append(unified(before, after, shown, created=src is None, deleted=dst is None))
    commit_all(changes)
    return {
        "success": True,
        "files": [{"path": o.path, "action": o.action, "hunks": o.hunks} for o in outcomes],
        "diff": "".join(diffs),
    }
