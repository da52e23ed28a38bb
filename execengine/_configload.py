"""Reading ``config.yaml`` into the configuration dataclasses of :mod:`execengine.config`.

YAML is composed into nodes first so every error can name the line and column of the *key*
at fault; values are then checked against the option declarations (types, choices, ranges,
unknown keys with a close-match suggestion, duplicate keys). The root class is passed in
(``load(path, Config)``), so this module does not import :mod:`execengine.config`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from execengine._configcheck import check_value, field_types
from execengine.errors import ConfigError, did_you_mean

C = TypeVar("C")

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


def load(path: str | Path | None, root: type[C]) -> C:
    found, why = find_config(path)
    if found is None:
        return root()
    try:
        text = found.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found (from {why})", path=str(found)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file: {exc}", path=str(found)) from exc
    return parse(text, root, source=str(found))


def parse(text: str, root: type[C], *, source: str = "<string>") -> C:
    """Validate YAML text into ``root`` (``ConfigError`` on any problem)."""
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
        return root(source=source)  # type: ignore[call-arg]
    data = _Located(node, source)
    origins: dict[str, str] = {}
    values = _build(root, data, "", source, origins)
    return root(**values, source=source, origins=origins)  # type: ignore[call-arg]


class _Located:
    """A YAML node, positioned at its key (``at``) when it is a mapping's value: errors
    about a value point at the key that holds it, wherever the value itself starts."""

    def __init__(self, node: yaml.Node, source: str, at: yaml.Node | None = None) -> None:
        self.node = node
        self.source = source
        mark = (at or node).start_mark
        self.line = mark.line + 1
        self.column = mark.column + 1

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
            out[name] = _Located(vnode, self.source, at=knode)
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
    hints = field_types(cls)
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
        else:
            values[name] = check_value(key, item.scalar(), hints[name], f, item.error)
            origins[key] = f"{source}:{item.line}"
    return values


def apply_overrides(config: C, overrides: Mapping[str, Any], *, origin: str) -> C:
    """Replace dotted keys (``{"code_execution.timeout": 5}``) with validated values."""
    result: Any = config
    origins = dict(result.origins)
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
        hint = field_types(type(leaf_owner))[leaf]
        new_value = check_value(dotted, value, hint, f)
        replaced: Any = dataclasses.replace(leaf_owner, **{leaf: new_value})
        for owner, part in zip(reversed(chain[:-1]), reversed(parts[:-1]), strict=True):
            replaced = dataclasses.replace(owner, **{part: replaced})
        result = replaced
        origins[dotted] = origin
    done: C = dataclasses.replace(result, origins=origins)
    return done


def _has_field(obj: Any, name: str, *, section: bool) -> bool:
    for f in dataclasses.fields(obj):
        if f.name == name and not f.metadata.get("internal"):
            return bool(f.metadata.get("section")) == section
    return False


def _suggest(obj: Any, name: str) -> str:
    return did_you_mean(name, [f.name for f in dataclasses.fields(obj)])
