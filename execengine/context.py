"""What a tool handler is given besides its arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.registry import ToolRegistry

T = TypeVar("T")

#: where a call came from: the model directly, or a script inside execute_code
ORIGINS = ("agent", "execute_code")


@dataclass(frozen=True)
class ToolContext:
    """Per-call context: ``handler(args, ctx)``.

    ``task_id`` scopes per-task state (the terminal's working directory, background
    processes, approvals). ``origin`` is ``"execute_code"`` for calls made by a script, so a
    tool can refuse what scripts may not do. ``extras`` carries host-provided values (for
    example an ``approver``); tools read them with :meth:`extra`.
    """

    registry: ToolRegistry
    config: Config
    task_id: str | None = None
    origin: str = "agent"
    extras: Mapping[str, Any] = field(default_factory=dict)

    def service(self, key: str, factory: Callable[[ToolRegistry], T]) -> T:
        """A long-lived object shared by all calls on this registry (created once)."""
        return self.registry.service(key, factory)

    def extra(self, key: str, default: Any = None) -> Any:
        return self.extras.get(key, default)

    @property
    def task_key(self) -> str:
        return self.task_id or "default"
