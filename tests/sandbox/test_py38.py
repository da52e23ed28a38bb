"""The child runtime and the rendered stub stay Python 3.8 syntax, checked on every host.

``ast.parse(..., feature_version=(3, 8))`` refuses syntax newer than 3.8 (``match``,
parenthesised context managers, ...). It cannot see newer *library* calls; the real run
under a 3.8 interpreter in ``test_sandbox_bootstrap.py`` covers those where one exists.
"""

from __future__ import annotations

import ast

import pytest

from execengine._resources import sandbox_dir, stubs_dir
from execengine.engine.stub import render_stub

CHILD_MODULES = sorted(sandbox_dir().glob("*.py"))


def check_py38(source: str, name: str) -> None:
    ast.parse(source, filename=name, feature_version=(3, 8))


def test_every_child_module_is_found():
    names = {p.name for p in CHILD_MODULES}
    assert {"__init__.py", "bootstrap.py", "client.py", "helpers.py", "zmtp.py"} <= names
    assert stubs_dir().is_dir()


@pytest.mark.parametrize("path", CHILD_MODULES, ids=lambda p: p.name)
def test_child_module_is_python_3_8_syntax(path):
    check_py38(path.read_text(encoding="utf-8"), str(path))


def test_rendered_stub_is_python_3_8_syntax():
    schema = {"name": "search", "description": "Search.", "parameters": {
        "type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": ["integer", "null"], "default": 5},
            "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["query"]}}
    check_py38(render_stub([schema]), "hermes_tools.py")


@pytest.mark.parametrize("newer", [
    "match x:\n    case 1:\n        pass\n",
    "with (open('a') as f, open('b') as g):\n    pass\n",
    "def f(a, /, b): ...\nprint(f'{a=}')\nx = (y := 1)\ntry:\n    pass\nexcept* ValueError:\n"
    "    pass\n",
])
def test_the_check_refuses_newer_syntax(newer):
    with pytest.raises(SyntaxError):
        check_py38(newer, "newer.py")
