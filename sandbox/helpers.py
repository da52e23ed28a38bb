"""Helpers offered to scripts next to the tool functions: ``json_parse``, ``shell_quote``,
``retry``. Compatible with scripts written for ``hermes_tools``."""

from __future__ import annotations

import json
import re
import time

TYPE_CHECKING = False  # no typing import at run time: the child starts fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")

__all__ = ["json_parse", "retry", "shell_quote"]

_FENCE = re.compile(r"\A```[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)\r?\n?```\s*\Z", re.DOTALL)


def json_parse(text: str | bytes | bytearray) -> Any:
    """Parse JSON leniently: a BOM, surrounding whitespace, a Markdown code fence around the
    document and trailing commas before ``]`` / ``}`` are tolerated; control characters
    inside strings are accepted. Bytes are decoded as UTF-8. Anything else that is not JSON
    raises :class:`json.JSONDecodeError` (a ``ValueError``) for the original text."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8-sig")
    if not isinstance(text, str):
        raise TypeError(f"json_parse() takes a str or bytes, not {type(text).__name__}")
    cleaned = text.lstrip("\ufeff").strip()
    fenced = _FENCE.match(cleaned)
    if fenced:
        cleaned = fenced.group(1).strip()
    try:
        return json.loads(cleaned, strict=False)
    except ValueError as exc:
        first_error = exc
    relaxed = _drop_trailing_commas(cleaned)
    if relaxed != cleaned:
        try:
            return json.loads(relaxed, strict=False)
        except ValueError:
            pass
    raise first_error


def _drop_trailing_commas(text: str) -> str:
    """``text`` without commas that are followed (after whitespace) by ``]`` or ``}``,
    leaving string literals alone."""
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        if ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "]}":
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def shell_quote(s: object) -> str:
    """``s`` quoted for a POSIX shell (``str()`` of it if it is not a string)."""
    import shlex  # here: most scripts never quote, and the child starts without it

    return shlex.quote(s if isinstance(s, str) else str(s))


def retry(fn: Callable[[], T], max_attempts: int = 3, delay: float = 2) -> T:
    """Call ``fn()`` until it returns, at most ``max_attempts`` times, sleeping ``delay``,
    then ``2 * delay``, ``4 * delay``... between attempts; re-raise the last exception.
    Only :class:`Exception` is retried (not ``KeyboardInterrupt`` / ``SystemExit``)."""
    if not callable(fn):
        raise TypeError(f"retry() needs a callable, got {type(fn).__name__}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts!r}")
    if delay < 0:
        raise ValueError(f"delay must not be negative, got {delay!r}")
    for attempt in range(max_attempts):
        try:
            return fn()
        except Exception:
            if attempt == max_attempts - 1:
                raise
            time.sleep(delay * (2 ** attempt))
    raise AssertionError("unreachable")
