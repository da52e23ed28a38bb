"""The reference loop end to end against a local chat-completions server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from execengine.agent import ChatCompletionsClient, run_conversation
from execengine.agent.loop import EMPTY_NUDGE
from execengine.config import Config
from execengine.context import CallContext

from .conftest import HttpStatus, assert_valid_transcript, call, reply


def run(server: Any, reg: Any, tmp_path: Any, prompt: str = "go", **kw: Any) -> Any:
    client = ChatCompletionsClient(server.base_url, "scripted", api_key="sk-test",
                                   retry_backoff=0.01)
    result = run_conversation(prompt, registry=reg, model=client,
                              context=CallContext(cwd=str(tmp_path)), **kw)
    for body in server.requests:
        assert_valid_transcript(body["messages"])
    assert_valid_transcript(result.messages)
    return result


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def test_plain_answer_sends_tools_and_key(chat_server, make_registry, tmp_path):
    reg, _ = make_registry()
    chat_server.play(reply("Hello there."))
    result = run(chat_server, reg, tmp_path, "hi")
    assert result.final_answer == "Hello there."
    assert result.stop_reason == "answer"
    assert result.iterations == 1
    body = chat_server.requests[0]
    assert body["model"] == "scripted"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert {t["function"]["name"] for t in body["tools"]} >= {"read_file", "write_file"}
    assert chat_server.headers[0]["Authorization"] == "Bearer sk-test"
    assert result.usage["total_tokens"] == 15


def test_tool_round_trip_then_answer(chat_server, make_registry, tmp_path):
    (tmp_path / "notes.txt").write_text("forty-two")
    reg, tools = make_registry()
    chat_server.play(reply(None, call("read_file", {"path": "notes.txt"}, "c1")),
                     reply("It says forty-two."))
    result = run(chat_server, reg, tmp_path)
    assert result.final_answer == "It says forty-two."
    assert result.iterations == 2
    assert tools.calls_of("read_file") == [{"path": "notes.txt"}]
    sent = tool_results(chat_server.requests[1])
    assert json.loads(sent["c1"]) == {"content": "forty-two"}
    assert [c.status for c in result.tool_calls] == ["ok"]


def test_malformed_json_is_reported_with_position_and_not_run(chat_server, make_registry,
                                                              tmp_path):
    (tmp_path / "a.txt").write_text("A")
    reg, tools = make_registry()
    chat_server.play(
        reply(None, call("read_file", '{"path": a.txt}', "bad")),
        reply(None, call("read_file", '{"path": "a.txt"}', "good")),
        reply("done"),
    )
    result = run(chat_server, reg, tmp_path)
    err = tool_results(chat_server.requests[1])["bad"]
    assert "not valid JSON" in err and "line 1 column 10 (char 9)" in err
    assert tools.calls_of("read_file") == [{"path": "a.txt"}]  # only the corrected call
    assert [c.status for c in result.tool_calls] == ["invalid_json", "ok"]
    assert result.final_answer == "done"


def test_truncated_call_at_length_limit_is_never_executed(chat_server, make_registry,
                                                          tmp_path):
    reg, tools = make_registry()
    chat_server.play(
        reply(None, call("write_file", '{"path": "out.txt", "content": "partial',
                         "cut"), finish_reason="length"),
        reply("I will write less next time."),
    )
    result = run(chat_server, reg, tmp_path)
    assert tools.calls_of("write_file") == []
    assert not (tmp_path / "out.txt").exists()
    msg = tool_results(chat_server.requests[1])["cut"]
    assert "cut off" in msg and "output-token limit" in msg
    assert result.tool_calls[0].status == "truncated"


def test_complete_looking_call_in_a_length_cut_response_is_not_run(chat_server,
                                                                   make_registry, tmp_path):
    reg, tools = make_registry()
    chat_server.play(
        reply(None, call("write_file", {"path": "x.txt", "content": "hi"}, "w"),
              finish_reason="length"),
        reply("ok"),
    )
    run(chat_server, reg, tmp_path)
    assert tools.log == []
    assert not (tmp_path / "x.txt").exists()


def test_unterminated_json_without_length_reason_is_truncation(chat_server, make_registry,
                                                               tmp_path):
    reg, tools = make_registry()
    chat_server.play(reply(None, call("write_file", '{"path": "y.txt", "content": "ab',
                                      "u")), reply("ok"))
    result = run(chat_server, reg, tmp_path)
    assert result.tool_calls[0].status == "truncated"
    assert "cut off" in tool_results(chat_server.requests[1])["u"]
    assert tools.log == []


def test_misspelled_and_unknown_tool_names(chat_server, make_registry, tmp_path):
    (tmp_path / "f.txt").write_text("F")
    reg, tools = make_registry()
    chat_server.play(
        reply(None, call("functions.Read-File", {"path": "f.txt"}, "r"),
              call("frobnicate", {}, "x")),
        reply("ok"),
    )
    result = run(chat_server, reg, tmp_path, toolsets=["file"])
    second = chat_server.requests[1]
    names = [tc["function"]["name"] for tc in second["messages"][1]["tool_calls"]]
    assert names == ["read_file", "frobnicate"]  # repaired in the history
    assert tools.calls_of("read_file") == [{"path": "f.txt"}]
    err = json.loads(tool_results(second)["x"])["error"]
    assert "Unknown tool 'frobnicate'" in err and "read_file, write_file" in err
    r, x = result.tool_calls
    assert (r.status, r.repair, r.name) == ("ok", "prefix", "read_file")
    assert (x.status, x.name) == ("unknown_tool", None)


def test_tool_outside_selected_toolsets_is_unknown(chat_server, make_registry, tmp_path):
    reg, tools = make_registry()
    chat_server.play(reply(None, call("web_search", {"query": "q"}, "s")), reply("ok"))
    result = run(chat_server, reg, tmp_path, toolsets=["file"])
    assert tools.log == []
    assert result.tool_calls[0].status == "unknown_tool"


def test_schema_violations_go_back_to_the_model(chat_server, make_registry, tmp_path):
    reg, tools = make_registry()
    chat_server.play(reply(None, call("read_file", {"file": "a", "offset": "x"}, "v")),
                     reply("ok"))
    result = run(chat_server, reg, tmp_path)
    assert tools.log == []
    msg = tool_results(chat_server.requests[1])["v"]
    assert "path: required field missing" in msg
    assert "offset: expected integer, got string" in msg
    assert "file: unknown field" in msg
    assert result.tool_calls[0].status == "invalid_arguments"


def test_duplicate_calls_run_once_each_gets_a_result(chat_server, make_registry, tmp_path):
    (tmp_path / "d.txt").write_text("D")
    reg, tools = make_registry()
    chat_server.play(
        reply(None, call("read_file", '{"path": "d.txt"}', "one"),
              call("read_file", '{ "path" : "d.txt" }', "two")),
        reply("ok"),
    )
    result = run(chat_server, reg, tmp_path)
    assert len(tools.calls_of("read_file")) == 1
    sent = tool_results(chat_server.requests[1])
    assert sent["one"] == sent["two"] and json.loads(sent["one"]) == {"content": "D"}
    assert result.tool_calls[1].duplicate_of == "one"


def test_non_overlapping_calls_run_in_parallel(chat_server, make_registry, gate, tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.txt").write_text(name)
    gate.target, gate.hold = 3, 10.0  # released as soon as all three have arrived
    reg, _ = make_registry()
    chat_server.play(
        reply(None, call("read_file", {"path": "a.txt"}, "1"),
              call("write_file", {"path": "out/c.txt", "content": "c"}, "2"),
              call("web_search", {"query": "q"}, "3")),
        reply("ok"),
    )
    result = run(chat_server, reg, tmp_path)
    assert gate.peak == 3
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == ["1", "2", "3"]
    assert (tmp_path / "out" / "c.txt").read_text() == "c"


def test_overlapping_paths_run_sequentially_in_order(chat_server, make_registry, gate,
                                                     tmp_path):
    (tmp_path / "dir").mkdir()
    gate.target, gate.hold = 2, 0.2
    reg, _ = make_registry()
    chat_server.play(
        reply(None, call("write_file", {"path": "dir/new.txt", "content": "n"}, "w"),
              call("read_file", {"path": str(tmp_path / "dir")}, "r")),
        reply("ok"),
    )
    result = run(chat_server, reg, tmp_path)
    assert gate.peak == 1
    assert gate.order == ["write:dir/new.txt", f"read:{tmp_path / 'dir'}"]
    listing = json.loads(tool_results({"messages": result.messages})["r"])
    assert listing == {"entries": ["new.txt"]}  # the read saw the write: order kept


def test_interactive_tool_forces_sequential(chat_server, make_registry, gate, tmp_path):
    gate.target, gate.hold = 2, 0.2
    reg, _ = make_registry()
    chat_server.play(reply(None, call("clarify", {"question": "?"}, "c"),
                           call("web_search", {"query": "q"}, "s")), reply("ok"))
    run(chat_server, reg, tmp_path)
    assert gate.peak == 1


def test_delegate_calls_are_capped_per_turn(chat_server, make_registry, tmp_path):
    reg, tools = make_registry(Config().with_overrides({"agent.max_delegate_calls": 1}))
    chat_server.play(
        reply(None, call("delegate_task", {"goal": "a"}, "d1"),
              call("delegate_task", {"goal": "b"}, "d2"),
              call("delegate_task", {"goal": "a"}, "d3")),
        reply("ok"),
    )
    result = run(chat_server, reg, tmp_path)
    assert tools.calls_of("delegate_task") == [{"goal": "a"}]
    assert [c.status for c in result.tool_calls] == ["ok", "refused", "duplicate"]
    assert "delegate_task limit reached" in tool_results(chat_server.requests[1])["d2"]


def test_tool_exception_becomes_error_result(chat_server, make_registry, tmp_path):
    reg, _ = make_registry()
    chat_server.play(reply(None, call("fail", {}, "f")), reply("ok"))
    result = run(chat_server, reg, tmp_path)
    assert result.tool_calls[0].status == "tool_error"
    assert "boom" in tool_results(chat_server.requests[1])["f"]


def test_empty_answer_is_retried_with_a_nudge(chat_server, make_registry, tmp_path):
    reg, _ = make_registry()
    chat_server.play(reply(""), reply("<think>only thinking</think>"), reply("Real answer."))
    result = run(chat_server, reg, tmp_path)
    assert result.final_answer == "Real answer."
    assert result.iterations == 3
    assert chat_server.requests[1]["messages"][-1] == {"role": "user", "content": EMPTY_NUDGE}


def test_empty_answers_give_up_after_the_configured_retries(chat_server, make_registry,
                                                            tmp_path):
    reg, _ = make_registry(Config().with_overrides({"agent.empty_retries": 1}))
    chat_server.play(reply(""), reply(None), reply("never asked"))
    result = run(chat_server, reg, tmp_path)
    assert (result.stop_reason, result.final_answer, result.iterations) == ("empty", "", 2)


def test_budget_exhaustion_makes_one_grace_call_without_tools(chat_server, make_registry,
                                                              tmp_path):
    (tmp_path / "a.txt").write_text("A")
    reg, tools = make_registry()
    chat_server.play(
        reply(None, call("read_file", {"path": "a.txt"})),
        reply(None, call("read_file", {"path": "a.txt", "offset": 2})),
        reply("Best effort: A.", call("read_file", {"path": "ignored"})),
    )
    result = run(chat_server, reg, tmp_path, max_iterations=2)
    assert len(chat_server.requests) == 3
    grace = chat_server.requests[2]
    assert "tools" not in grace
    assert "budget" in grace["messages"][-1]["content"]
    assert "tools" in chat_server.requests[1]
    assert (result.stop_reason, result.grace_call, result.iterations) == ("budget", True, 3)
    assert result.final_answer == "Best effort: A."
    assert len(tools.calls_of("read_file")) == 2  # the grace reply's call is ignored
    assert "tool_calls" not in result.messages[-1]
    ids = [c.id for c in result.tool_calls]
    assert len(set(ids)) == 2 and all(ids)  # generated ids, distinct across turns


def test_reasoning_is_kept_out_of_answer_and_history(chat_server, make_registry, tmp_path):
    reg, _ = make_registry()
    chat_server.play(
        reply("<think>plan: search</think>Looking.", call("web_search", {"query": "x"}, "s"),
              reasoning_content="deep thoughts"),
        reply("<think>done thinking</think>\nThe answer."),
    )
    result = run(chat_server, reg, tmp_path)
    assert result.final_answer == "The answer."
    assert result.reasoning == "done thinking"
    sent = chat_server.requests[1]["messages"][1]
    assert sent["content"] == "Looking."
    assert "reasoning_content" not in sent and "think" not in json.dumps(sent)


def test_repeated_provider_ids_are_made_unique(chat_server, make_registry, tmp_path):
    reg, _ = make_registry()
    chat_server.play(reply(None, call("web_search", {"query": "a"}, "call_0")),
                     reply(None, call("web_search", {"query": "b"}, "call_0")),
                     reply("ok"))
    result = run(chat_server, reg, tmp_path)
    first, second = result.tool_calls
    assert first.id == "call_0" and second.id != "call_0"


def test_broken_history_is_repaired_before_the_first_call(chat_server, make_registry,
                                                          tmp_path):
    reg, _ = make_registry()
    history = [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": None, "tool_calls": [call("web_search", "{}", "lost")]},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
        {"role": "user", "content": "now"},
    ]
    chat_server.play(reply("fine"))
    result = run(chat_server, reg, tmp_path, prompt=history)  # type: ignore[arg-type]
    sent = chat_server.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == "lost" and "No result" in sent[2]["content"]
    assert result.transcript_repairs == 2


def test_http_error_ends_with_error_result_keeping_messages(chat_server, make_registry,
                                                            tmp_path):
    reg, _ = make_registry()
    chat_server.play(reply(None, call("web_search", {"query": "q"}, "s")),
                     HttpStatus(401, {"error": {"message": "invalid api key"}}))
    result = run(chat_server, reg, tmp_path)
    assert result.stop_reason == "error"
    assert "HTTP 401" in result.error and "invalid api key" in result.error
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool"]


def test_server_error_is_retried(chat_server, make_registry, tmp_path):
    reg, _ = make_registry()
    chat_server.play(HttpStatus(503, "overloaded"), reply("after retry"))
    result = run(chat_server, reg, tmp_path)
    assert result.final_answer == "after retry"
    assert len(chat_server.requests) == 2


@pytest.mark.parametrize("budget", [0, -1])
def test_budget_must_be_positive(make_registry, budget):
    reg, _ = make_registry()
    with pytest.raises(ValueError):
        run_conversation("x", registry=reg, model=object(), max_iterations=budget)  # type: ignore[arg-type]


def test_budget_spent_on_empty_replies_ends_without_grace(make_registry):
    from execengine.agent import ScriptedModel

    reg, _ = make_registry()
    model = ScriptedModel([{"role": "assistant", "content": ""}, {"role": "assistant",
                                                                 "content": "late"}])
    result = run_conversation("x", registry=reg, model=model, max_iterations=1)
    assert (result.stop_reason, result.iterations, result.grace_call) == ("empty", 1, False)
    assert len(model.requests) == 1


def test_on_turn_sees_each_tool_turn_and_system_prompt_is_first(make_registry):
    from execengine.agent import ScriptedModel

    reg, _ = make_registry()
    model = ScriptedModel([
        {"role": "assistant", "tool_calls": [call("web_search", {"query": "a"}, "1")]},
        {"role": "assistant", "tool_calls": [call("web_search", {"query": "b"}, "2")]},
        {"role": "assistant", "content": "ok"}])
    seen = []
    result = run_conversation("x", registry=reg, model=model, system_prompt="be brief",
                              on_turn=lambda t: seen.append([c.id for c in t.calls]))
    assert seen == [["1"], ["2"]]
    assert result.messages[0] == {"role": "system", "content": "be brief"}
    assert model.requests[0]["messages"][0]["role"] == "system"
