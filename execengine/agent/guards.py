"""Per-turn guards: exact duplicate calls run once; ``delegate_task`` calls are capped.

Both work on the calls that passed name and argument checks, given as
``(call_id, tool_name, args)`` in the model's order, and return verdicts keyed by call id.
A duplicate is the same tool with equal arguments (key order and whitespace do not matter);
the first occurrence runs and every later one receives the same result text, so each call
still gets its own result message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DELEGATE_TOOL = "delegate_task"


@dataclass(frozen=True)
class GuardVerdicts:
    #: call id -> id of the earlier identical call whose result it shares
    duplicates: Mapping[str, str]
    #: call id -> error text for calls refused by a per-turn cap
    refused: Mapping[str, str]


def call_key(name: str, args: Mapping[str, Any]) -> str:
    """A canonical identity of a call: the tool and its arguments, order-independent."""
    return name + "\x00" + json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def find_duplicates(calls: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, str]:
    first: dict[str, str] = {}
    dupes: dict[str, str] = {}
    for cid, name, args in calls:
        key = call_key(name, args)
        if key in first:
            dupes[cid] = first[key]
        else:
            first[key] = cid
    return dupes


def cap_calls(
    calls: Iterable[tuple[str, str, Mapping[str, Any]]], tool: str, limit: int
) -> dict[str, str]:
    """Calls of ``tool`` beyond the first ``limit`` in a turn, with the refusal text."""
    refused: dict[str, str] = {}
    seen = 0
    for cid, name, _ in calls:
        if name != tool:
            continue
        seen += 1
        if seen > limit:
            refused[cid] = (
                f"{tool} limit reached: at most {limit} {tool} call(s) run per turn; this "
                "one was not run. Combine sub-tasks, or send it again next turn."
            )
    return refused


def apply_guards(
    calls: Sequence[tuple[str, str, Mapping[str, Any]]], *, max_delegate_calls: int
) -> GuardVerdicts:
    """Duplicates first (a repeated delegate call is not counted twice), then the cap."""
    dupes = find_duplicates(calls)
    unique = [c for c in calls if c[0] not in dupes]
    refused = cap_calls(unique, DELEGATE_TOOL, max_delegate_calls)
    return GuardVerdicts(dupes, refused)
