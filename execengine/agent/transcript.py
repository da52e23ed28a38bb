"""Transcript repair: make an OpenAI-format history acceptable to provider APIs.

Providers reject a history in which an assistant ``tool_calls`` entry has no ``role=tool``
answer, or a tool message answers a call that is not there. Histories get that way when a
host is interrupted mid-turn, trims old messages, or edits the history. Before every model
call, :func:`repair_transcript`:

* places, directly after each assistant message with tool calls, one result per call in the
  call order: the first tool message answering that id found before the next assistant
  message, or a placeholder result when there is none;
* drops tool messages that answer no call of the assistant message before them (orphans,
  second answers to the same id);
* keeps every other message, in order (a user message that slipped between calls and
  results moves after the results).

The input is not modified; the report says what changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PLACEHOLDER = ("No result: this tool call was not completed (the turn was interrupted or "
               "the result was lost). Call it again if you still need it.")


@dataclass(frozen=True)
class TranscriptRepair:
    messages: list[dict[str, Any]]
    #: tool_call_ids of tool messages removed
    dropped: tuple[str, ...] = ()
    #: call ids that received a placeholder result
    placeholders: tuple[str, ...] = ()
    #: call ids whose result was moved next to its call
    moved: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.placeholders or self.moved)


def placeholder_result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id,
            "content": json.dumps({"error": PLACEHOLDER})}


def _call_ids(msg: Mapping[str, Any]) -> list[str]:
    out = []
    for tc in msg.get("tool_calls") or ():
        if isinstance(tc, Mapping) and isinstance(tc.get("id"), str):
            out.append(tc["id"])
    return out


def repair_transcript(messages: Sequence[Mapping[str, Any]]) -> TranscriptRepair:
    out: list[dict[str, Any]] = []
    dropped: list[str] = []
    placeholders: list[str] = []
    moved: list[str] = []
    i = 0
    n = len(messages)
    while i < n:
        msg = dict(messages[i])
        role = msg.get("role")
        if role == "tool":  # not claimed by an assistant message before it
            dropped.append(str(msg.get("tool_call_id")))
            i += 1
            continue
        out.append(msg)
        i += 1
        ids = _call_ids(msg) if role == "assistant" else []
        if not ids:
            continue
        # the segment up to the next assistant message holds this turn's results
        j = i
        while j < n and messages[j].get("role") != "assistant":
            j += 1
        answers: dict[str, dict[str, Any]] = {}
        others: list[dict[str, Any]] = []
        first_other: int | None = None
        for k in range(i, j):
            m = dict(messages[k])
            if m.get("role") == "tool":
                cid = m.get("tool_call_id")
                if cid in ids and cid not in answers:
                    if first_other is not None:
                        moved.append(cid)
                    answers[cid] = m
                else:
                    dropped.append(str(cid))
            else:
                if first_other is None:
                    first_other = k
                others.append(m)
        for cid in ids:
            if cid in answers:
                out.append(answers[cid])
            else:
                out.append(placeholder_result(cid))
                placeholders.append(cid)
        out.extend(others)
        i = j
    return TranscriptRepair(out, tuple(dropped), tuple(placeholders), tuple(moved))
