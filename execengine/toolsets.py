"""Toolsets: named groups of tools, declared as data.

A toolset's members are the tools registered under its name plus the tools it lists, plus
everything in the toolsets it includes (recursively, de-duplicated; a cycle is an error that
names it). ``all`` and ``*`` mean every registered tool. Legacy names with a ``_tools`` suffix
(``file_tools``) mean the current name (``file``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from execengine.errors import ToolError, UnknownToolsetError, did_you_mean

ALL = frozenset({"all", "*"})


@dataclass(frozen=True)
class Toolset:
    name: str
    description: str
    tools: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()


BUILTIN_TOOLSETS: tuple[Toolset, ...] = (
    Toolset("file", "Read, write, patch and search files"),
    Toolset("terminal", "Run shell commands and manage background processes"),
    Toolset("web", "Search the web and extract pages"),
    Toolset("code_execution", "Run a Python script that calls tools programmatically"),
    Toolset("todo", "A task list the agent keeps for itself (handled by the host agent)"),
    Toolset("memory", "Persistent notes across sessions (handled by the host agent)"),
    Toolset("session_search", "Search past conversations (handled by the host agent)"),
    Toolset("delegation", "Hand a sub-task to a sub-agent (handled by the host agent)"),
    Toolset("coding", "Files, terminal and code execution", includes=(
        "file", "terminal", "code_execution")),
    Toolset("research", "Web, files and code execution", includes=(
        "web", "file", "code_execution")),
    Toolset("agent", "Agent-level tools", includes=(
        "todo", "memory", "session_search", "delegation")),
    Toolset("default", "Everything a general agent uses", includes=(
        "coding", "research", "agent")),
)


def canonical_name(name: str, known: Iterable[str]) -> str:
    """Map legacy ``*_tools`` names to current ones; leave others alone."""
    known = set(known)
    if name not in known and name.endswith("_tools") and name[: -len("_tools")] in known:
        return name[: -len("_tools")]
    return name


def resolve(
    names: Iterable[str],
    toolsets: Mapping[str, Toolset],
    members: Mapping[str, Iterable[str]],
    all_tools: Iterable[str],
) -> set[str]:
    """Tool names reachable from ``names``.

    ``members`` maps a toolset name to the tools registered under it. Unknown names raise
    :class:`UnknownToolsetError` with a suggestion; include cycles raise :class:`ToolError`.
    """
    out: set[str] = set()
    everything = set(all_tools)
    for raw in names:
        if raw in ALL:
            out |= everything
            continue
        name = canonical_name(raw, toolsets)
        if name not in toolsets:
            hint = did_you_mean(name, [*toolsets, "all"])
            raise UnknownToolsetError(
                f"unknown toolset {raw!r}{hint}; known: {', '.join(sorted(toolsets))}"
            )
        _collect(name, toolsets, members, out, ())
    return out


def _collect(
    name: str,
    toolsets: Mapping[str, Toolset],
    members: Mapping[str, Iterable[str]],
    out: set[str],
    stack: tuple[str, ...],
) -> None:
    if name in stack:
        cycle = " -> ".join((*stack[stack.index(name):], name))
        raise ToolError(f"toolset include cycle: {cycle}")
    ts = toolsets.get(name)
    if ts is None:
        hint = did_you_mean(name, toolsets)
        where = f" (included by {stack[-1]!r})" if stack else ""
        raise UnknownToolsetError(f"unknown toolset {name!r}{where}{hint}")
    out.update(ts.tools)
    out.update(members.get(name, ()))
    for inc in ts.includes:
        _collect(canonical_name(inc, toolsets), toolsets, members, out, (*stack, name))
