"""patch (toolset ``file``): targeted edits by string replacement or a unified diff.

``mode="replace"`` swaps ``old_string`` for ``new_string`` in one file (see
:mod:`execengine.fileops.replace`); ``mode="patch"`` applies a multi-file unified diff, all
or nothing (see :mod:`execengine.fileops.patching`). Both return ``{"success": True, "diff":
...}`` or ``{"success": False, "error": ...}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from execengine.context import ToolContext
from execengine.discovery import ToolSpecs
from execengine.fileops import FileOpError
from execengine.fileops.calls import filesystem_available, scope_of, string_arg
from execengine.fileops.diffs import unified
from execengine.fileops.patching import apply_patch
from execengine.fileops.paths import Scope
from execengine.fileops.replace import replace
from execengine.fileops.suggest import suggest_paths
from execengine.fileops.textio import atomic_write, read_text
from execengine.policy import ToolPolicy

specs = ToolSpecs()

MODES = ("replace", "patch")


def patch(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    try:
        mode = args.get("mode") or "replace"
        if mode not in MODES:
            raise FileOpError(f"mode must be 'replace' or 'patch', got {mode!r}")
        with scope_of(ctx) as scope:
            if mode == "patch":
                return apply_patch(scope, string_arg(args, "patch"))
            return _replace(args, scope)
    except FileOpError as exc:
        return {"success": False, **exc.to_dict()}


def _replace(args: dict[str, Any], scope: Scope) -> dict[str, Any]:
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
        suggestions = suggest_paths(Path(scope.lexical(path)), scope.cwd)
        hint = f"; did you mean: {', '.join(suggestions)}" if suggestions else ""
        raise FileOpError(f"File not found: {shown!r}{hint}", suggestions=suggestions)
    before = read_text(path, "patch", strict=True)
    done = replace(before, old, new, replace_all=replace_all, shown=shown)
    atomic_write(path, done.text.encode("utf-8"))
    result: dict[str, Any] = {
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


PATCH_SCHEMA = {
    "description": "Edit files. mode='replace' (default): replace old_string with new_string "
    "in the file at path; old_string must match exactly once (include surrounding lines to "
    "make it unique) unless replace_all is true; small whitespace differences are tolerated "
    "and reported. mode='patch': apply a unified diff (---/+++ headers, @@ hunks) that may "
    "touch several files, create them (--- /dev/null) or delete them (+++ /dev/null); if any "
    "hunk fails, no file is changed. Returns the diff of what changed.",
    "parameters": {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": list(MODES), "default": "replace",
                     "description": "replace: old_string -> new_string; patch: apply a diff"},
            "path": {"type": "string", "description": "File to edit (mode='replace')"},
            "old_string": {"type": "string", "description": "Exact text to find "
                           "(mode='replace')"},
            "new_string": {"type": "string", "description": "Replacement text "
                           "(mode='replace'); empty to delete"},
            "replace_all": {"type": "boolean", "default": False,
                            "description": "Replace every occurrence (mode='replace')"},
            "patch": {"type": "string", "description": "Unified diff text (mode='patch')"},
        },
    },
}

specs.register("patch", "file", PATCH_SCHEMA, patch, check_fn=filesystem_available, emoji="🩹",
               policy=ToolPolicy(script_callable=True, parallel_safe=True))
