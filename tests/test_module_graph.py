"""The host package's import graph: no circles, and no imports hidden inside functions.

Imports under ``if TYPE_CHECKING:`` are annotations only and do not count. An import inside a
function is allowed only for an optional dependency (an extra that may be missing) or a
probe that asks whether a module exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import execengine

ROOT = Path(execengine.__file__).parent
#: (module, imported name) pairs that stay inside functions, and why
LAZY_ALLOWED = {
    ("execengine.bench.chart", "matplotlib"),          # the [bench] extra draws charts
    ("execengine.bench.chart", "matplotlib.pyplot"),
    ("execengine.bench.chart", "matplotlib.patches"),
    ("execengine.bench.tokens", "tiktoken"),           # the [bench] extra counts tokens
    ("execengine.isolation.seccomp", "pyseccomp"),     # Linux only; a missing layer is reported
    ("execengine.isolation.detect", "resource"),       # the probe: POSIX only
    ("execengine.batch.ray_executor", "ray"),          # the [ray] extra runs batches on Ray
    ("execengine.batch.ray_executor", "ray.util.scheduling_strategies"),
    ("execengine.batch.node_worker", "ray"),
    ("execengine.batch.driver_tools", "ray"),
    # the [mcp] extra: the official MCP SDK (and what it brings: anyio, httpx2, uvicorn)
    ("execengine.cli.mcp_cmd", "anyio"),
    ("execengine.mcp.connection", "httpx2"),
    ("execengine.mcp.connection", "mcp"),
    ("execengine.mcp.connection", "mcp.client.stdio"),
    ("execengine.mcp.connection", "mcp.client.streamable_http"),
    ("execengine.mcp.connection", "mcp.shared.exceptions"),
    ("execengine.mcp.connection", "mcp_types"),
    ("execengine.mcp.connection", "mcp_types.jsonrpc"),
    ("execengine.mcp.expand", "mcp.client.stdio"),
    ("execengine.mcp.manager", "mcp"),
    ("execengine.mcp.manager", "mcp_types"),
    ("execengine.mcp.server", "mcp.server.lowlevel"),
    ("execengine.mcp.server", "mcp.server.stdio"),
    ("execengine.mcp.server", "mcp.server.transport_security"),
    ("execengine.mcp.server", "mcp_types"),
    ("execengine.mcp.server", "uvicorn"),
    # the [hermes] extra: the plugin imports Hermes only when Hermes loads it
    ("execengine.integrations.hermes", "model_tools"),
    ("execengine.integrations.hermes", "tools.approval"),
    ("execengine.integrations.hermes", "tools.code_execution_tool"),
    ("execengine.integrations.hermes", "tools.interrupt"),
    ("execengine.integrations.hermes", "tools.registry"),
    ("execengine.integrations.hermes", "tools.terminal_tool"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """``(imported module, inside a function)`` for every runtime import of a module."""
    found: list[tuple[str, bool]] = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parent, *([base] if base else [])])
                for alias in child.names:  # a submodule, or a name the module defines
                    sub = f"{base}.{alias.name}"
                    found.append((sub if sub in MODULES else base, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef)))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_no_imports_hidden_in_functions():
    hidden = set()
    for name, path in MODULES.items():
        for target, in_function in _imports(name, path):
            if in_function and (name, target) not in LAZY_ALLOWED:
                hidden.add((name, target))
    assert sorted(hidden) == []


def test_no_import_cycles():
    modules = MODULES
    graph = {name: {t for t, _ in _imports(name, path) if t in modules and t != name}
             for name, path in modules.items()}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []
