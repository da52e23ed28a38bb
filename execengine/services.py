"""What a registry's tools share: the host and the long-lived state built on it.

One :class:`Services` per :class:`~execengine.registry.ToolRegistry` (``registry.services``,
``ctx.services`` in a handler). Each member is typed and made on first use from the
registry's configuration, then read as a plain attribute (no lock: the tools read the host
and the task directories on every call); ``close()`` closes them in reverse order of
creation (background processes and MCP servers first, the host's connection last). Pass
``host=`` to run a registry on a host of your own (a :class:`~execengine.host.fake.FakeHost`
in tests).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from execengine.approval.gate import ApprovalState
from execengine.config import Config
from execengine.errors import ToolError
from execengine.host.base import Host
from execengine.host.factory import make_host
from execengine.terminal.session import TerminalService
from execengine.web.spill import SpillStore
from execengine.workdirs import TaskDirs

if TYPE_CHECKING:
    from execengine.mcp.manager import McpManager
    from execengine.terminal.confined import AgentSandbox

log = logging.getLogger(__name__)
T = TypeVar("T")


class Services:
    """The host, task directories, terminal, approvals, web spill store and MCP manager of
    one registry. Thread-safe; :meth:`close` is idempotent."""

    def __init__(self, config: Config, *, host: Host | None = None,
                 passthrough: Callable[[], tuple[str, ...]] = tuple) -> None:
        self.config = config
        self._passthrough = passthrough
        self._lock = threading.RLock()
        self._made: dict[str, Any] = {}
        self._closed = False
        if host is not None:
            self._made["host"] = host
        #: the registry's MCP manager (set by :func:`execengine.mcp.attach`)
        self.mcp: McpManager | None = None

    def _get(self, name: str, make: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise ToolError("registry is closed")
            if name not in self._made:
                self._made[name] = make()
            made: T = self._made[name]
            return made

    @cached_property
    def host(self) -> Host:
        """Where executions, commands and file operations run (see :mod:`execengine.host`)."""
        return self._get("host", lambda: make_host(self.config))

    @cached_property
    def workdirs(self) -> TaskDirs:
        return self._get("workdirs", lambda: TaskDirs(self.host.task_dirs_start()))

    @cached_property
    def terminal(self) -> TerminalService:
        return self._get("terminal", lambda: TerminalService(
            self.config, self.host.terminal_backend, self.workdirs, self._passthrough))

    @cached_property
    def approvals(self) -> ApprovalState:
        return self._get("approvals", ApprovalState)

    @cached_property
    def web_spill(self) -> SpillStore:
        return self._get("web_spill", SpillStore)

    def agent_sandbox(self) -> AgentSandbox | None:
        """The sandbox of the agent's own terminal commands, if the host has one."""
        return self.host.agent_sandbox()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def started(self) -> bool:
        """Whether anything was made that holds what only :meth:`close` releases."""
        with self._lock:
            made = list(self._made.values())
        return self.mcp is not None or any(getattr(m, "holds_resources", False) for m in made)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for name in self._made:  # kept as attributes: read again, "registry is closed"
                self.__dict__.pop(name, None)
            made, self._made = list(self._made.values()), {}
            mcp, self.mcp = self.mcp, None
        for svc in [*([mcp] if mcp is not None else []), *reversed(made)]:
            closer = getattr(svc, "close", None)
            if not callable(closer):
                continue
            try:
                closer()
            except Exception:
                log.exception("closing %r failed", svc)
