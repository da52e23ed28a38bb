"""Where the file tools' operations run: the file backend seam.

The tools (:mod:`execengine.tools.file_tools`, ``patch_tool``, ``search_tool``) call
:func:`run_operation`. With the local terminal backend it runs the operation of
:mod:`.ops` here, on the call's :class:`Scope`; with ``terminal.backend: ssh`` it sends the
same operation, the task's (remote) working directory and the denied paths to the remote's
file server (:class:`execengine.remote.files.RemoteFiles`), which runs the same code there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from execengine.fileops.calls import scope_of
from execengine.fileops.ops import OPERATIONS, FileSettings, ToolResult
from execengine.remote.host import REMOTE, RemoteHost
from execengine.workdirs import task_cwd

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.context import ToolContext


class FileBackend(Protocol):
    """Runs one file operation somewhere else (a remote); returns the tool's result."""

    def run(self, op: str, args: dict[str, Any], *, cwd: str, denied: Sequence[str],
            settings: FileSettings) -> ToolResult: ...


def denied_paths(config: Config) -> list[str]:
    """The denied paths as configured (a remote resolves ``~`` to its own user's home)."""
    denied = list(config.files.denied_paths)
    if config.source:
        denied.append(config.source)
    return denied


def remote_files(ctx: ToolContext) -> FileBackend | None:
    """The remote's file backend when the terminal backend is remote, else None."""
    if ctx.config.terminal.backend != "ssh":
        return None
    return ctx.service(REMOTE, RemoteHost).files()


def run_operation(ctx: ToolContext, op: str, args: dict[str, Any]) -> ToolResult:
    """Run file operation ``op`` (a tool name of :data:`OPERATIONS`) for this call."""
    settings = FileSettings(max_read_chars=ctx.config.files.max_read_chars,
                            search_backend=ctx.call.search_backend,
                            interrupt=ctx.call.interrupt)
    remote = remote_files(ctx)
    if remote is not None:
        return remote.run(op, args, cwd=task_cwd(ctx), denied=denied_paths(ctx.config),
                          settings=settings)
    with scope_of(ctx) as scope:
        return OPERATIONS[op](scope, args, settings)
