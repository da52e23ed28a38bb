"""read_file and write_file (toolset ``file``).

Paths resolve against the task's working directory; protected locations are refused (see
:mod:`execengine.fileops.paths`). Every failure is a result dict with an ``"error"`` key, so
scripts calling through ``hermes_tools`` get a value, not an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from execengine.context import ToolContext
from execengine.discovery import ToolSpecs
from execengine.fileops import FileOpError
from execengine.fileops.calls import filesystem_available, scope_of, string_arg
from execengine.fileops.paths import Scope
from execengine.fileops.reading import check_window, read_window
from execengine.fileops.suggest import suggest_paths
from execengine.fileops.textio import atomic_write
from execengine.policy import ToolPolicy

specs = ToolSpecs()

ToolResult = dict[str, Any]


def guarded(fn: Callable[[dict[str, Any], ToolContext], ToolResult]
            ) -> Callable[[dict[str, Any], ToolContext], ToolResult]:
    """Turn :class:`FileOpError` into the tool's error result."""

    def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return fn(args, ctx)
        except FileOpError as exc:
            return exc.to_dict()

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


@guarded
def read_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    with scope_of(ctx) as scope:
        return _read(args, ctx, scope)


def _read(args: dict[str, Any], ctx: ToolContext, scope: Scope) -> ToolResult:
    raw = string_arg(args, "path")
    offset, limit = check_window(args.get("offset", 1), args.get("limit", 500))
    path, shown = scope.path(raw, "reading")
    if not path.exists():
        suggestions = suggest_paths(path, scope.cwd)
        hint = f"; did you mean: {', '.join(suggestions)}" if suggestions else ""
        raise FileOpError(f"File not found: {shown!r}{hint}", suggestions=suggestions)
    return read_window(path, shown, offset, limit, ctx.config.files.max_read_chars).to_dict()


@guarded
def write_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    with scope_of(ctx) as scope:
        return _write(args, scope)


def _write(args: dict[str, Any], scope: Scope) -> ToolResult:
    raw = string_arg(args, "path")
    content = string_arg(args, "content")
    path, shown = scope.path(raw, "writing")
    data = content.encode("utf-8", errors="surrogatepass")
    created = atomic_write(path, data)
    return {
        "path": shown,
        "bytes_written": len(data),
        "lines": content.count("\n") + (0 if content.endswith("\n") or not content else 1),
        "created": created,
    }


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

specs.register("read_file", "file", READ_SCHEMA, read_file, check_fn=filesystem_available,
               emoji="📖", max_result_size_chars=120_000, policy=READER)
specs.register("write_file", "file", WRITE_SCHEMA, write_file, check_fn=filesystem_available,
               emoji="✍️", policy=WRITER)
