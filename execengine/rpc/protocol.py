"""Messages of the execute_code RPC protocol, version 1 (see ``docs/protocol.md``).

Pure functions: parse one frame from a child into a typed request, build the JSON replies.
Nothing here touches a socket, so the whole protocol is tested without one.

Containment: :func:`parse` never raises, whatever the bytes. Before a frame is decoded its
nesting depth is bounded (:func:`too_deep`, at C speed), so no JSON body can exhaust the
recursion limit here or in a tool later; the frame's size is bounded by the transport
before it is read. Replies are encoded so that no string can fail: text holding a lone
surrogate (a surrogate-escaped file name, an id sent as ``"\\ud800"``) is sent with JSON
escapes instead of raw UTF-8.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any, NamedTuple

VERSION = 1
#: longest request id accepted (ids are echoed back, so they are bounded)
MAX_ID_CHARS = 128
MAX_TOOL_NAME_CHARS = 128
#: deepest nesting of arrays/objects accepted in a message (the envelope counts as 1)
MAX_DEPTH = 64
#: most brackets outside strings in one message (bounds the depth scan's work)
MAX_BRACKETS = 2_000_000

#: a JSON string once its escaped backslashes and quotes are gone (see :func:`too_deep`)
_PLAIN_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


# Named tuples: made for every message, in a third of a frozen dataclass's time


class Hello(NamedTuple):
    exec_id: str
    token: str
    pid: int | None = None


class Call(NamedTuple):
    id: str
    tool: str
    args: dict[str, Any]
    #: the session cell's call credential the client sent (see ``Channel.open_cell``)
    cell: str | None = None


class Invalid(NamedTuple):
    """A message that cannot be served. ``id`` is set when the reply can name the request."""

    error: str
    id: str | None = None


Message = Hello | Call | Invalid


def too_deep(frame: bytes, limit: int = MAX_DEPTH, noun: str = "message") -> str | None:
    """Why ``frame`` (a ``noun``: a message, a task line) nests too deeply to be decoded,
    or None. Strings are skipped, so brackets inside them do not count; everything runs
    in C but one pass over the brackets, which :data:`MAX_BRACKETS` bounds."""
    if frame.count(b"[") + frame.count(b"{") <= limit:
        return None  # fast path: not even that many opening brackets anywhere
    # Escapes out first (backslash pairs, then backslash-quote, left to right as JSON reads
    # them), then every string runs quote to quote. Linear whatever the bytes: a pattern
    # that matches the escapes itself backtracks over an unterminated string of escaped
    # quotes from every later quote (quadratic: a 112 KB frame held the loop, and the
    # interpreter lock with it, for 28 s)
    plain = frame.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _PLAIN_STRING.sub(b"", plain).translate(None, _NOT_BRACKETS)
    if len(brackets) > MAX_BRACKETS:
        return f"{noun} has more than {MAX_BRACKETS} nested values"
    steps = array("b")  # signed bytes: +1 for an opening bracket, -1 (0xff) closing
    steps.frombytes(brackets.translate(_STEP))
    depth = max(accumulate(steps), default=0)
    if depth > limit:
        return f"{noun} nests deeper than {limit} levels"
    return None


#: a top-level ``"id"`` key, what follows it up to its value (see :func:`request_id`)
_ID_KEY = b'"id"'
_ID_VALUE = re.compile(rb'\s*:\s*(?:"([^"\\]{1,%d})"|(-?\d{1,%d}))\s*(?:[,}]|$)'
                       % (4 * MAX_ID_CHARS, MAX_ID_CHARS))
#: top-level ``"id"`` candidates looked at (each costs a scan of the frame before it)
_ID_TRIES = 8


def request_id(frame: bytes) -> str | None:
    """The id of a request that cannot be decoded (nested too deeply, not JSON), so that
    its error reply names it and the client fails that one call, not its connection.

    Best effort, without decoding: the first ``"id"`` key at the top level of the object
    whose value is a plain string (no escapes) or an integer. Every step runs in C: an
    occurrence of ``"id"`` is at the top level when the brackets before it, outside
    strings, leave exactly one open (strings are found as :func:`too_deep` finds them,
    escapes first). In valid JSON a ``"id"`` outside a string is always a string token.
    """
    if frame.lstrip()[:1] != b"{":
        return None
    # escaped backslashes and quotes made harmless, offsets kept
    plain = frame.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    pos = -1
    for _ in range(_ID_TRIES):
        pos = plain.find(_ID_KEY, pos + 1)
        if pos < 0:
            return None
        before = _PLAIN_STRING.sub(b"", plain[:pos])
        if before.count(b'"'):
            continue  # inside a string after all (an unterminated one before it)
        opened = before.count(b"{") + before.count(b"[")
        if opened - before.count(b"}") - before.count(b"]") != 1:
            continue
        value = _ID_VALUE.match(frame, pos + len(_ID_KEY))
        if value is None:
            continue
        text, number = value.groups()
        try:
            return _valid_id(text.decode("utf-8") if text is not None else int(number))
        except UnicodeDecodeError:
            return None
    return None


def parse(frame: bytes) -> Message:
    """Decode one application frame; never raises. A frame that cannot be decoded is
    :class:`Invalid` with the id :func:`request_id` finds in it."""
    try:
        deep = too_deep(frame)
        if deep is not None:
            return Invalid(deep, request_id(frame))
        obj = _loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        return Invalid(f"message is not UTF-8 JSON: {type(exc).__name__}", request_id(frame))
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
        cell = obj.get("cell")
        return Call(msg_id, tool, args,
                    cell if isinstance(cell, str) and len(cell) <= MAX_ID_CHARS else None)
    return Invalid(f"unknown message type {kind!r}", msg_id)


#: json's C scanner: one JSON value at a position of a string (what ``json.loads`` runs
#: after two regular-expression matches and three Python frames)
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads(text)``, the common case (no whitespace around the value) in C. The
    script's client decodes replies with its own copy (``sandbox/client.py``: the child's
    runtime imports nothing of the host's)."""
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)  # leading whitespace, or not JSON: its error
    if end != len(text):
        return json.loads(text)  # trailing whitespace, or extra data: its error
    return obj


def _valid_id(raw: Any) -> str | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        raw = str(raw)
    if isinstance(raw, str) and 0 < len(raw) <= MAX_ID_CHARS:
        return raw
    return None


def _dump(obj: dict[str, Any]) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON escapes are plain ASCII
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def welcome(exec_id: str, max_tool_calls: int, max_message_bytes: int | None = None) -> bytes:
    msg: dict[str, Any] = {"v": VERSION, "type": "welcome", "exec": exec_id,
                           "max_tool_calls": max_tool_calls}
    if max_message_bytes is not None:
        msg["max_message_bytes"] = max_message_bytes
    return _dump(msg)


def denied(error: str) -> bytes:
    return _dump({"v": VERSION, "type": "denied", "error": error})


#: json's own C string encoders: ``"..."`` with non-ASCII kept, and all-ASCII
_quote = json.encoder.encode_basestring
_quote_ascii = json.encoder.encode_basestring_ascii
_RESULT_HEAD = f'{{"v":{VERSION},"type":"result","id":'


def result(msg_id: str, text: str) -> bytes:
    """The reply to a call (every call gets one): built from a template, the hot path."""
    head = _RESULT_HEAD
    try:
        return (head + _quote(msg_id) + ',"result":' + _quote(text) + "}").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON escapes are plain ASCII
        return (head + _quote_ascii(msg_id) + ',"result":' + _quote_ascii(text)
                + "}").encode("ascii")


def error(msg_id: str | None, message: str) -> bytes:
    return _dump({"v": VERSION, "type": "error", "id": msg_id, "error": message})
