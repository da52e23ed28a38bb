"""What a tool may be used for, declared where the tool is registered.

A :class:`ToolPolicy` travels with the registration (``ToolRegistry.register(...,
policy=...)``, read back as ``ToolEntry.policy``). The core holds no lists of tool names:
whether a script may call a tool, which of its parameters scripts never see, whether the
agent loop handles it, and whether the agent pipeline may batch it are all read from here.

The default is the cautious one: not callable from scripts, nothing hidden, handled by its
own handler, assumed to have side effects and to need running alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from execengine.errors import ToolError


@dataclass(frozen=True)
class ToolPolicy:
    """A tool's declared uses (frozen; build a new one with :func:`dataclasses.replace`)."""

    #: callable from execute_code scripts via ``hermes_tools``
    script_callable: bool = False
    #: parameters removed from the script's stub and refused when a script sends them
    hidden_params: frozenset[str] = frozenset()
    #: handled by the agent loop (todo, memory, delegate_task): the registered handler is
    #: only a placeholder, the host installs the real one (``set_agent_handler``)
    agent_level: bool = False
    #: no side effects (the agent pipeline's batching rules)
    read_only: bool = False
    #: may run concurrently with the other calls of one batch; a tool that is not read-only
    #: and takes a ``path`` runs alongside others only when no other call touches that path
    parallel_safe: bool = False
    #: in a distributed batch, served on the driver (it holds credentials)
    driver_held: bool = False

    def __post_init__(self) -> None:
        # accept any iterable of names (a set literal, a list) and keep the frozen type
        object.__setattr__(self, "hidden_params", frozenset(self.hidden_params))
        if self.agent_level and self.script_callable:
            raise ToolError("an agent-level tool cannot be callable from scripts")


#: the policy of a tool registered without one
DEFAULT_POLICY = ToolPolicy()
