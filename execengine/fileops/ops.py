"""The file tools' operations on a :class:`Scope`: read_file, write_file, patch, search_files.

Each takes the tool's arguments and returns the tool's result dict; a :class:`FileOpError`
becomes ``{"error": ...}`` here (``patch`` adds ``"success": False``). They run wherever
the files are: in the engine for the local backend, on the remote for ``ssh`` (see
:mod:`.serve`), so both give the same results, messages and path rules.

``read_file`` (a window of numbered lines) is :mod:`.reading`'s; the table
:data:`OPERATIONS` names all four.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from execengine.errors import FileOpError
from execengine.fileops.diffs import unified
from execengine.fileops.patching import apply_patch
from execengine.fileops.paths import Scope, string_arg
from execengine.fileops.reading import not_found, read_file
from execengine.fileops.replace import replace
from execengine.fileops.search import search
from execengine.fileops.textio import atomic_write, read_text

ToolResult = dict[str, Any]
PATCH_MODES = ("replace", "patch")


@dataclass(frozen=True)
class FileSettings:
    """What an operation needs of the config and the call besides its scope."""

    max_read_chars: int = 100_000
    search_backend: str = "auto"
    #: set when the call is to stop (the call's interrupt: the execution that made it
    #: ended); long reads look at it between chunks
    interrupt: threading.Event | None = None

    def cancelled(self) -> bool:
        return self.interrupt is not None and self.interrupt.is_set()


def write_file(scope: Scope, args: dict[str, Any], settings: FileSettings) -> ToolResult:
    try:
        raw = string_arg(args, "path")
        content = string_arg(args, "content")
        path, shown = scope.path(raw, "writing")
        data = content.encode("utf-8", errors="surrogatepass")
        created = atomic_write(path, data)
    except FileOpError as exc:
        return exc.to_dict()
    return {
        "path": shown,
        "bytes_written": len(data),
        "lines": content.count("\n") + (0 if content.endswith("\n") or not content else 1),
        "created": created,
    }


def patch(scope: Scope, args: dict[str, Any], settings: FileSettings) -> ToolResult:
    try:
        mode = args.get("mode") or "replace"
        if mode not in PATCH_MODES:
            raise FileOpError(f"mode must be 'replace' or 'patch', got {mode!r}")
        if mode == "patch":
            return apply_patch(scope, string_arg(args, "patch"))
        return _replace(scope, args)
    except FileOpError as exc:
        return {"success": False, **exc.to_dict()}


def _replace(scope: Scope, args: dict[str, Any]) -> ToolResult:
    if args.get("path") is None:
        raise FileOpError("mode='replace' needs path, old_string and new_string")
    raw = string_arg(args, "path")
    old = string_arg(args, "old_string")
    new = string_arg(args, "new_string")
    replace_all = args.get("replace_all", False)
    if not isinstance(replace_all, bool):
        raise FileOpError(f"replace_all must be true or false, got {replace_all!r}")
    path, shown = scope.path(raw, "patching")
    if not path.exists():
        raise not_found(path, shown, scope)
    before = read_text(path, "patch", strict=True)
    done = replace(before, old, new, replace_all=replace_all, shown=shown)
    atomic_write(path, done.text.encode("utf-8"))
    result: ToolResult = {
        "success": True,
        "path": shown,
        "replacements": done.count,
        "lines": list(done.lines),
        "match": done.match,
        "diff": unified(before, done.text, shown),
    }
    if done.match != "exact":
        result["note"] = (f"old_string did not match exactly; matched with {done.match}. "
                          "Check the diff.")
    return result


def search_files(scope: Scope, args: dict[str, Any], settings: FileSettings) -> ToolResult:
    try:
        # a confined search runs the Python walk, whose every open is verified
        # (ripgrep would open files by path in another process)
        backend = "python" if scope.confinement else settings.search_backend
        return search(scope, args, backend=backend)
    except FileOpError as exc:
        return exc.to_dict()


Operation = Callable[[Scope, dict[str, Any], FileSettings], ToolResult]
#: every operation by tool name
OPERATIONS: dict[str, Operation] = {
    "read_file": read_file,
    "write_file": write_file,
    "patch": patch,
    "search_files": search_files,
}
