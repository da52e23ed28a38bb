"""Normalising an assistant message: visible text, reasoning, and tool calls with stable ids.

Two wire shapes are understood:

* OpenAI chat completions: ``{"role": "assistant", "content": str | [parts] | None,
  "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}],
  "reasoning_content" | "reasoning": str}`` (and the legacy single ``function_call``);
* Anthropic messages: ``{"role": "assistant", "content": [{"type": "text"}, {"type":
  "thinking"}, {"type": "tool_use", "id", "name", "input"}], "stop_reason"}``.

Arguments are kept exactly as given (a JSON string stays the same string, an object stays an
object); parsing them is :mod:`execengine.agent.arguments`' job. Every call gets an id: the
provider's when it gave a usable one, else a generated one that is stable for the same turn
and position (``call_t<turn>_<index>_<digest>``). Reasoning comes from the dedicated fields,
from thinking blocks, and from ``<think>...</think>`` (also ``<thinking>``, ``<reasoning>``)
blocks inside the text, which are removed from the visible content.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: finish reasons meaning the model was cut off by the output-token limit
TRUNCATED_FINISH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})

_THINK_TAGS = ("think", "thinking", "reasoning")
_CLOSED_RE = re.compile(
    r"<(?P<tag>" + "|".join(_THINK_TAGS) + r")>(?P<body>.*?)</(?P=tag)>", re.DOTALL | re.I
)
_OPEN_RE = re.compile(r"<(" + "|".join(_THINK_TAGS) + r")>", re.I)
_CLOSE_RE = re.compile(r"</(" + "|".join(_THINK_TAGS) + r")>", re.I)


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for, before any repair or parsing."""

    id: str
    name: str
    #: exactly what the model sent: a JSON string, an already-decoded object, or None
    arguments: Any
    index: int
    #: the provider's own id when it was replaced (missing ids are not recorded)
    original_id: str | None = None

    def arguments_text(self) -> str:
        """The arguments as JSON text for an OpenAI-format history."""
        if isinstance(self.arguments, str):
            return self.arguments
        if self.arguments is None:
            return "{}"
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class AssistantTurn:
    """A normalised assistant message."""

    content: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def truncated(self) -> bool:
        """The response ended at the output-token limit."""
        return (self.finish_reason or "") in TRUNCATED_FINISH_REASONS

    def to_openai(self, calls: Iterable[ToolCall] | None = None) -> dict[str, Any]:
        """The message to append to an OpenAI-format history (reasoning left out).

        ``calls`` replaces the tool calls, e.g. with repaired names.
        """
        chosen = list(self.tool_calls if calls is None else calls)
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if chosen:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments_text()}}
                for c in chosen
            ]
        elif msg["content"] is None:
            msg["content"] = ""
        return msg


def split_reasoning(text: str) -> tuple[str, str]:
    """``(visible, reasoning)`` from text that may hold ``<think>`` blocks.

    Closed blocks anywhere are removed; an opening tag never closed (the model was cut off)
    makes the rest reasoning; a closing tag with no opening one (templates that put the
    opening tag in the prompt) makes everything before it reasoning.
    """
    parts: list[str] = []

    def take(m: re.Match[str]) -> str:
        parts.append(m.group("body").strip())
        return ""

    visible = _CLOSED_RE.sub(take, text)
    opened = _OPEN_RE.search(visible)
    if opened:
        parts.append(visible[opened.end():].strip())
        visible = visible[: opened.start()]
    closed = _CLOSE_RE.search(visible)
    if closed:
        parts.insert(0, visible[: closed.start()].strip())
        visible = visible[closed.end():]
        visible = _CLOSE_RE.sub("", visible)
    return visible.strip(), "\n\n".join(p for p in parts if p)


def _digest(*items: Any) -> str:
    data = json.dumps(items, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()[:10]


def _text_of(content: Any) -> tuple[str, list[str], list[Mapping[str, Any]]]:
    """Text, reasoning pieces and tool_use blocks from a content value."""
    if content is None:
        return "", [], []
    if isinstance(content, str):
        return content, [], []
    texts: list[str] = []
    reasoning: list[str] = []
    uses: list[Mapping[str, Any]] = []
    if isinstance(content, Iterable):
        for block in content:
            if isinstance(block, str):
                texts.append(block)
                continue
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind in ("text", "output_text"):
                texts.append(str(block.get("text") or ""))
            elif kind == "thinking":
                reasoning.append(str(block.get("thinking") or ""))
            elif kind == "reasoning":
                reasoning.append(str(block.get("text") or block.get("reasoning") or ""))
            elif kind == "tool_use":
                uses.append(block)
    return "".join(texts), reasoning, uses


def normalize_assistant(
    message: Mapping[str, Any],
    *,
    finish_reason: str | None = None,
    turn: int = 0,
    taken_ids: Iterable[str] = (),
) -> AssistantTurn:
    """Normalise one assistant message (OpenAI or Anthropic shape).

    ``turn`` seeds generated ids; ``taken_ids`` are ids already used in the history, so a
    provider that repeats ids across turns (some local servers say ``call_0`` every time)
    still gets unique ones.
    """
    if not isinstance(message, Mapping):
        raise TypeError(f"assistant message must be a mapping, got {type(message).__name__}")
    text, reasoning, uses = _text_of(message.get("content"))
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            reasoning.insert(0, value)
    visible, inline = split_reasoning(text)
    if inline:
        reasoning.append(inline)

    raw_calls: list[tuple[Any, Any, Any]] = []  # (id, name, arguments)
    for tc in message.get("tool_calls") or ():
        if not isinstance(tc, Mapping):
            continue
        inner = tc.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tc
        raw_calls.append((tc.get("id"), fn.get("name"), fn.get("arguments")))
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping) and not raw_calls:
        raw_calls.append((None, legacy.get("name"), legacy.get("arguments")))
    for block in uses:
        raw_calls.append((block.get("id"), block.get("name"), block.get("input")))

    used = set(taken_ids)
    calls: list[ToolCall] = []
    for i, (given, name, args) in enumerate(raw_calls):
        cid = given if isinstance(given, str) and given.strip() else None
        original = None
        if cid is None or cid in used:
            original = cid
            cid = f"call_t{turn}_{i}_{_digest(turn, i, name, args)}"
            while cid in used:
                cid += "x"
        used.add(cid)
        calls.append(ToolCall(cid, name if isinstance(name, str) else "", args, i, original))

    reason = finish_reason or message.get("finish_reason") or message.get("stop_reason")
    return AssistantTurn(
        content=visible,
        reasoning="\n\n".join(r.strip() for r in reasoning if r and r.strip()),
        tool_calls=tuple(calls),
        finish_reason=reason if isinstance(reason, str) else None,
        raw=dict(message),
    )


def history_ids(messages: Iterable[Mapping[str, Any]]) -> set[str]:
    """Tool-call ids already present in an OpenAI-format history."""
    out: set[str] = set()
    for m in messages:
        for tc in m.get("tool_calls") or ():
            if isinstance(tc, Mapping) and isinstance(tc.get("id"), str):
                out.add(tc["id"])
    return out
