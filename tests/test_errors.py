"""One home for every exception, and the tree drawn in its docstring matches the code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import execengine
from execengine import errors


def _drawn_tree() -> dict[str, str | None]:
    """``{class name: parent name}`` read from the drawing in the errors module docstring."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        m = re.match(r"^ {4}([ │]*(?:├── |└── )?)([A-Z]\w+)\b", line)
        if m is None:
            continue
        depth = len(m.group(1))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[m.group(2)] = stack[-1][1] if stack else None
        stack.append((depth, m.group(2)))
    return parents


def _real_tree() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name, cls in vars(errors).items():
        if inspect.isclass(cls) and issubclass(cls, errors.ExecEngineError):
            ours = [b for b in cls.__bases__ if issubclass(b, errors.ExecEngineError)]
            out[name] = ours[0].__name__ if ours else None
    return out


def test_the_drawn_tree_is_the_class_tree():
    drawn = _drawn_tree()
    assert drawn["ExecEngineError"] is None and len(drawn) > 10
    assert drawn == _real_tree()


def test_every_exception_class_lives_in_errors():
    elsewhere = []
    for info in pkgutil.walk_packages(execengine.__path__, "execengine."):
        if info.name.endswith("__main__"):
            continue  # running it is what importing it does
        try:
            module = importlib.import_module(info.name)
        except errors.MissingExtraError:  # a framework integration without its extra
            continue
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == info.name and info.name != "execengine.errors"):
                elsewhere.append(f"{info.name}.{name}")
    assert elsewhere == []


def test_terminal_error_is_not_a_tool_definition_problem():
    assert not issubclass(errors.TerminalError, errors.ToolError)
    assert issubclass(errors.TerminalError, errors.ExecEngineError)


def test_handshake_error_is_raised_where_a_helper_does_not_say_ready():
    source = inspect.getsource(importlib.import_module("execengine.isolation.spawner"))
    assert "raise HandshakeError(" in source
