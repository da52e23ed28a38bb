"""What the file tool handlers share: argument checks, the call's scope, availability."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from execengine.confine.policy import ExecutionPolicy, policy_of
from execengine.errors import FileOpError
from execengine.fileops.paths import Scope
from execengine.workdirs import task_cwd

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.context import ToolContext


def scope_of(ctx: ToolContext) -> Scope:
    """The call's working directory (:func:`task_cwd`), the config's path guard and, for a
    call under a confining execution policy, its roots. Use it as a context manager."""
    cwd = task_cwd(ctx)
    policy = policy_of(ctx)
    if policy is None and ctx.origin == "agent" and ctx.config.policy.agent_calls == "confined":
        policy = ExecutionPolicy.for_execution(ctx.config, cwd=cwd, level="none", agent=True)
    return Scope.for_call(ctx.config, cwd, policy)


def filesystem_available(config: Config) -> bool | str:
    """Availability check of the file tools: the working directory must exist."""
    base = config.terminal.cwd
    folder = os.path.expanduser(base) if base else os.getcwd()
    if not os.path.isdir(folder):
        return f"working directory {folder!r} does not exist"
    if not os.access(folder, os.R_OK | os.X_OK):
        return f"working directory {folder!r} is not readable"
    return True


def string_arg(args: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        got = "nothing" if value is None else type(value).__name__
        raise FileOpError(f"{name} must be a string, got {got}")
    return value


def int_arg(args: dict[str, Any], name: str, default: int, *, minimum: int = 0) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise FileOpError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise FileOpError(f"{name} must be at least {minimum}, got {value}")
    return value
