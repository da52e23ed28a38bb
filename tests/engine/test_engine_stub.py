from __future__ import annotations

import ast

import pytest

from execengine.engine.stub import render_stub, stub_function
from execengine.errors import SchemaError
from execengine.registry import ToolRegistry


def _fn(name, props, required=(), desc="Does things."):
    return {"name": name, "description": desc,
            "parameters": {"type": "object", "properties": props, "required": list(required)}}


def test_signature_required_first_defaults_and_hints():
    f = stub_function("search_files", _fn("search_files", {
        "target": {"type": "string", "default": "content"},
        "pattern": {"type": "string", "description": "regex"},
        "limit": {"type": "integer", "default": 50},
        "file_glob": {"type": ["string", "null"]},
        "tags": {"type": "array", "default": ["a"]},
    }, required=["pattern"]))
    assert f.signature == ("pattern: str, target: str = 'content', limit: int = 50, "
                           "file_glob: str | None = None, tags: list | None = None")
    assert f.optional == ("file_glob", "tags")
    assert "pattern: regex" in f.doc


def test_rendered_module_compiles_sorted_with_helpers_and_aio():
    reg = ToolRegistry.with_builtins(plugins=False)
    schemas = [d["function"] for d in reg.get_tool_definitions()]
    src = render_stub(schemas)
    tree = ast.parse(src)
    funcs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and
             not n.name.startswith("_")]
    assert funcs == sorted(funcs) and "read_file" in funcs
    aio = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "aio")
    assert [n.name for n in aio.body if isinstance(n, ast.AsyncFunctionDef)] == funcs
    assert "from _execengine.helpers import json_parse, shell_quote, retry" in src
    reg.close()


def test_empty_stub_still_compiles():
    src = render_stub([])
    compile(src, "x", "exec")
    assert "__all__ = [\"aio\"" in src


def test_descriptions_and_defaults_cannot_inject_code():
    evil = '"""\nimport os; os.system("boom")\n"""'
    src = render_stub([_fn("web_search", {
        "q": {"type": "string", "default": evil, "description": evil}}, desc=evil)])
    tree = ast.parse(src)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "system"]
    assert calls == []


def test_bad_names():
    f = stub_function("terminal", _fn("terminal", {
        "command": {"type": "string"}, "class": {"type": "string"},
        "a-b": {"type": "string"}}, required=["command"]))
    assert f.signature == "command: str"
    with pytest.raises(SchemaError):
        stub_function("not-valid", _fn("x", {}))
    with pytest.raises(SchemaError):
        stub_function("aio", _fn("aio", {}))
