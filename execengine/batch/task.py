"""One task of a batch, and the JSONL reader that turns lines into tasks.

A task line is a JSON object::

    {"id": "t1", "code": "print(1)", "cwd": "/work", "toolsets": ["file"],
     "timeout": 30, "mode": "strict", "session": "s1", "retry_safe": true, "meta": {...}}

``id`` and ``code`` are required; ``meta`` is any JSON value, echoed into the result. A line
that is not such an object (bad JSON, nested deeper than :data:`MAX_DEPTH` levels, a missing
or mistyped key, an unknown key, an id seen before) becomes an :class:`InvalidLine` carrying
the line number and the reason: it is reported as a result and never stops the batch. The
depth is checked before the line is decoded (a line 1,100 levels deep was a RecursionError
that ended the batch, on every rerun). The reader streams: it never holds the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from execengine.config import MAX_TIMEOUT, is_timeout
from execengine.rpc.connection import too_deep

MODES = ("project", "strict")
KEYS = ("id", "code", "cwd", "toolsets", "timeout", "mode", "session", "retry_safe", "meta")
#: deepest nesting of a task line (the object itself is one level; ``meta`` gets the rest)
MAX_DEPTH = 100


@dataclass(frozen=True)
class Task:
    id: str
    code: str
    line: int = 0
    cwd: str | None = None
    toolsets: tuple[str, ...] | None = None
    timeout: float | None = None
    mode: str | None = None
    session: str | None = None
    #: the task may run again after its worker was lost (its tool calls may repeat)
    retry_safe: bool = False
    meta: Any = None

    def to_wire(self) -> dict[str, Any]:
        """A plain dict (what crosses to a Ray actor)."""
        return {"id": self.id, "code": self.code, "line": self.line, "cwd": self.cwd,
                "toolsets": list(self.toolsets) if self.toolsets is not None else None,
                "timeout": self.timeout, "mode": self.mode, "session": self.session,
                "retry_safe": self.retry_safe, "meta": self.meta}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Task:
        toolsets = d.get("toolsets")
        return cls(id=d["id"], code=d["code"], line=d.get("line", 0), cwd=d.get("cwd"),
                   toolsets=tuple(toolsets) if toolsets is not None else None,
                   timeout=d.get("timeout"), mode=d.get("mode"), session=d.get("session"),
                   retry_safe=bool(d.get("retry_safe")), meta=d.get("meta"))


@dataclass(frozen=True)
class InvalidLine:
    """A task line that could not be read; ``id`` when the line had a usable one."""

    line: int
    reason: str
    id: str | None = None


def parse_task(value: Any, line: int = 0) -> Task | InvalidLine:
    """Validate one decoded task line."""
    if not isinstance(value, dict):
        return InvalidLine(line, f"line {line}: expected a JSON object, got "
                                 f"{type(value).__name__}")
    raw_id = value.get("id")
    tid = _task_id(raw_id)

    def bad(reason: str) -> InvalidLine:
        return InvalidLine(line, f"line {line}: {reason}", tid)

    unknown = sorted(k for k in value if k not in KEYS)
    if unknown:
        return bad(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                   f"(known: {', '.join(KEYS)})")
    if tid is None:
        return bad("'id' must be a non-empty string or an integer"
                   if "id" in value else "missing 'id'")
    code = value.get("code")
    if not isinstance(code, str):
        return bad("'code' must be a string" if "code" in value else "missing 'code'")
    cwd = value.get("cwd")
    if cwd is not None and not (isinstance(cwd, str) and cwd):
        return bad("'cwd' must be a non-empty string")
    toolsets = value.get("toolsets")
    if toolsets is not None and not (isinstance(toolsets, list)
                                     and all(isinstance(t, str) and t for t in toolsets)):
        return bad("'toolsets' must be a list of toolset names")
    timeout = value.get("timeout")
    if timeout is not None and not is_timeout(timeout):
        return bad(f"'timeout' must be a positive number of seconds, at most {MAX_TIMEOUT:g}")
    mode = value.get("mode")
    if mode is not None and mode not in MODES:
        return bad(f"'mode' must be one of {', '.join(MODES)}")
    session = value.get("session")
    if session is not None and not (isinstance(session, str) and session):
        return bad("'session' must be a non-empty string")
    retry_safe = value.get("retry_safe", False)
    if not isinstance(retry_safe, bool):
        return bad("'retry_safe' must be true or false")
    return Task(id=tid, code=code, line=line, cwd=cwd,
                toolsets=tuple(toolsets) if toolsets is not None else None,
                timeout=float(timeout) if timeout is not None else None, mode=mode,
                session=session, retry_safe=retry_safe, meta=value.get("meta"))


def _task_id(raw: Any) -> str | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, str) and raw.strip():
        return raw
    return None


def read_tasks(path: str) -> Iterator[Task | InvalidLine]:
    """Tasks of a JSONL file, one per non-blank line, lazily; a repeated id is invalid."""
    seen: dict[str, int] = {}
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            deep = too_deep(raw, MAX_DEPTH, noun="the line")
            if deep is not None:
                yield InvalidLine(number, f"line {number}: {deep}")
                continue
            try:
                value = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                yield InvalidLine(number, f"line {number}: not valid JSON: {exc}")
                continue
            except RecursionError:  # not reached past the depth check; never the batch's end
                yield InvalidLine(number, f"line {number}: nested too deeply to decode")
                continue
            item = parse_task(value, number)
            if isinstance(item, Task):
                first = seen.setdefault(item.id, number)
                if first != number:
                    yield InvalidLine(number, f"line {number}: duplicate id {item.id!r} "
                                              f"(first on line {first})")
                    continue
            yield item
