"""Users' own workflows, from a Python file or a YAML file.

**Python** (``*.py``): a module defining :class:`~execengine.bench.workflow.Workflow` objects,
either in a ``WORKFLOWS`` list or as top-level names. Plans are generators, so a plan can
decide its next call from earlier results (see the built-in suite for examples).

**YAML** (``*.yaml`` / ``*.yml``): one workflow, or a list of them under ``workflows:``::

    name: ports-of-two          # letters, digits, - and _
    family: data                # data | research | refactor | build
    task: Which ports do svc A and B use?
    toolsets: [file]            # offered to the model (default: file, terminal)
    mutates: false              # true when it edits proj/ (restored before each way)
    calls:                      # the sequential calls, in order; a list item = one parallel batch
      - {tool: read_file, args: {path: configs/a/config.yaml}}
      - [{tool: web_search, args: {query: database}}, {tool: web_search, args: {query: Go}}]
    answer: "[r['total_lines'] for r in results]"   # Python expression over `results`
    expected: "[12, 12]"        # optional: the right answer, a Python expression over `fx`
    answer_format: "[<lines>, ...]"   # optional: the shape, told to a live model
    cluster: ports              # optional: near-duplicate workflows of one cluster count once
    script: |                   # the programmatic way; its last printed line is JSON
      from hermes_tools import read_file
      import json
      print(json.dumps([read_file(p)["total_lines"] for p in ["configs/a/config.yaml"]]))

``results`` in ``answer`` is the list of decoded tool results in call order; ``json``,
``re`` and the helpers of :mod:`execengine.bench.helpers` are in scope. ``expected`` sees
``fx`` (the :class:`~execengine.bench.fixtures.Fixtures`, its records in ``fx.truth``) and
``json``; with it both ways are checked against it, without it against each other. In ``calls``,
``answer`` and ``script``, ``{base_url}`` becomes the local web's address and ``{root}`` the
fixtures' directory (the working directory of both ways).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from execengine.bench import helpers
from execengine.bench.workflow import FAMILIES, Call, Plan, Workflow, batches
from execengine.errors import WorkflowError

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

KEYS = {"name", "family", "task", "toolsets", "mutates", "calls", "answer", "script",
        "expected", "answer_format", "cluster"}
REQUIRED = ("name", "family", "task", "calls", "answer", "script")


def load(path: str | Path) -> list[Workflow]:
    """The workflows a Python or YAML file defines (``WorkflowError`` says what is wrong)."""
    p = Path(path)
    if not p.is_file():
        raise WorkflowError(f"{p}: no such workflow file")
    if p.suffix == ".py":
        return _load_python(p)
    if p.suffix in (".yaml", ".yml"):
        return _load_yaml(p)
    raise WorkflowError(f"{p}: a workflow file is .py, .yaml or .yml")


def _load_python(p: Path) -> list[Workflow]:
    modname = f"execengine_user_workflow_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(modname, p)
    if spec is None or spec.loader is None:
        raise WorkflowError(f"{p}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except WorkflowError:
        raise
    except Exception as exc:
        raise WorkflowError(f"{p}: importing it failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(modname, None)
    found = getattr(module, "WORKFLOWS", None)
    if found is None:
        found = [v for v in vars(module).values() if isinstance(v, Workflow)]
    found = list(found)
    bad = [type(w).__name__ for w in found if not isinstance(w, Workflow)]
    if bad:
        raise WorkflowError(f"{p}: WORKFLOWS holds {', '.join(bad)}, expected Workflow objects")
    if not found:
        raise WorkflowError(f"{p}: defines no Workflow (set WORKFLOWS = [...])")
    return found


def _load_yaml(p: Path) -> list[Workflow]:
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise WorkflowError(f"{p}: cannot read it as YAML: {exc}") from exc
    items = doc.get("workflows") if isinstance(doc, dict) and "workflows" in doc else [doc]
    if not isinstance(items, list) or not items:
        raise WorkflowError(f"{p}: expected a workflow mapping or 'workflows:' with a list")
    return [from_mapping(item, f"{p}[{i}]" if len(items) > 1 else str(p))
            for i, item in enumerate(items)]


def from_mapping(doc: Any, where: str) -> Workflow:
    """A workflow from its YAML mapping (see the module docstring)."""
    if not isinstance(doc, dict):
        raise WorkflowError(f"{where}: a workflow is a mapping, got {type(doc).__name__}")
    unknown = sorted(set(doc) - KEYS)
    if unknown:
        raise WorkflowError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(KEYS))}")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise WorkflowError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in ("name", "family", "task", "answer", "script"):
        if not isinstance(doc[key], str) or not doc[key].strip():
            raise WorkflowError(f"{where}: {key!r} must be a non-empty string")
    if doc["family"] not in FAMILIES:
        raise WorkflowError(f"{where}: family {doc['family']!r} is not one of "
                            f"{', '.join(FAMILIES)}")
    calls = _parse_calls(doc["calls"], where)
    for key in ("expected", "answer_format"):
        if key in doc and (not isinstance(doc[key], str) or not doc[key].strip()):
            raise WorkflowError(f"{where}: {key!r} must be a non-empty string")
    try:
        compile(doc["answer"], f"{where}:answer", "eval")
        compile(doc["script"], f"{where}:script", "exec")
        if "expected" in doc:
            compile(doc["expected"], f"{where}:expected", "eval")
    except SyntaxError as exc:
        raise WorkflowError(f"{where}: {exc.filename} line {exc.lineno}: {exc.msg}") from exc
    toolsets = doc.get("toolsets", ["file", "terminal"])
    if not isinstance(toolsets, list) or not all(isinstance(t, str) for t in toolsets):
        raise WorkflowError(f"{where}: 'toolsets' must be a list of toolset names")
    answer_src: str = doc["answer"]
    script_src: str = doc["script"]

    def plan(fx: Fixtures) -> Plan:
        results: list[Any] = []
        for batch in calls:
            got = yield [Call(c.tool, _fill(c.args, fx)) for c in batch]
            results += got
        scope = {"results": results, "json": json, "re": re, **_helper_scope()}
        return eval(_fill(answer_src, fx), scope)  # the user's own workflow file

    def script(fx: Fixtures) -> str:
        return str(_fill(script_src, fx))

    truth = None
    if "expected" in doc:
        expected_src: str = doc["expected"]

        def truth(fx: Fixtures) -> Any:
            return eval(_fill(expected_src, fx), {"fx": fx, "json": json})  # the user's file

    return Workflow(doc["name"], doc["family"], doc["task"], plan, script, truth=truth,
                    answer_format=str(doc.get("answer_format", "")),
                    toolsets=tuple(toolsets), mutates=bool(doc.get("mutates", False)),
                    source=where, cluster=str(doc.get("cluster") or ""))


def _parse_calls(raw: Any, where: str) -> list[list[Call]]:
    if not isinstance(raw, list) or not raw:
        raise WorkflowError(f"{where}: 'calls' must be a non-empty list")
    out: list[Call | list[Call]] = []
    for i, item in enumerate(raw):
        if isinstance(item, list):
            out.append([_parse_call(c, f"{where}: calls[{i}][{j}]") for j, c in enumerate(item)])
        else:
            out.append(_parse_call(item, f"{where}: calls[{i}]"))
    return batches(out)


def _parse_call(item: Any, where: str) -> Call:
    if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
        raise WorkflowError(f"{where}: a call is a mapping with 'tool' (and 'args')")
    extra = set(item) - {"tool", "args"}
    if extra:
        raise WorkflowError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
    args = item.get("args", {})
    if not isinstance(args, dict):
        raise WorkflowError(f"{where}: 'args' must be a mapping")
    return Call(item["tool"], args)


def _fill(value: Any, fx: Fixtures) -> Any:
    if isinstance(value, str):
        return value.replace("{base_url}", fx.base_url).replace("{root}", str(fx.root))
    if isinstance(value, list):
        return [_fill(v, fx) for v in value]
    if isinstance(value, Mapping):
        return {k: _fill(v, fx) for k, v in value.items()}
    return value


def _helper_scope() -> dict[str, Any]:
    return {n: getattr(helpers, n) for n in
            ("unnumber", "settings", "fact", "failing_modules", "search_paths")}
