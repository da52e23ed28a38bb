from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from execengine.bench import userflows
from execengine.errors import WorkflowError

GOOD = """
name: two-ports
family: data
task: Ports of two services
toolsets: [file]
calls:
  - {tool: read_file, args: {path: a.yaml}}
  - [{tool: read_file, args: {path: b.yaml}}, {tool: web_search, args: {query: "{base_url}"}}]
answer: "[r['n'] for r in results]"
script: |
  print("[1, 2, 3]")
"""


class FakeFx:
    base_url = "http://127.0.0.1:9"
    root = Path("/nowhere")


def _write(tmp_path: Path, text: str, name: str = "wf.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_yaml_workflow_plans_calls_and_computes_the_answer(tmp_path: Path) -> None:
    (wf,) = userflows.load(_write(tmp_path, GOOD))
    assert (wf.name, wf.family, wf.toolsets) == ("two-ports", "data", ("file",))
    gen = wf.plan(FakeFx())  # type: ignore[arg-type]
    first = next(gen)
    assert [(c.tool, c.args) for c in first] == [("read_file", {"path": "a.yaml"})]
    second = gen.send([{"n": 1}])
    assert second[1].args == {"query": "http://127.0.0.1:9"}
    with pytest.raises(StopIteration) as stop:
        gen.send([{"n": 2}, {"n": 3}])
    assert stop.value.value == [1, 2, 3]
    assert wf.script(FakeFx()) == 'print("[1, 2, 3]")\n'  # type: ignore[arg-type]


def test_yaml_list_of_workflows(tmp_path: Path) -> None:
    body = textwrap.indent(textwrap.dedent(GOOD), "    ").replace("    name:", "  - name:", 1)
    p = _write(tmp_path, "workflows:\n" + body)
    assert [w.name for w in userflows.load(p)] == ["two-ports"]


@pytest.mark.parametrize(("edit", "message"), [
    (("family: data", "family: misc"), "family 'misc' is not one of"),
    (("toolsets: [file]", "toolset: [file]"), "unknown key.*toolset"),
    (("answer: \"[r['n'] for r in results]\"", ""), "missing key.*answer"),
    (("  print(\"[1, 2, 3]\")", "  print(("), "script line 1"),
    (("{tool: read_file, args: {path: a.yaml}}", "{tool: read_file, argz: 1}"),
     r"calls\[0\]: unknown key"),
    (("{tool: read_file, args: {path: a.yaml}}", "read_file"), r"calls\[0\]: a call is a mapping"),
])
def test_bad_yaml_is_a_clear_error(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    old, new = edit
    assert old in GOOD
    with pytest.raises(WorkflowError, match=message) as info:
        userflows.load(_write(tmp_path, GOOD.replace(old, new)))
    assert "wf.yaml" in str(info.value)


def test_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError, match="no such workflow file"):
        userflows.load(tmp_path / "missing.yaml")
    with pytest.raises(WorkflowError, match=r"\.py, \.yaml or \.yml"):
        userflows.load(_write(tmp_path, "x", "wf.txt"))
    with pytest.raises(WorkflowError, match="cannot read it as YAML"):
        userflows.load(_write(tmp_path, "a: [1,"))


def test_python_workflow_file(tmp_path: Path) -> None:
    p = _write(tmp_path, """
        from execengine.bench.workflow import Workflow, call

        def plan(fx):
            (res,) = yield [call("read_file", path="x")]
            return res

        mine = Workflow("mine", "build", "a task", plan, lambda fx: "print(1)")
        """, "flows.py")
    (wf,) = userflows.load(p)
    assert wf.name == "mine" and wf.family == "build"
    broken = _write(tmp_path, "raise RuntimeError('boom')\n", "broken.py")
    with pytest.raises(WorkflowError, match="importing it failed: RuntimeError: boom"):
        userflows.load(broken)
    empty = _write(tmp_path, "X = 1\n", "empty.py")
    with pytest.raises(WorkflowError, match="defines no Workflow"):
        userflows.load(empty)


def test_yaml_expected_answer_and_shape(tmp_path: Path) -> None:
    text = GOOD.replace("script: |", "expected: \"[fx.base_url]\"\nanswer_format: \"[<n>]\"\n"
                        "script: |")
    (wf,) = userflows.load(_write(tmp_path, text))
    assert wf.truth is not None and wf.truth(FakeFx()) == ["http://127.0.0.1:9"]  # type: ignore[arg-type]
    assert wf.answer_format == "[<n>]"
    with pytest.raises(WorkflowError, match="expected line 1"):
        userflows.load(_write(tmp_path, GOOD.replace("script: |", "expected: '[1,'\nscript: |")))
