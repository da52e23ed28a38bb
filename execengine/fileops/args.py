"""Checking the file tools' arguments (a missing or mistyped one is a :class:`FileOpError`).

Apart from :mod:`.calls` (which knows the call context) so the operations, which also run
on a remote (:mod:`.serve`), need nothing of the engine.
"""

from __future__ import annotations

from typing import Any

from execengine.errors import FileOpError


def string_arg(args: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        got = "nothing" if value is None else type(value).__name__
        raise FileOpError(f"{name} must be a string, got {got}")
    return value


def int_arg(args: dict[str, Any], name: str, default: int, *, minimum: int = 0) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise FileOpError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise FileOpError(f"{name} must be at least {minimum}, got {value}")
    return value
