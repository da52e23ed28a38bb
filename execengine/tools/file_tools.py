"""read_file and write_file (toolset ``file``).

Paths resolve against the task's working directory; protected locations are refused (see
:mod:`execengine.fileops.paths`). Every failure is a result dict with an ``"error"`` key, so
scripts calling through ``hermes_tools`` get a value, not an exception.
"""

from __future__ import annotations

from functools import partial

from execengine.discovery import ToolSpecs
from execengine.host.base import run_operation
from execengine.host.factory import files_available
from execengine.policy import ToolPolicy

specs = ToolSpecs()

READ_SCHEMA = {
    "description": "Read a text file with line numbers (each line as 'N|text'). Reads "
    "`limit` lines from line `offset` (1-based); the result gives total_lines and, when "
    "there is more, next_offset to continue. Binary files are reported, not dumped. Use "
    "this instead of cat/head/tail in the terminal.",
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, absolute or relative to "
                     "the working directory"},
            "offset": {"type": "integer", "description": "First line to read (1-based)",
                       "default": 1, "minimum": 1},
            "limit": {"type": "integer", "description": "Number of lines to read",
                      "default": 500, "minimum": 1},
        },
        "required": ["path"],
    },
}

WRITE_SCHEMA = {
    "description": "Write a whole text file, replacing it if it exists; parent folders are "
    "created and the write is atomic. For small edits of an existing file use patch.",
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, absolute or relative to "
                     "the working directory"},
            "content": {"type": "string", "description": "The complete new content"},
        },
        "required": ["path", "content"],
    },
}

#: scripts may call both; both may join a parallel batch (a writer only when no other call
#: of the batch touches its path)
READER = ToolPolicy(script_callable=True, read_only=True, parallel_safe=True)
WRITER = ToolPolicy(script_callable=True, parallel_safe=True)

# each tool's handler is its file operation, run on the registry's host
specs.register("read_file", "file", READ_SCHEMA, partial(run_operation, "read_file"),
               check_fn=files_available, emoji="📖", max_result_size_chars=120_000, policy=READER)
specs.register("write_file", "file", WRITE_SCHEMA, partial(run_operation, "write_file"),
               check_fn=files_available, emoji="✍️", policy=WRITER)
