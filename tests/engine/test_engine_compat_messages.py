"""The model-facing JSON says exactly what scripts written for ``hermes_tools`` expect.

The expected texts are spelled out here (not imported), so a change of wording fails.
"""

from __future__ import annotations

import json
import threading


def model_json(engine, code, **kw) -> dict:
    return json.loads(engine.execute(code, **kw).to_json())


def test_success_keeps_capped_stderr_and_rounds_the_duration(make_engine):
    engine = make_engine(max_stderr_bytes=1000)
    d = model_json(engine, "import sys\nprint('ok')\nsys.stderr.write('w' * 5000 + 'END')")
    assert d["status"] == "success" and d["output"] == "ok\n" and d["exit_code"] == 0
    assert d["stderr_truncated"] is True
    assert d["stderr"].startswith("w" * 400) and d["stderr"].endswith("END")
    assert 1000 <= len(d["stderr"]) < 1200  # head + tail of 1,000 bytes plus the marker
    assert "error" not in d
    assert d["duration_seconds"] == round(d["duration_seconds"], 2)


def test_exit_code_without_stderr(engine):
    d = model_json(engine, "import sys; sys.exit(4)")
    assert (d["status"], d["error"], d["exit_code"]) == ("error", "Script exited with code 4", 4)


def test_error_is_the_stderr(engine):
    d = model_json(engine, "import sys; sys.stderr.write('bad thing\\n'); sys.exit(2)")
    assert (d["status"], d["error"]) == ("error", "bad thing")


def test_timeout_message_is_the_output_when_nothing_was_printed(engine):
    d = model_json(engine, "import time; time.sleep(30)", timeout=0.5)
    assert d["status"] == "timeout"
    assert d["error"] == "Script timed out after 0.5s and was killed."
    assert d["output"] == "⏰ Script timed out after 0.5s and was killed."


def test_interrupt_message(engine):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    d = model_json(engine, "import time; time.sleep(30)", interrupt=stop)
    assert d["status"] == "interrupted"
    assert d["error"] == "[execution interrupted — user sent a new message]"
    assert d["output"] == "[execution interrupted — user sent a new message]"


def test_no_code(engine):
    assert model_json(engine, " ")["error"] == "No code provided."


def test_tool_messages(make_engine):
    engine = make_engine(max_tool_calls=1)
    d = model_json(engine, "\n".join([
        "from _execengine.client import call_tool",
        "print(call_tool('web_search', {'query': 'a'})['query'])",
        "print(call_tool('web_search', {'query': 'b'})['error'])",
        "print(call_tool('write_file', {'path': 'x', 'content': ''})['error'])",
    ]))
    assert d["output"].splitlines() == [
        "a",
        "Tool call limit reached (1). No more tool calls allowed in this execution.",
        "Tool 'write_file' is not available in execute_code. "
        "Available: read_file, terminal, web_search",
    ]
    assert d["tool_calls_made"] == 1


def test_failing_script_has_its_traceback_in_output_and_error(engine):
    d = model_json(engine, "print('before')\nraise ValueError('boom')")
    assert d["status"] == "error" and d["exit_code"] == 1
    assert d["error"].startswith("Traceback (most recent call last):")
    assert d["error"].endswith("ValueError: boom")
    # the reference's layout: what was printed, then the stderr under a header
    assert d["output"] == "before\n\n\n--- stderr ---\n" + d["error"]


def test_failing_script_without_stderr_keeps_output(engine):
    d = model_json(engine, "import sys\nprint('x')\nsys.exit(3)")
    assert d["output"] == "x\n" and d["error"] == "Script exited with code 3"


def test_timeout_output_ends_with_the_reference_line(engine):
    d = model_json(engine, "import time\nprint('partial', flush=True)\ntime.sleep(30)",
                   timeout=1)
    assert d["output"].endswith("\n\n⏰ Script timed out after 1s and was killed.")
    assert d["error"] == "Script timed out after 1s and was killed."


def test_reference_rpc_variables_hold_the_same_values(engine):
    d = model_json(engine, "\n".join([
        "import os",
        "print(os.environ['HERMES_RPC_SOCKET'] == os.environ['EXECENGINE_RPC_ENDPOINT'])",
        "print(os.environ['HERMES_RPC_TOKEN'] == os.environ['EXECENGINE_RPC_TOKEN'])",
        "print(len(os.environ['HERMES_RPC_TOKEN']), os.path.exists(",
        "    os.environ['HERMES_RPC_SOCKET']))",
    ]))
    assert d["output"].split() == ["True", "True", "64", "True"]
