"""Render ``hermes_tools.py`` for one execution from the tools' JSON schemas.

The schemas are the same the registry serves to the model (one source of truth), less the
parameters a tool's policy hides from scripts (removed by
:func:`execengine.engine.plan.function_schemas`). Every
value that reaches the generated source goes through :func:`repr` or is checked to be an
identifier, so a tool description or default cannot inject code. The template
(``stubs/hermes_tools.py.j2``) stays thin; the transport lives in ``sandbox/``.
"""

from __future__ import annotations

import json
import keyword
import textwrap
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2

from execengine._resources import stubs_dir
from execengine.errors import SchemaError

TEMPLATE = "hermes_tools.py.j2"
_RESERVED = frozenset({"_call", "_acall", "_args", "aio", "ToolCallError", "json_parse",
                       "shell_quote", "retry", "mcp", "search_tools", "describe_tool",
                       "_Catalogue", "_catalogue"})
#: the stub parameter carrying a tool's parameters that are not Python names
EXTRA = "extra_args"
_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
          "array": "list", "object": "dict", "null": "None"}


@dataclass(frozen=True)
class StubFunction:
    name: str
    signature: str
    returns: str
    doc: str
    packed: str
    optional: tuple[str, ...]


def type_hint(schema: Mapping[str, Any]) -> str:
    raw = schema.get("type")
    kinds = raw if isinstance(raw, list) else [raw] if raw else []
    hints = list(dict.fromkeys(_TYPES.get(k, "object") for k in kinds if isinstance(k, str)))
    if not hints:
        return "object"
    return " | ".join(hints)


def _default_literal(value: Any) -> str | None:
    """The Python literal of a JSON scalar default; None for anything mutable."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    return None


def _doc(description: str, params: list[tuple[str, Mapping[str, Any]]]) -> str:
    lines = [description.strip() or "(no description)"]
    described = [(n, s) for n, s in params if s.get("description")]
    if described:
        lines += ["", "Args:"]
        for name, s in described:
            text = " ".join(str(s["description"]).split())
            if "enum" in s and isinstance(s["enum"], list):
                text += f" One of: {', '.join(map(str, s['enum']))}."
            lines.append(textwrap.fill(f"{name}: {text}", 92, initial_indent="    ",
                                       subsequent_indent="        "))
    return "\n".join(lines)


def stub_function(name: str, schema: Mapping[str, Any]) -> StubFunction:
    """One tool's function, from its OpenAI function schema."""
    if not name.isidentifier() or keyword.iskeyword(name) or name in _RESERVED:
        raise SchemaError(f"tool name {name!r} cannot be a Python function in hermes_tools")
    params_schema = schema.get("parameters") or {}
    props: Mapping[str, Any] = params_schema.get("properties") or {}
    required = [p for p in params_schema.get("required") or [] if p in props]
    usable = [p for p in props if p.isidentifier()
              and not keyword.iskeyword(p) and p not in _RESERVED]
    ordered = [p for p in required if p in usable] + [p for p in usable if p not in required]
    parts: list[str] = []
    optional: list[str] = []
    for p in ordered:
        ps = props[p] if isinstance(props[p], Mapping) else {}
        hint = type_hint(ps)
        if p in required:
            parts.append(f"{p}: {hint}")
            continue
        literal = _default_literal(ps.get("default")) if "default" in ps else None
        if literal is None or literal == "None":
            optional.append(p)
            if "None" not in hint.split(" | "):
                hint += " | None"
            literal = "None"
        parts.append(f"{p}: {hint} = {literal}")
    entries = [f"{p!r}: {p}" for p in ordered]
    description = str(schema.get("description", ""))
    # parameters that cannot be Python names (``from``, ``repo-path``: common in MCP
    # schemas) are still reachable, through one dict argument
    unnamed = [p for p in props if p not in usable]
    if unnamed and EXTRA not in props:
        parts.append(f"{EXTRA}: dict | None = None")
        entries.append(f"**({EXTRA} or {{}})")
        description += (f"\n\nParameters that are not Python names go in {EXTRA}="
                        f"{{...}}: {', '.join(unnamed)}.")
    packed = "{" + ", ".join(entries) + "}"
    doc = _doc(description, [(p, props[p]) for p in ordered
                             if isinstance(props[p], Mapping)])
    return StubFunction(name, ", ".join(parts), "dict", doc, packed, tuple(optional))


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(stubs_dir())),
        autoescape=False,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pyrepr"] = repr
    return env.get_template(TEMPLATE)


#: rendered stubs kept (a pure function of the schemas and groups: memoised, bounded)
RENDER_CACHE_SIZE = 128
_rendered: OrderedDict[str, str] = OrderedDict()
_rendered_lock = threading.Lock()


def render_stub(schemas: Iterable[Mapping[str, Any]],
                groups: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The source of ``hermes_tools.py`` for these function schemas (``{"name", ...}``).

    ``groups`` (``{server: {short name: tool name}}``) adds the namespace
    ``mcp.<server>.<short name>`` for MCP tools; only names of rendered tools are used.
    Rendering and the compile check cost about a millisecond per tool set, so the result is
    memoised by the schemas' and groups' JSON text."""
    listed = list(schemas)
    key = json.dumps([listed, groups or {}], sort_keys=True, default=repr)
    with _rendered_lock:
        source = _rendered.get(key)
        if source is not None:
            _rendered.move_to_end(key)
            return source
    source = _render(listed, groups)
    with _rendered_lock:
        _rendered[key] = source
        while len(_rendered) > RENDER_CACHE_SIZE:
            _rendered.popitem(last=False)
    return source


def _render(schemas: list[Mapping[str, Any]],
            groups: Mapping[str, Mapping[str, str]] | None) -> str:
    tools = sorted((stub_function(s["name"], s) for s in schemas), key=lambda t: t.name)
    rendered = {t.name for t in tools}
    namespaces = []
    for server, members in sorted((groups or {}).items()):
        kept = sorted((short, full) for short, full in members.items()
                      if full in rendered and short.isidentifier()
                      and not keyword.iskeyword(short))
        if kept and server.isidentifier() and not keyword.iskeyword(server):
            namespaces.append((server, kept))
    names = ", ".join(t.name for t in tools) or "none"
    summary = textwrap.fill(f"Available tools ({len(tools)}): {names}.", 92)
    source = _template().render(tools=tools, summary=summary, groups=namespaces)
    compile(source, "hermes_tools.py", "exec")  # a template bug must not reach the child
    return source
