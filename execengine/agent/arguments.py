"""Tool-call arguments: parse, detect truncation, validate against the tool's schema.

The rules, in order:

1. the whole response was cut at the output-token limit → *truncated*, never executed;
2. empty (``None``, ``""``, whitespace) → ``{}``;
3. already an object → used as is;
4. a JSON string that is cut off (an unclosed string, object or array) → *truncated*;
5. any other invalid JSON → *invalid_json*, with line, column and character of the failure
   and a short excerpt around it;
6. valid JSON that is not an object → *not_object*;
7. schema violations (missing required fields, wrong types, unknown fields, ...) →
   *invalid_arguments*, listing every violation.

Outcomes are values (:class:`ParsedArguments`); the message in ``error`` is written for the
model, so it can fix its next call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from execengine.schema import validate_arguments, violations_message

ArgumentStatus = Literal["ok", "truncated", "invalid_json", "not_object", "invalid_arguments"]


@dataclass(frozen=True)
class ParsedArguments:
    status: ArgumentStatus
    args: dict[str, Any] | None = None
    error: str = ""
    #: schema violations, one per entry (status invalid_arguments)
    violations: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def looks_unterminated(text: str) -> bool:
    """True when ``text`` opens a JSON string, object or array it never closes."""
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def _excerpt(text: str, pos: int, width: int = 24) -> str:
    start = max(0, pos - width)
    end = min(len(text), pos + width)
    before = text[start:pos]
    after = text[pos:end]
    return f"{'...' if start else ''}{before}>>>{after}{'...' if end < len(text) else ''}"


def parse_arguments(raw: Any, tool: str, *, truncated_response: bool = False) -> ParsedArguments:
    """Steps 1-6 of the module docstring: ``raw`` as the model sent it, to an object."""
    if truncated_response:
        return ParsedArguments(
            "truncated",
            error=f"The call to {tool!r} was not executed: your response was cut off at the "
            "output-token limit, so its arguments may be incomplete. Send the call again "
            "with shorter arguments (split large content over several calls).",
        )
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ParsedArguments("ok", {})
    if isinstance(raw, Mapping):
        return ParsedArguments("ok", dict(raw))
    if not isinstance(raw, str):
        return ParsedArguments(
            "not_object",
            error=f"Arguments for {tool!r} must be a JSON object, got {type(raw).__name__}.",
        )
    try:
        value = json.loads(raw)
    except RecursionError:
        return ParsedArguments(
            "invalid_json",
            error=f"Arguments for {tool!r} are nested too deeply to parse. Send a flatter "
            "JSON object.",
        )
    except json.JSONDecodeError as exc:
        if looks_unterminated(raw):
            return ParsedArguments(
                "truncated",
                error=f"The call to {tool!r} was not executed: its arguments are cut off "
                f"(the JSON ends after {len(raw)} characters with an unclosed string, "
                "object or array). Send the complete call again; split large content over "
                "several calls.",
            )
        return ParsedArguments(
            "invalid_json",
            error=f"Arguments for {tool!r} are not valid JSON: {exc.msg} at line "
            f"{exc.lineno} column {exc.colno} (char {exc.pos}), near "
            f"{_excerpt(raw, exc.pos)!r}. Send the call again with a valid JSON object.",
        )
    if value is None:
        return ParsedArguments("ok", {})
    if not isinstance(value, dict):
        return ParsedArguments(
            "not_object",
            error=f"Arguments for {tool!r} must be a JSON object, got a JSON "
            f"{type(value).__name__}.",
        )
    return ParsedArguments("ok", value)


def check_arguments(
    raw: Any, tool: str, parameters: Mapping[str, Any] | None, *,
    truncated_response: bool = False,
) -> ParsedArguments:
    """All seven steps: parse, then validate against ``parameters`` (when given)."""
    parsed = parse_arguments(raw, tool, truncated_response=truncated_response)
    if not parsed.ok or parameters is None:
        return parsed
    violations = validate_arguments(parameters, parsed.args)
    if not violations:
        return parsed
    return ParsedArguments(
        "invalid_arguments",
        args=parsed.args,
        error=violations_message(tool, violations),
        violations=tuple(violations),
    )
