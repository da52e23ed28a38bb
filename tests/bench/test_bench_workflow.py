from __future__ import annotations

import pytest

from execengine.bench.helpers import fact, failing_modules, search_paths, settings, unnumber
from execengine.bench.workflow import (
    Call,
    Workflow,
    answer_from_output,
    batches,
    call,
    decode_result,
    same_answer,
)
from execengine.errors import WorkflowError


def _wf(**kw: object) -> Workflow:
    base: dict[str, object] = {"name": "w", "family": "data", "task": "t",
                               "plan": lambda fx: iter(()), "script": lambda fx: ""}
    return Workflow(**{**base, **kw})  # type: ignore[arg-type]


def test_same_answer_is_json_equality() -> None:
    assert same_answer({"a": (1, 2), "b": {"x": 1}}, {"b": {"x": 1}, "a": [1, 2]})
    assert not same_answer({"a": [1, 2]}, {"a": [2, 1]})
    assert not same_answer(["1"], [1])
    assert not same_answer({"a": 1}, {"a": 1, "b": None})


def test_decode_result_like_a_script_sees_it() -> None:
    assert decode_result('{"content": "x"}') == {"content": "x"}
    assert decode_result('"{\\"a\\": 1}"') == {"a": 1}  # JSON inside a JSON string
    assert decode_result('"plain"') == "plain"
    assert decode_result("not json") == "not json"


def test_answer_is_the_last_printed_line() -> None:
    assert answer_from_output("working...\n\n{\"n\": 3}\n\n") == {"n": 3}
    with pytest.raises(WorkflowError, match="printed nothing"):
        answer_from_output("  \n")
    with pytest.raises(WorkflowError, match="not JSON"):
        answer_from_output('{"n": 3}\ndone')


def test_workflow_validation() -> None:
    with pytest.raises(WorkflowError, match="family 'misc'"):
        _wf(family="misc")
    with pytest.raises(WorkflowError, match="name 'a b'"):
        _wf(name="a b")
    with pytest.raises(WorkflowError, match="must be callable"):
        _wf(script="print(1)")


def test_batches() -> None:
    a, b = call("read_file", path="x"), Call("terminal", {"command": "ls"})
    assert batches([a, [a, b], b]) == [[a], [a, b], [b]]


def test_helpers_parse_each_config_format() -> None:
    yaml_text = "# note: with: colons\nservice:\n  port: 8080\n  region: eu-west\n"
    ini_text = "; comment\n[service]\nport = 8081\nregion = us-east\n"
    json_text = '{\n  "service": {\n    "port": 8082,\n    "region": "ap-south"\n  }\n}'
    assert settings(yaml_text)["port"] == "8080"
    assert {"port": "8081", "region": "us-east"}.items() <= settings(ini_text).items()
    assert settings(json_text)["region"] == "ap-south"
    assert unnumber("     1|a\n    12|  b|c") == "a\n  b|c"
    assert fact("* License: MIT\n* Stars: 12", "Stars") == "12"
    assert fact("**License:** Apache-2.0", "License") == "Apache-2.0"
    out = ("FAIL: test_total (tests.test_a_01.TotalTest.test_total)\n"
           "ERROR: test_x (tests.test_b_02.T)\nFAIL: test_y (tests.test_a_01.T)\n")
    assert failing_modules(out) == ["tests.test_a_01", "tests.test_b_02"]
    assert search_paths({"matches": [{"path": "./b.py"}, {"path": "a.py"}, {"path": "a.py"}]}) \
        == ["a.py", "b.py"]
    assert search_paths({"files": ["z.py"]}) == ["z.py"]
    assert search_paths("error text") == []


def test_execute_code_description_states_result_shapes() -> None:
    from execengine.config import Config
    from execengine.engine import Engine
    from execengine.engine.tool import RESULT_SHAPES
    from execengine.registry import ToolRegistry

    with ToolRegistry.with_builtins(Config(), plugins=False) as reg, Engine(Config(), reg):
        (defn,) = [d for d in reg.get_tool_definitions(enabled_toolsets=["file", "terminal",
                                                                         "code_execution"])
                   if d["function"]["name"] == "execute_code"]
    text = defn["function"]["description"]
    assert "- terminal: Run a shell command" in text and RESULT_SHAPES["terminal"] in text
    assert RESULT_SHAPES["read_file"] in text and "web_extract" not in text
