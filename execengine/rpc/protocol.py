"""Messages of the execute_code RPC protocol, version 1 (see ``docs/protocol.md``).

Pure functions: parse one frame from a child into a typed request, build the JSON replies.
Nothing here touches a socket, so the whole protocol is tested without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

VERSION = 1
#: longest request id accepted (ids are echoed back, so they are bounded)
MAX_ID_CHARS = 128
MAX_TOOL_NAME_CHARS = 128


@dataclass(frozen=True)
class Hello:
    exec_id: str
    token: str
    pid: int | None = None


@dataclass(frozen=True)
class Call:
    id: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Invalid:
    """A message that cannot be served. ``id`` is set when the reply can name the request."""

    error: str
    id: str | None = None


Message = Hello | Call | Invalid


def parse(frame: bytes) -> Message:
    """Decode one application frame; never raises."""
    try:
        obj = json.loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return Invalid(f"message is not UTF-8 JSON: {type(exc).__name__}")
    if not isinstance(obj, dict):
        return Invalid(f"message must be a JSON object, got {type(obj).__name__}")
    raw_id = obj.get("id")
    msg_id = _valid_id(raw_id)
    if obj.get("v") != VERSION:
        return Invalid(f"unsupported protocol version {obj.get('v')!r} (expected {VERSION})",
                       msg_id)
    kind = obj.get("type")
    if kind == "hello":
        exec_id, token, pid = obj.get("exec"), obj.get("token"), obj.get("pid")
        if not isinstance(exec_id, str) or not isinstance(token, str):
            return Invalid("hello needs string fields 'exec' and 'token'")
        return Hello(exec_id, token, pid if isinstance(pid, int) else None)
    if kind == "call":
        if msg_id is None:
            return Invalid("call needs a string 'id' of at most "
                           f"{MAX_ID_CHARS} characters")
        tool = obj.get("tool")
        if not isinstance(tool, str) or not tool or len(tool) > MAX_TOOL_NAME_CHARS:
            return Invalid("call needs a non-empty string 'tool'", msg_id)
        args = obj.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return Invalid(f"'args' must be a JSON object, got {type(args).__name__}", msg_id)
        return Call(msg_id, tool, args)
    return Invalid(f"unknown message type {kind!r}", msg_id)


def _valid_id(raw: Any) -> str | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        raw = str(raw)
    if isinstance(raw, str) and 0 < len(raw) <= MAX_ID_CHARS:
        return raw
    return None


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def welcome(exec_id: str, max_tool_calls: int, max_message_bytes: int | None = None) -> bytes:
    msg: dict[str, Any] = {"v": VERSION, "type": "welcome", "exec": exec_id,
                           "max_tool_calls": max_tool_calls}
    if max_message_bytes is not None:
        msg["max_message_bytes"] = max_message_bytes
    return _dump(msg)


def denied(error: str) -> bytes:
    return _dump({"v": VERSION, "type": "denied", "error": error})


def result(msg_id: str, text: str) -> bytes:
    return _dump({"v": VERSION, "type": "result", "id": msg_id, "result": text})


def error(msg_id: str | None, message: str) -> bytes:
    return _dump({"v": VERSION, "type": "error", "id": msg_id, "error": message})
