"""What a tool handler is given besides its arguments.

:class:`CallContext` is what the *caller* of a tool provides: which task, where the call
came from, the working directory, the host's approver, an interrupt event, and so on. It is
typed and frozen; derive a changed one with :meth:`CallContext.replace`. The dispatcher
wraps it, with the registry and its configuration, into the :class:`ToolContext` a handler
receives as ``handler(args, ctx)``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from execengine.approval.approver import Approver, Classifier
    from execengine.config import Config
    from execengine.confine.policy import ExecutionPolicy
    from execengine.launch.base import Launcher
    from execengine.registry import ToolRegistry
    from execengine.services import Services
    from execengine.web.fetch import Fetcher
    from execengine.web.providers import SearchProvider

#: where a call came from: the model directly, or a script inside execute_code
Origin = Literal["agent", "execute_code"]
SearchBackend = Literal["auto", "ripgrep", "python"]


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class CallContext:
    """The caller's side of one tool call (frozen; every field optional).

    ``task_id`` scopes per-task state (the terminal's working directory, background
    processes, approvals). ``origin`` is ``"execute_code"`` for calls made by a script, so a
    tool can refuse what scripts may not do.
    """

    task_id: str | None = None
    origin: Origin = "agent"
    #: working directory of the call (default: the task's, see :mod:`execengine.workdirs`)
    cwd: str | None = None
    #: the host's conversation or session this call belongs to
    session_id: str | None = None
    #: toolsets / tool names the session enabled (execute_code offers scripts only these)
    enabled_toolsets: tuple[str, ...] | None = None
    enabled_tools: tuple[str, ...] | None = None
    #: the host's answer to "may this dangerous command run?" (see :mod:`execengine.approval`)
    approver: Approver | None = None
    #: a model-backed classifier for ``approvals.mode: smart``
    classifier: Classifier | None = None
    #: set from another thread to stop a long call (execute_code stops its script)
    interrupt: threading.Event | None = None
    #: web tools: a fetcher or search provider to use instead of the configured ones
    fetcher: Fetcher | None = None
    search_provider: SearchProvider | None = None
    #: search_files: force a backend (tests and benchmarks)
    search_backend: SearchBackend = "auto"
    #: what the calls of an execute_code script may reach (see :mod:`execengine.confine`)
    policy: ExecutionPolicy | None = None
    #: the execution's launcher: a script's terminal commands run through it, sandboxed
    sandbox_launcher: Launcher | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "enabled_toolsets", _names(self.enabled_toolsets))
        object.__setattr__(self, "enabled_tools", _names(self.enabled_tools))

    def replace(self, **changes: Any) -> CallContext:
        return dataclasses.replace(self, **changes)

    @property
    def task_key(self) -> str:
        return self.task_id or "default"


@dataclass(frozen=True)
class ToolContext:
    """Per-call context given to handlers: ``handler(args, ctx)``."""

    registry: ToolRegistry
    config: Config
    call: CallContext = CallContext()

    @property
    def task_id(self) -> str | None:
        return self.call.task_id

    @property
    def origin(self) -> Origin:
        return self.call.origin

    @property
    def task_key(self) -> str:
        return self.call.task_key

    @property
    def services(self) -> Services:
        """What the registry's handlers share: host, terminal, task directories..."""
        return self.registry.services
