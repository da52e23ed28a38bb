"""Where the file tools' operations run: the file backend seam.

The tools (:mod:`execengine.tools.file_tools`, ``patch_tool``, ``search_tool``) call
:func:`run_operation`, which hands the operation to the registry's host's
:class:`FileBackend`: :class:`LocalFiles` runs the operation of :mod:`.ops` here, on the
call's :class:`~execengine.fileops.paths.Scope`; a remote host's backend
(:class:`execengine.remote.files.RemoteFiles`) sends the same operation, the task's
working directory and the denied paths to the remote's file server, which runs the same
code there.

What the tool handlers share lives here too: the call's scope (:func:`scope_of`) and the
local working folder's availability check.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from execengine.confine.policy import ExecutionPolicy, policy_of
from execengine.fileops.ops import OPERATIONS, FileSettings, ToolResult
from execengine.fileops.paths import Scope
from execengine.workdirs import task_cwd

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


# -- the call's scope ----------------------------------------------------------------------

def scope_of(ctx: ToolContext) -> Scope:
    """The call's working directory (:func:`task_cwd`), the config's path guard and, for a
    call under a confining execution policy, its roots. Use it as a context manager."""
    cwd = task_cwd(ctx)
    policy = policy_of(ctx)
    if policy is None and ctx.origin == "agent" and ctx.config.policy.agent_calls == "confined":
        policy = ExecutionPolicy.for_execution(ctx.config, cwd=cwd, level="none", agent=True)
    return Scope.for_call(ctx.config, cwd, policy)


def local_folder_available(config: Config) -> bool | str:
    """The working directory of a local host must exist and be readable."""
    base = config.terminal.cwd
    folder = os.path.expanduser(base) if base else os.getcwd()
    if not os.path.isdir(folder):
        return f"working directory {folder!r} does not exist"
    if not os.access(folder, os.R_OK | os.X_OK):
        return f"working directory {folder!r} is not readable"
    return True
