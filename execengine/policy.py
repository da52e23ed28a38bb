"""What a tool may do and where it runs, declared where it is registered.

``ToolRegistry.register(..., policy=ToolPolicy(script_callable=True))``; the entry keeps it
as ``ToolEntry.policy``. (Issue 10 moves the built-in lists onto these declarations; until
then the batch runner only reads ``script_callable`` and ``driver_held``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolPolicy:
    #: callable from execute_code scripts through hermes_tools
    script_callable: bool = False
    #: removed from the stub; refused if a script sends them
    hidden_params: frozenset[str] = field(default_factory=frozenset)
    #: handled by the agent loop (todo, memory, delegate_task)
    agent_level: bool = False
    #: no side effects (agent pipeline batching)
    read_only: bool = False
    #: may run concurrently with other calls of one batch
    parallel_safe: bool = False
    #: in a distributed batch, served on the driver (it holds a credential)
    driver_held: bool = False
