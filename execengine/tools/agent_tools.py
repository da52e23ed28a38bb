"""Schemas of the agent-level tools: the host agent handles these, not the registry.

Dispatching one without a host handler returns an error saying so; a host installs
handlers with ``ToolRegistry.set_agent_handler`` (see :mod:`execengine.agent` for reference
implementations of todo and memory).
"""

from __future__ import annotations

from typing import Any

from execengine.context import ToolContext
from execengine.discovery import ToolSpecs
from execengine.policy import ToolPolicy

specs = ToolSpecs()


def _host_only(args: dict[str, Any], ctx: ToolContext) -> Any:  # pragma: no cover - routed
    raise RuntimeError("agent-level tools are handled by the host agent")


TODO_SCHEMA = {
    "description": "Manage your task list for this session: read it (no arguments) or replace "
    "or merge items. Use it for multi-step work to track progress.",
    "parameters": {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "Items to write; omit to read the list",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string",
                                   "enum": ["pending", "in_progress", "completed", "cancelled"]},
                    },
                    "required": ["id", "content", "status"],
                },
            },
            "merge": {"type": "boolean", "description": "Update items by id instead of "
                      "replacing the list", "default": False},
        },
    },
}

MEMORY_SCHEMA = {
    "description": "Persistent memory across sessions: add, replace or remove short notes "
    "about the user or the environment.",
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove", "read"]},
            "content": {"type": "string", "description": "The note (add, replace)"},
            "old_text": {"type": "string", "description": "Text identifying the note to "
                         "replace or remove"},
        },
        "required": ["action"],
    },
}

SESSION_SEARCH_SCHEMA = {
    "description": "Search past conversations for a topic and get short summaries.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer", "default": 3, "minimum": 1, "maximum": 10},
        },
        "required": ["query"],
    },
}

DELEGATE_SCHEMA = {
    "description": "Hand a self-contained sub-task to a sub-agent with its own context; "
    "returns its final answer.",
    "parameters": {
        "type": "object",
        "properties": {
            "goal": {"type": "string", "description": "What the sub-agent must achieve"},
            "context": {"type": "string", "description": "Facts it needs to know"},
            "toolsets": {"type": "array", "items": {"type": "string"},
                         "description": "Toolsets the sub-agent may use"},
        },
        "required": ["goal"],
    },
}

#: the agent loop handles these (set_agent_handler); scripts never reach them
AGENT = ToolPolicy(agent_level=True)

specs.register("todo", "todo", TODO_SCHEMA, _host_only, emoji="📋", policy=AGENT)
specs.register("memory", "memory", MEMORY_SCHEMA, _host_only, emoji="🧠", policy=AGENT)
specs.register("session_search", "session_search", SESSION_SEARCH_SCHEMA, _host_only,
               emoji="🔎", policy=ToolPolicy(agent_level=True, read_only=True, parallel_safe=True))
specs.register("delegate_task", "delegation", DELEGATE_SCHEMA, _host_only, emoji="🤝",
               policy=AGENT)
