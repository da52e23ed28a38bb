"""What the file tool handlers share: argument checks, the call's scope, availability."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from execengine.confine.policy import ExecutionPolicy, policy_of
from execengine.fileops.args import int_arg, string_arg
from execengine.fileops.paths import Scope
from execengine.workdirs import task_cwd

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.context import ToolContext

__all__ = ["int_arg", "local_folder_available", "scope_of", "string_arg"]


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
