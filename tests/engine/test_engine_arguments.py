"""Arguments that are wrong are told apart from what a script does: a clear error naming
what was given and what is expected, before anything starts (the API), or an error result
worded for the model (the execute_code tool)."""

from __future__ import annotations

import json

import pytest

from execengine.config import Config
from execengine.context import CallContext
from execengine.engine import Engine
from execengine.errors import InvalidArgumentError, UnknownToolError


@pytest.fixture(scope="module")
def engine():
    with Engine(Config().with_overrides({"code_execution.isolation": "none",
                                         "approvals.execute_code": "allow"})) as eng:
        yield eng


@pytest.mark.parametrize("session", [None, "s"])
def test_bytes_as_code_are_an_error_saying_to_decode(engine, session):
    with pytest.raises(InvalidArgumentError, match=r"code must be a str .* got bytes .*decode"):
        engine.execute(b"print(1)", session=session)  # type: ignore[arg-type]


def test_an_unknown_tool_name_is_an_error_naming_the_known_ones(engine):
    with pytest.raises(UnknownToolError) as err:
        engine.execute("print(1)", tools=["read_flie"])
    text = str(err.value)
    assert "'read_flie'" in text and "did you mean 'read_file'" in text
    assert "known:" in text and "write_file" in text


def test_a_file_as_cwd_is_not_a_directory(engine, tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("x")
    with pytest.raises(InvalidArgumentError, match="is not a directory"):
        engine.execute("print(1)", cwd=str(f))
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        engine.execute("print(1)", cwd=str(tmp_path / "missing"), session="s")
    # the control: the folder itself is fine
    assert engine.execute("print(1)", cwd=str(tmp_path)).output == "1\n"


@pytest.mark.parametrize(("args", "error"), [
    ({"code": ["print(1)"]}, "'code' must be a string of Python source, got list; send the "
                             "whole script as one string."),
    ({"code": 5}, "'code' must be a string of Python source, got int; send the whole script "
                  "as one string."),
    ({"command": "print(1)"}, "No code provided. Put the script in 'code' (this call sent "
                              "'command')."),
    ({}, "No code provided."),
])
def test_the_tool_refuses_arguments_its_schema_forbids(engine, args, error):
    out = json.loads(engine.registry.dispatch("execute_code", args, CallContext(task_id="a")))
    assert (out["status"], out["error"]) == ("error", error)


def test_the_tool_checks_the_rest_of_its_schema_too(engine):
    out = json.loads(engine.registry.dispatch(
        "execute_code", {"code": "print(1)", "reset": "yes"}, CallContext(task_id="a")))
    assert out["status"] == "error" and "reset" in out["error"]
    ok = json.loads(engine.registry.dispatch(
        "execute_code", {"code": "print(2)", "reset": True}, CallContext(task_id="a")))
    assert (ok["status"], ok["output"]) == ("success", "2\n")
