"""Checking one configuration value against its declaration (type, choices, range).

Used both by the YAML loader (:mod:`execengine._configload`) and by the config dataclasses
themselves when built in code, so ``CodeExecutionConfig(timeout=-1)`` fails exactly like
``timeout: -1`` in config.yaml. Choices are ``Literal`` types on the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
import reprlib
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from execengine.errors import ConfigError, did_you_mean

#: ``fail(key, message)`` builds the error to raise (the loader adds file, line, column)
Fail = Callable[[str, str], ConfigError]


#: the most characters of a value an error message quotes
SHOWN_CHARS = 200
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 120, 120
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8


def shown(value: Any) -> str:
    """``repr(value)`` for a message, at most :data:`SHOWN_CHARS` characters whatever the
    value (a list an alias bomb expanded, a megabyte string): never builds the whole."""
    text = _REPR.repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _plain(key: str, message: str) -> ConfigError:
    return ConfigError(message, key=key)


_HINTS: dict[type, dict[str, Any]] = {}


def field_types(cls: type) -> dict[str, Any]:
    """The resolved type hints of a config dataclass (cached: they never change)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def unwrap_optional(hint: Any) -> tuple[bool, Any]:
    """``(True, X)`` for ``X | None``, else ``(False, hint)``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return True, rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
    return False, hint


def choices_of(hint: Any) -> tuple[Any, ...] | None:
    """The allowed values of a ``Literal`` (or optional ``Literal``) type, else None."""
    optional, base = unwrap_optional(hint)
    if typing.get_origin(base) is not typing.Literal:
        return None
    values = typing.get_args(base)
    return (None, *values) if optional else values


_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def bad_placeholder(value: str) -> str | None:
    """The first ``${...}`` in ``value`` that does not hold a variable name, else None
    (references are expanded from the environment at use time: execengine.mcp.expand)."""
    for match in _PLACEHOLDER.finditer(value):
        if not _ENV_NAME.fullmatch(match.group(1)):
            return match.group(0)
    return None


def check_value(key: str, value: Any, hint: Any, f: dataclasses.Field[Any],
                fail: Fail = _plain) -> Any:
    """Coerce and check one value; returns the value to store (ints become floats where
    a float is declared, a list or a single string becomes a tuple)."""
    meta = f.metadata
    if meta.get("string_map"):
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise fail(key, f"expected a mapping of strings, got {shown(value)}")
        for k, v in value.items():
            bad = bad_placeholder(v)
            if bad:
                raise fail(f"{key}.{k}", f"${{...}} must hold an environment variable "
                                         f"name, got {shown(bad)}")
        return value
    if meta.get("named"):
        cls = meta["named"]
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and isinstance(v, cls) for k, v in value.items()):
            raise fail(key, f"expected a mapping of names to {cls.__name__}, got {shown(value)}")
        return value
    optional, base = unwrap_optional(hint)
    if value is None:
        if optional:
            return None
        raise fail(key, f"expected {_describe(base)}, got null")
    if typing.get_origin(base) is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise fail(key, f"expected a list of strings, got {shown(value)}")
        return tuple(value)
    choices = choices_of(hint)
    if choices is not None:
        if value not in choices:
            allowed = ", ".join(repr(c) if c is not None else "null" for c in choices)
            suggestion = (did_you_mean(value, [c for c in choices if c])
                          if isinstance(value, str) and len(value) <= SHOWN_CHARS else "")
            raise fail(key, f"expected one of {allowed}, got {shown(value)}{suggestion}")
        return value
    if base is bool:
        if not isinstance(value, bool):
            raise fail(key, f"expected true or false, got {shown(value)}")
    elif base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(key, f"expected an integer, got {shown(value)}")
    elif base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(key, f"expected a number, got {shown(value)}")
        value = float(value)
        if not math.isfinite(value):
            raise fail(key, f"expected a finite number, got {shown(value)}")
    elif base is str and not isinstance(value, str):
        raise fail(key, f"expected a string, got {shown(value)}")
    low, high = meta.get("min"), meta.get("max")
    if low is not None and value < low:
        raise fail(key, f"must be >= {low}, got {shown(value)}")
    if high is not None and value > high:
        raise fail(key, f"must be <= {high}, got {shown(value)}")
    return value


def _describe(base: Any) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    return names.get(base, "a list of strings")


def validate_section(obj: Any, prefix: str) -> None:
    """Check every option of a frozen config dataclass instance in place (``__post_init__``);
    sections must be instances of their declared class."""
    hints = field_types(type(obj))
    for f in dataclasses.fields(obj):
        if f.metadata.get("internal"):
            continue
        key = f"{prefix}.{f.name}" if prefix else f.name
        value = getattr(obj, f.name)
        if f.metadata.get("section"):
            if not isinstance(value, hints[f.name]):
                raise ConfigError(f"expected a {hints[f.name].__name__}, got "
                                  f"{type(value).__name__}", key=key)
            continue
        checked = check_value(key, value, hints[f.name], f)
        if checked is not value:
            object.__setattr__(obj, f.name, checked)
