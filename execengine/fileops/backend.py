"""Where the file tools' operations run: the file backend seam.

The tools (:mod:`execengine.tools.file_tools`, ``patch_tool``, ``search_tool``) call
:func:`run_operation`, which hands the operation to the registry's host's
:class:`FileBackend`: :class:`LocalFiles` runs the operation of :mod:`.ops` here, on the
call's :class:`~execengine.fileops.paths.Scope`; a remote host's backend
(:class:`execengine.remote.files.RemoteFiles`) sends the same operation, the task's
working directory and the denied paths to the remote's file server, which runs the same
code there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from execengine.fileops.calls import scope_of
from execengine.fileops.ops import OPERATIONS, FileSettings, ToolResult

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.context import ToolContext


class FileBackend(Protocol):
    """Runs one file operation of a tool call; returns the tool's result."""

    def run(self, ctx: ToolContext, op: str, args: dict[str, Any],
            settings: FileSettings) -> ToolResult: ...


class LocalFiles:
    """Operations on this machine, within the call's scope (its policy's roots)."""

    def run(self, ctx: ToolContext, op: str, args: dict[str, Any],
            settings: FileSettings) -> ToolResult:
        with scope_of(ctx) as scope:
            return OPERATIONS[op](scope, args, settings)


def denied_paths(config: Config) -> list[str]:
    """The denied paths as configured (a remote resolves ``~`` to its own user's home)."""
    denied = list(config.files.denied_paths)
    if config.source:
        denied.append(config.source)
    return denied


def run_operation(ctx: ToolContext, op: str, args: dict[str, Any]) -> ToolResult:
    """Run file operation ``op`` (a tool name of :data:`OPERATIONS`) for this call."""
    settings = FileSettings(max_read_chars=ctx.config.files.max_read_chars,
                            search_backend=ctx.call.search_backend,
                            interrupt=ctx.call.interrupt)
    return ctx.services.host.files().run(ctx, op, args, settings)
