"""Reading ``config.yaml`` into :class:`execengine.config.Config`.

YAML is composed into nodes first so every error can name the line and column; values are
then checked against the option declarations in :mod:`execengine.config` (types, choices,
ranges, unknown keys with a close-match suggestion, duplicate keys).
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from execengine.config import Config
from execengine.errors import ConfigError, did_you_mean

ENV_VAR = "EXECENGINE_CONFIG"


def default_config_path() -> Path:
    return Path.home() / ".execengine" / "config.yaml"


def find_config(path: str | Path | None = None) -> tuple[Path | None, str]:
    """The config file to read and why: explicit, $EXECENGINE_CONFIG, home, or none."""
    if path is not None:
        return Path(path).expanduser(), "explicit path"
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser(), f"${ENV_VAR}"
    home = default_config_path()
    if home.is_file():
        return home, "home default"
    return None, "no file (defaults)"


def load(path: str | Path | None = None) -> Config:
    found, why = find_config(path)
    if found is None:
        return Config()
    try:
        text = found.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found (from {why})", path=str(found)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file: {exc}", path=str(found)) from exc
    return parse(text, source=str(found))


def parse(text: str, *, source: str = "<string>") -> Config:
    """Validate YAML text into a :class:`Config` (``ConfigError`` on any problem)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ConfigError(
            f"YAML syntax error: {exc.problem}",
            path=source,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {exc}", path=source) from exc
    if node is None:
        return Config(source=source)
    data = _Located(node, source)
    origins: dict[str, str] = {}
    values = _build(Config, data, "", source, origins)
    return Config(**values, source=source, origins=origins)


class _Located:
    """A YAML node with its position, converted lazily."""

    def __init__(self, node: yaml.Node, source: str) -> None:
        self.node = node
        self.source = source
        self.line = node.start_mark.line + 1
        self.column = node.start_mark.column + 1

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(message, path=self.source, key=key, line=self.line, column=self.column)

    def mapping(self, key: str) -> dict[str, _Located]:
        if not isinstance(self.node, yaml.MappingNode):
            raise self.error(key or "<top level>", f"expected a mapping, got {self._kind()}")
        out: dict[str, _Located] = {}
        for knode, vnode in self.node.value:
            if not isinstance(knode, yaml.ScalarNode):
                raise _Located(knode, self.source).error(key, "keys must be plain strings")
            name = knode.value
            if name in out:
                raise _Located(knode, self.source).error(
                    _join(key, name), "duplicate key (it appears earlier in the same mapping)"
                )
            out[name] = _Located(vnode, self.source)
        return out

    def scalar(self) -> Any:
        loader = yaml.SafeLoader("")
        try:
            return loader.construct_object(self.node, deep=True)
        finally:
            loader.dispose()

    def _kind(self) -> str:
        if isinstance(self.node, yaml.MappingNode):
            return "a mapping"
        if isinstance(self.node, yaml.SequenceNode):
            return "a list"
        return f"{self.scalar()!r}"


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _build(
    cls: type, data: _Located, prefix: str, source: str, origins: dict[str, str]
) -> dict[str, Any]:
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for name, item in data.mapping(prefix).items():
        key = _join(prefix, name)
        f = fields.get(name)
        if f is None:
            hint = did_you_mean(name, fields)
            valid = ", ".join(sorted(fields))
            raise item.error(key, f"unknown key{hint}; valid keys here: {valid}")
        if f.metadata.get("section"):
            if item.node.tag == "tag:yaml.org,2002:null":
                continue
            sub = hints[name]
            values[name] = sub(**_build(sub, item, key, source, origins))
        elif f.metadata.get("named"):
            values[name] = _build_named(f.metadata["named"], item, key, source, origins)
        elif f.metadata.get("string_map"):
            values[name] = _string_map(item, key, source, origins)
        else:
            values[name] = check_value(key, item.scalar(), hints[name], f, item.error)
            origins[key] = f"{source}:{item.line}"
    return values


def _build_named(
    cls: type, data: _Located, prefix: str, source: str, origins: dict[str, str]
) -> dict[str, Any]:
    if data.node.tag == "tag:yaml.org,2002:null":
        return {}
    out: dict[str, Any] = {}
    for name, item in data.mapping(prefix).items():
        key = _join(prefix, name)
        if not NAME_RE.fullmatch(name):
            raise item.error(key, "names here are letters, digits, '_' and '-' "
                                  f"(at most 64), got {name!r}")
        entry = cls(**_build(cls, item, key, source, origins))
        problem = entry.check() if hasattr(entry, "check") else None
        if problem:
            raise item.error(key, problem)
        out[name] = entry
        origins.setdefault(key, f"{source}:{item.line}")
    return out


def _string_map(data: _Located, prefix: str, source: str,
                origins: dict[str, str]) -> dict[str, str]:
    if data.node.tag == "tag:yaml.org,2002:null":
        return {}
    out: dict[str, str] = {}
    for name, item in data.mapping(prefix).items():
        key = _join(prefix, name)
        value = item.scalar()
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise item.error(key, f"expected a string, got {value!r}")
        out[name] = check_placeholders(key, str(value), item.error)
        origins[key] = f"{source}:{item.line}"
    origins[prefix] = f"{source}:{data.line}"
    return out


def check_placeholders(key: str, value: str, fail: Any) -> str:
    """``${NAME}`` references must name an environment variable (expanded at use time)."""
    for match in PLACEHOLDER_RE.finditer(value):
        if not ENV_NAME_RE.fullmatch(match.group(1)):
            raise fail(key, f"${{...}} must hold an environment variable name, got "
                            f"{match.group(0)!r}")
    return value


NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
PLACEHOLDER_RE = re.compile(r"\$\{([^}]*)\}")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_value(key: str, value: Any, hint: Any, f: dataclasses.Field[Any], fail: Any) -> Any:
    """Coerce and check one value against its declared type and constraints."""
    meta = f.metadata
    if meta.get("string_map"):
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise fail(key, f"expected a mapping of strings, got {value!r}")
        return {k: check_placeholders(f"{key}.{k}", v, fail) for k, v in value.items()}
    optional, base = _unwrap_optional(hint)
    if value is None:
        if optional:
            return None
        raise fail(key, f"expected {_describe(base)}, got null")
    if typing.get_origin(base) is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(key, f"expected a list of strings, got {value!r}")
        return tuple(value)
    if base is bool:
        if not isinstance(value, bool):
            raise fail(key, f"expected true or false, got {value!r}")
    elif base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(key, f"expected an integer, got {value!r}")
    elif base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(key, f"expected a number, got {value!r}")
        value = float(value)
    elif base is str and not isinstance(value, str):
        raise fail(key, f"expected a string, got {value!r}")
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        shown = ", ".join(repr(c) if c is not None else "null" for c in choices)
        hint_text = did_you_mean(value, [c for c in choices if c]) if isinstance(value, str) else ""
        raise fail(key, f"expected one of {shown}, got {value!r}{hint_text}")
    low, high = meta.get("min"), meta.get("max")
    if low is not None and value < low:
        raise fail(key, f"must be >= {low}, got {value!r}")
    if high is not None and value > high:
        raise fail(key, f"must be <= {high}, got {value!r}")
    return value


def _unwrap_optional(hint: Any) -> tuple[bool, Any]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return True, rest[0]
    return False, hint


def _describe(base: Any) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    return names.get(base, "a list of strings")


def apply_overrides(config: Config, overrides: Mapping[str, Any], *, origin: str) -> Config:
    """Replace dotted keys (``{"code_execution.timeout": 5}``) with validated values."""
    origins = dict(config.origins)
    result = config
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        chain: list[Any] = [result]
        for part in parts[:-1]:
            parent = chain[-1]
            if not _has_field(parent, part, section=True):
                raise ConfigError(f"unknown section{_suggest(parent, part)}", key=dotted)
            chain.append(getattr(parent, part))
        leaf_owner = chain[-1]
        leaf = parts[-1]
        if not _has_field(leaf_owner, leaf, section=False):
            raise ConfigError(f"unknown key{_suggest(leaf_owner, leaf)}", key=dotted)
        f = next(f for f in dataclasses.fields(leaf_owner) if f.name == leaf)
        hint = typing.get_type_hints(type(leaf_owner))[leaf]

        def fail(key: str, message: str) -> ConfigError:
            return ConfigError(message, key=key)

        new_value = check_value(dotted, value, hint, f, fail)
        replaced: Any = dataclasses.replace(leaf_owner, **{leaf: new_value})
        for owner, part in zip(reversed(chain[:-1]), reversed(parts[:-1]), strict=True):
            replaced = dataclasses.replace(owner, **{part: replaced})
        result = replaced
        origins[dotted] = origin
    return dataclasses.replace(result, origins=origins)


def _has_field(obj: Any, name: str, *, section: bool) -> bool:
    for f in dataclasses.fields(obj):
        if f.name == name and not f.metadata.get("internal"):
            return bool(f.metadata.get("section")) == section
    return False


def _suggest(obj: Any, name: str) -> str:
    return did_you_mean(name, [f.name for f in dataclasses.fields(obj)])
