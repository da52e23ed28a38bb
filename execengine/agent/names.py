"""Tool-name repair: map what the model wrote to a tool the session exposed.

Models misspell tool names in a few predictable ways: case (``Read_File``), separators
(``read-file``, ``read file``), wrapper prefixes from other prompt formats (``functions.``,
``tool_``, ``default_api:``), and small typos (``read_fiel``). A name is repaired only when
exactly one exposed tool fits; the repair is recorded in :class:`NameResolution` so hosts can
log or count it. Otherwise the resolution carries an error listing the available tools, for
the model to correct itself on its next turn.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: prefixes some prompt formats put before tool names (compared case-insensitively)
KNOWN_PREFIXES = ("functions.", "function.", "default_api:", "default_api.", "tools.",
                  "tool.", "tool_", "tools_", "call_", "mcp__")
#: similarity (difflib ratio) a typo repair must reach
DEFAULT_CUTOFF = 0.8

_SEP_RE = re.compile(r"[\s\-.]+")


@dataclass(frozen=True)
class NameResolution:
    """Outcome of resolving one requested name."""

    requested: str
    #: the exposed tool to run, or None when no repair was clear
    name: str | None
    #: how it was repaired ("" when the name was exact): case, separators, prefix, close-match
    repair: str = ""
    error: str = ""

    @property
    def repaired(self) -> bool:
        return bool(self.repair)


def _fold(name: str) -> str:
    return _SEP_RE.sub("_", name.strip()).lower().strip("_")


def _strip_prefixes(name: str) -> str | None:
    low = name.lower()
    for prefix in KNOWN_PREFIXES:
        if low.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return None


def _direct(name: str, exposed: list[str]) -> tuple[str, str] | None:
    """A match by exact name, case or separators alone."""
    if name in exposed:
        return name, ""
    by_case = [t for t in exposed if t.lower() == name.lower()]
    if len(by_case) == 1:
        return by_case[0], "case"
    folded = _fold(name)
    by_fold = [t for t in exposed if _fold(t) == folded]
    if len(by_fold) == 1:
        return by_fold[0], "separators"
    return None


def resolve_tool_name(
    requested: str, exposed: Iterable[str], *, cutoff: float = DEFAULT_CUTOFF
) -> NameResolution:
    """Resolve ``requested`` against the tools the session exposed."""
    tools = sorted(set(exposed))
    raw = requested if isinstance(requested, str) else ""
    name = raw.strip()
    if name:
        hit = _direct(name, tools)
        if hit is not None:
            tool, how = hit
            if name != raw and not how:
                how = "whitespace"
            return NameResolution(raw, tool, how)
        # peel wrapper prefixes (possibly stacked: "functions.tool_read_file")
        peeled = name
        while (inner := _strip_prefixes(peeled)) is not None:
            peeled = inner
            hit = _direct(peeled, tools)
            if hit is not None:
                return NameResolution(raw, hit[0], "prefix")
        folded = {_fold(t): t for t in tools}
        close = difflib.get_close_matches(_fold(peeled), list(folded), n=2, cutoff=cutoff)
        if close and (len(close) == 1 or _ratio(_fold(peeled), close[0]) >
                      _ratio(_fold(peeled), close[1])):
            return NameResolution(raw, folded[close[0]], "close-match")
    listing = ", ".join(tools) if tools else "(none)"
    shown = repr(raw) if raw else "an empty name"
    return NameResolution(
        raw, None,
        error=f"Unknown tool {shown}. Available tools: {listing}. "
        "Call one of these by its exact name.",
    )


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()
