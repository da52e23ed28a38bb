from __future__ import annotations

import json

from execengine.engine.result import ExecutionResult, hint_for, no_code_result, timeout_message


def test_model_json_shapes():
    ok = ExecutionResult("success", output="hi\n", exit_code=0, tool_calls_made=2,
                         duration_seconds=0.123456)
    assert json.loads(ok.to_json()) == {"status": "success", "output": "hi\n",
                                        "tool_calls_made": 2, "duration_seconds": 0.12,
                                        "exit_code": 0}
    assert json.loads(no_code_result().to_json())["error"] == "No code provided."
    assert timeout_message(300.0) == "Script timed out after 300s and was killed."
    assert timeout_message(0.5) == "Script timed out after 0.5s and was killed."
    cut = ExecutionResult("success", stdout_truncated=True, stdout_bytes_total=100,
                          stdout_bytes_omitted=60, full_output_path="/x")
    d = cut.to_model_dict()
    assert (d["stdout_bytes_captured"], d["stdout_bytes_omitted"], d["full_output_path"]) == (
        40, 60, "/x")


def test_hints():
    r = ExecutionResult("error", stderr="NameError: name 'read_file' is not defined")
    assert hint_for(r, ["read_file"]) == "Import the tool first: from hermes_tools import read_file"
    r = ExecutionResult("error", stderr="NameError: name 'foo' is not defined")
    assert hint_for(r, ["read_file"]) is None


def test_an_incomplete_spill_file_is_reported_as_such():
    from execengine.engine.result import ExecutionResult, hint_for

    r = ExecutionResult("success", output="x", stdout_truncated=True, stdout_bytes_total=100,
                        stdout_bytes_omitted=90, full_output_path="/spill.txt",
                        full_output_complete=False, full_output_bytes=64)
    d = r.to_model_dict()
    assert (d["full_output_path"], d["full_output_complete"], d["full_output_bytes"]) == (
        "/spill.txt", False, 64)
    assert hint_for(r, []) == ("Print less: summarise or filter inside the script (first 64 "
                               "bytes of the output: /spill.txt).")
    complete = ExecutionResult("success", output="x", stdout_truncated=True,
                               full_output_path="/spill.txt")
    assert "full_output_complete" not in complete.to_model_dict()
