"""Reading ``config.yaml`` into the configuration dataclasses of :mod:`execengine.config`.

YAML is composed into nodes first so every error can name the line and column of the *key*
at fault; values are then checked against the option declarations (types, choices, ranges,
unknown keys with a close-match suggestion, duplicate keys). Every problem of the file is
reported at once (one :class:`ConfigError` listing them). Composing is bounded
(:mod:`execengine._yamlbound`: nesting depth, values once aliases are expanded), and a
message quotes at most a few hundred characters of a value. The root class is passed in
(``load(path, Config)``), so this module does not import :mod:`execengine.config`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from execengine._configcheck import bad_placeholder, check_value, field_types, shown
from execengine._yamlbound import compose
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
    """Validate YAML text into ``root``; ``ConfigError`` listing every problem."""
    try:
        node = compose(text, source)
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
    problems: list[ConfigError] = []
    values = _build(root, data, "", source, origins, problems)
    if problems:  # in the order of the file
        problems.sort(key=lambda p: (p.line or 0, p.column or 0))
        raise ConfigError.several(problems, path=source)
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

    def mapping(self, key: str, problems: list[ConfigError]) -> dict[str, _Located]:
        """The entries of a mapping; a key that is not a plain string or repeats one is a
        problem and skipped. Not a mapping: ``ConfigError``."""
        if not isinstance(self.node, yaml.MappingNode):
            raise self.error(key or "<top level>", f"expected a mapping, got {self._kind()}")
        out: dict[str, _Located] = {}
        for knode, vnode in self.node.value:
            if not isinstance(knode, yaml.ScalarNode):
                problems.append(_Located(knode, self.source).error(
                    key or "<top level>", "keys must be plain strings"))
                continue
            name = knode.value
            if name in out:
                problems.append(_Located(knode, self.source).error(
                    _join(key, name), "duplicate key (it appears earlier in the same mapping)"))
                continue
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
        return shown(self.scalar())


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _build(cls: type, data: _Located, prefix: str, source: str, origins: dict[str, str],
           problems: list[ConfigError]) -> dict[str, Any]:
    """The checked values of one section; each problem is added to ``problems`` and its
    key left out (the caller builds nothing from a section that had one)."""
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    hints = field_types(cls)
    values: dict[str, Any] = {}
    try:
        entries = data.mapping(prefix, problems)
    except ConfigError as exc:
        problems.append(exc)
        return values
    for name, item in entries.items():
        key = _join(prefix, name)
        f = fields.get(name)
        try:
            if f is None:
                hint = did_you_mean(name, fields)
                valid = ", ".join(sorted(fields))
                raise item.error(key, f"unknown key{hint}; valid keys here: {valid}")
            if f.metadata.get("section"):
                if item.node.tag == "tag:yaml.org,2002:null":
                    continue
                sub = hints[name]
                before = len(problems)
                sub_values = _build(sub, item, key, source, origins, problems)
                if len(problems) == before:
                    values[name] = _make(sub, sub_values, item, key)
            elif f.metadata.get("named"):
                values[name] = _build_named(f.metadata["named"], item, key, source, origins,
                                            problems)
            elif f.metadata.get("string_map"):
                values[name] = _string_map(item, key, source, origins, problems)
            else:
                values[name] = check_value(key, item.scalar(), hints[name], f, item.error)
                origins[key] = f"{source}:{item.line}"
        except ConfigError as exc:
            problems.append(exc)
    return values


def _make(cls: type, values: dict[str, Any], item: _Located, key: str) -> Any:
    """``cls(**values)``; a rule across its options that fails points at ``item``."""
    try:
        return cls(**values)
    except ConfigError as exc:
        if exc.line is not None:
            raise
        raise item.error(exc.key or key, exc.reason) from None


#: names of entries in named sections (mcp_servers.<name>)
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _build_named(cls: type, data: _Located, prefix: str, source: str,
                 origins: dict[str, str], problems: list[ConfigError]) -> dict[str, Any]:
    if data.node.tag == "tag:yaml.org,2002:null":
        return {}
    out: dict[str, Any] = {}
    for name, item in data.mapping(prefix, problems).items():
        key = _join(prefix, name)
        if not _NAME.fullmatch(name):
            problems.append(item.error(key, "names here are letters, digits, '_' and '-' "
                                            f"(at most 64), got {shown(name)}"))
            continue
        before = len(problems)
        values = _build(cls, item, key, source, origins, problems)
        if len(problems) > before:
            continue
        try:
            out[name] = cls(**values)
        except ConfigError as exc:  # a rule across options: point at the entry
            problems.append(item.error(key, exc.reason))
            continue
        origins.setdefault(key, f"{source}:{item.line}")
    return out


def _string_map(data: _Located, prefix: str, source: str, origins: dict[str, str],
                problems: list[ConfigError]) -> dict[str, str]:
    if data.node.tag == "tag:yaml.org,2002:null":
        return {}
    out: dict[str, str] = {}
    for name, item in data.mapping(prefix, problems).items():
        key = _join(prefix, name)
        value = item.scalar()
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            problems.append(item.error(key, f"expected a string, got {shown(value)}"))
            continue
        bad = bad_placeholder(str(value))
        if bad:
            problems.append(item.error(key, f"${{...}} must hold an environment variable "
                                            f"name, got {shown(bad)}"))
            continue
        out[name] = str(value)
        origins[key] = f"{source}:{item.line}"
    origins[prefix] = f"{source}:{data.line}"
    return out


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
