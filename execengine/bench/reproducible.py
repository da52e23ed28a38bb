"""What keeps two runs' token counts identical: fixed stand-ins for what changes run to run.

A run's tool results hold a few values that differ between runs on the same fixtures and
say nothing about the task: the fixtures' temporary directory (``cwd`` in terminal results),
the local web's port (in every URL), how long a command took (``duration_seconds``,
unittest's ``Ran N tests in 0.012s``). The counted transcript gets fixed stand-ins of the same
shape (:class:`Canon`); the plans and scripts still see the real values, so calls go to the
real server and the real directory.

``execute_code``'s description says what the isolation level means for a script, one
sentence that differs between ``none``, ``restricted`` and ``isolated``. The counted
definition always carries the sentence of :data:`PINNED_LEVEL` (the level a default install
on Linux runs at), whatever level ran the scripts: the run's level is recorded beside it
(:func:`execute_code_description`), and the counts do not depend on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from execengine.engine.tool import SANDBOX_TEXT

if TYPE_CHECKING:
    from execengine.config import Config

#: stand-ins: a temporary directory and a loopback URL of the real ones' shape
CANON_ROOT = "/tmp/execengine-bench-fixtures"
CANON_BASE_URL = "http://127.0.0.1:48080"
_VOLATILE = (
    (re.compile(r'("duration_seconds":\s*)-?[0-9.]+(?:[eE][-+]?\d+)?'), r"\g<1>0.05"),
    (re.compile(r"(Ran \d+ tests? in )\d+\.\d+s"), r"\g<1>0.010s"),
)
PINNED_LEVEL = "isolated"
_SANDBOX_PREFIX = "The script is sandboxed:"
#: the line of execute_code's description the level's sentence follows
_ANCHOR = "State persists between calls"


class Canon:
    """Rewrites text for the counted transcript (the fixtures' root and URL, durations)."""

    def __init__(self, root: str, base_url: str) -> None:
        # JSON escapes nothing in a temporary path or a loopback URL, so the raw text and
        # its JSON-encoded form are replaced alike
        self._pairs = [(base_url, CANON_BASE_URL), (root, CANON_ROOT)]

    def __call__(self, text: str) -> str:
        for real, stand_in in self._pairs:
            if real:
                text = text.replace(real, stand_in)
        for pattern, repl in _VOLATILE:
            text = pattern.sub(repl, text)
        return text


def pinned_sentence(config: Config) -> str:
    """The sentence :data:`PINNED_LEVEL` adds to execute_code's description."""
    network = "on." if config.code_execution.network else "off."
    return f"{SANDBOX_TEXT[PINNED_LEVEL]} Network access is {network}"


def pin_description(text: str, sentence: str) -> str:
    """``text`` (execute_code's description) with the level's sentence replaced by
    ``sentence`` (added after the session line when the run's level has none)."""
    lines = [ln for ln in text.split("\n") if not ln.startswith(_SANDBOX_PREFIX)]
    at = next((i + 1 for i, ln in enumerate(lines) if ln.startswith(_ANCHOR)), len(lines))
    return "\n".join([*lines[:at], sentence, *lines[at:]])


def pin_definitions(tools: Sequence[Mapping[str, Any]], config: Config
                    ) -> list[dict[str, Any]]:
    """Tool definitions with execute_code's description pinned (others unchanged)."""
    out: list[dict[str, Any]] = []
    sentence = pinned_sentence(config)
    for tool in tools:
        fn = tool.get("function", {})
        if fn.get("name") == "execute_code":
            fn = {**fn, "description": pin_description(str(fn.get("description", "")),
                                                       sentence)}
            tool = {**tool, "function": fn}
        out.append(dict(tool))
    return out


def execute_code_description(tools: Sequence[Mapping[str, Any]]) -> str:
    """execute_code's description among ``tools`` ('' when it is not offered)."""
    for tool in tools:
        fn = tool.get("function", {})
        if fn.get("name") == "execute_code":
            return str(fn.get("description", ""))
    return ""
