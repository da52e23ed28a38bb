"""patch (toolset ``file``): targeted edits by string replacement or a unified diff.

``mode="replace"`` swaps ``old_string`` for ``new_string`` in one file (see
:mod:`execengine.fileops.replace`); ``mode="patch"`` applies a multi-file unified diff, all
or nothing (see :mod:`execengine.fileops.patching`). Both return ``{"success": True, "diff":
...}`` or ``{"success": False, "error": ...}``.
"""

from __future__ import annotations

from functools import partial

from execengine.discovery import ToolSpecs
from execengine.fileops.ops import PATCH_MODES
from execengine.host.base import run_operation
from execengine.host.factory import files_available
from execengine.policy import ToolPolicy

specs = ToolSpecs()

MODES = PATCH_MODES

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

specs.register("patch", "file", PATCH_SCHEMA, partial(run_operation, "patch"),
               check_fn=files_available, emoji="🩹",
               policy=ToolPolicy(script_callable=True, parallel_safe=True))
