"""No module of the host package reaches into another object's private members.

``obj._name`` is allowed only on ``self``/``cls``/``super()``, or lexically inside a class
that owns ``_name`` (assigns ``self._name``, declares it, or defines it): a classmethod
filling in its own instance, a nested helper class of the owner. Everything else needs a
public, narrow method on the owner. ``from execengine.x import _name`` is refused the same
way (a private module, ``execengine._something``, is package-internal and fine).
"""

from __future__ import annotations

import ast
from pathlib import Path

import execengine

ROOT = Path(execengine.__file__).parent
#: names that are public API despite the underscore
PUBLIC = {
    "os._exit",  # the stdlib's exit-without-cleanup, what a forked child must call
    "_replace", "_asdict", "_fields", "_make",  # namedtuple's public methods
}
#: (file, expression) pairs left as they are, and why
ALLOWED: set[tuple[str, str]] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _owned(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in cls.body:
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return names


class _Finder(ast.NodeVisitor):
    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.owners: list[set[str]] = []
        self.found: list[str] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.owners.append(_owned(node))
        self.generic_visit(node)
        self.owners.pop()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.generic_visit(node)
        if not _private(node.attr) or node.attr in PUBLIC:
            return
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            return
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) \
                and base.func.id == "super":
            return
        text = ast.unparse(node)
        if text in PUBLIC or (self.rel, text) in ALLOWED:
            return
        if any(node.attr in owned for owned in self.owners):
            return
        self.found.append(f"{self.rel}:{node.lineno}: {text}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module.startswith("execengine"):
            base = ROOT.parent.joinpath(*module.split("."))
            for alias in node.names:
                is_module = (base / f"{alias.name}.py").exists() or (base / alias.name).is_dir()
                if _private(alias.name) and not is_module:
                    self.found.append(f"{self.rel}:{node.lineno}: from {module} import "
                                      f"{alias.name}")


def _violations(source: str, rel: str) -> list[str]:
    finder = _Finder(rel)
    finder.visit(ast.parse(source))
    return finder.found


def test_no_module_reaches_into_another_objects_private_members():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += _violations(path.read_text(encoding="utf-8"),
                             path.relative_to(ROOT).as_posix())
    assert found == []


def test_the_check_can_fail():
    bad = """
class Child:
    def close(self):
        self._launcher._grants.release(self._grants)
        other._thing()
from execengine.approval.gate import _persist
"""
    assert _violations(bad, "x.py") == [
        "x.py:4: self._launcher._grants", "x.py:5: other._thing",
        "x.py:6: from execengine.approval.gate import _persist"]
    good = """
import os
class Group:
    _v1: dict
    @classmethod
    def create(cls):
        group = cls()
        group._v1 = {}
        os._exit(0)
        return super()._make(group)
"""
    assert _violations(good, "x.py") == []
