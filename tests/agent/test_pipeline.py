"""The pipeline used directly, as a framework with its own loop would."""

from __future__ import annotations

import json
import threading

from execengine.agent import ToolCallPipeline
from execengine.agent.messages import normalize_assistant
from execengine.config import Config
from execengine.context import CallContext
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry

from .conftest import assert_valid_transcript, call


def test_anthropic_tool_use_through_the_pipeline(make_registry, tmp_path):
    (tmp_path / "a.txt").write_text("A")
    reg, tools = make_registry()
    pipe = ToolCallPipeline(reg, tools=reg.get_tool_definitions(format="anthropic"),
                            context=CallContext(cwd=str(tmp_path)))
    out = pipe.process({"role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "text", "text": "reading"},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
    ]})
    assert out.tool_messages == [{"role": "tool", "tool_call_id": "toolu_1",
                                  "content": json.dumps({"content": "A"})}]
    assert out.assistant_message["content"] == "reading"
    assert_valid_transcript(out.messages)
    assert tools.calls_of("read_file") == [{"path": "a.txt"}]


def test_every_call_gets_exactly_one_result_in_order(make_registry, tmp_path):
    reg, _ = make_registry()
    pipe = ToolCallPipeline(reg, context=CallContext(cwd=str(tmp_path)))
    msg = {"role": "assistant", "content": "", "tool_calls": [
        call("nope", "{}", "1"), call("web_search", '{"query": "a"}', "2"),
        call("web_search", '{"query": "a"}', "3"), call("read_file", "{bad", "4"),
        call("read_file", "[1]", "5"), call("read_file", "{}", "6"),
        call("WEB_SEARCH", '{"query": "b"}', "7")]}
    out = pipe.process(msg)
    assert [m["tool_call_id"] for m in out.tool_messages] == list("1234567")
    assert [c.status for c in out.calls] == [
        "unknown_tool", "ok", "duplicate", "truncated", "not_object", "invalid_arguments",
        "ok"]
    assert all(json.loads(c.result).get("error") for c in out.calls
               if c.status not in ("ok", "duplicate"))
    assert out.plan.parallel  # the two web_search calls that ran


def test_batch_timeout_through_the_pipeline(tmp_path):
    reg = ToolRegistry(Config().with_overrides({"agent.batch_timeout": 1.0}))
    release = threading.Event()
    seen = []

    def stuck(args, ctx):
        seen.append(args["query"])
        release.wait(10)
        return "late"

    reg.register("web_search", "web", {"description": "s", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}}}, stuck,
        policy=ToolPolicy(read_only=True, parallel_safe=True))
    reg.register("web_extract", "web", {"description": "e", "parameters": {
        "type": "object", "properties": {}}}, lambda a, c: {"pages": []},
        policy=ToolPolicy(read_only=True, parallel_safe=True))
    try:
        out = ToolCallPipeline(reg).process({"role": "assistant", "tool_calls": [
            call("web_search", {"query": "q"}, "s"), call("web_extract", {}, "e")]})
    finally:
        release.set()
        reg.close()
    s, e = out.calls
    assert (s.status, e.status) == ("timeout", "ok")
    assert "timed out" in json.loads(s.result)["error"]
    assert seen == ["q"]


def test_history_ids_are_respected(make_registry):
    reg, _ = make_registry()
    pipe = ToolCallPipeline(reg)
    history = [{"role": "assistant", "tool_calls": [call("web_search", "{}", "call_0")]}]
    out = pipe.process({"role": "assistant", "tool_calls": [
        call("web_search", {"query": "x"}, "call_0")]}, history=history)
    assert out.calls[0].id != "call_0"


def test_normalised_turn_can_be_passed_in(make_registry):
    reg, tools = make_registry()
    turn = normalize_assistant({"role": "assistant", "tool_calls": [
        call("web_search", {"query": "x"}, "a")]}, finish_reason="length")
    out = ToolCallPipeline(reg).process(turn)
    assert out.calls[0].status == "truncated" and tools.log == []


def test_agent_level_tool_without_handler_says_so(tmp_path):
    reg = ToolRegistry.with_builtins(plugins=False)
    try:
        out = ToolCallPipeline(reg, tools=reg.get_tool_definitions(["memory"])).process(
            {"role": "assistant", "tool_calls": [call("memory", {"action": "read"}, "m")]})
    finally:
        reg.close()
    assert out.calls[0].status == "tool_error"
    assert "set_agent_handler" in out.calls[0].result


def test_unknown_names_invalid_for_providers_are_sanitised_in_history(make_registry):
    reg, _ = make_registry()
    out = ToolCallPipeline(reg).process({"role": "assistant", "tool_calls": [
        call("my tool!", "{}", "a"), call("", "{}", "b"), call("fine-name", "{}", "c")]})
    names = [tc["function"]["name"] for tc in out.assistant_message["tool_calls"]]
    assert names == ["my_tool", "unknown_tool", "fine-name"]
    assert "'my tool!'" in json.loads(out.calls[0].result)["error"]
    assert "an empty name" in json.loads(out.calls[1].result)["error"]


def test_async_process(make_registry):
    import asyncio

    reg, tools = make_registry()
    out = asyncio.run(ToolCallPipeline(reg).aprocess({"role": "assistant", "tool_calls": [
        call("web_search", {"query": "x"}, "a")]}))
    assert out.calls[0].status == "ok" and tools.calls_of("web_search") == [{"query": "x"}]


def test_framework_integration_example(tmp_path):
    """The README's "plug the pipeline into your own loop" example, run for real."""
    from execengine import ToolRegistry as PublicRegistry
    from execengine.agent import ScriptedModel, install_agent_handlers, repair_transcript

    (tmp_path / "notes.txt").write_text("TODO: a\nTODO: b\n")
    scripted = ScriptedModel([
        {"role": "assistant", "content": None, "tool_calls": [
            call("search_files", {"pattern": "TODO", "path": str(tmp_path)}, "s")]},
        {"role": "assistant", "content": "2 TODOs."},
    ])

    def my_llm(messages, tools):
        r = scripted.complete(messages, tools)
        return {"message": r.message, "finish_reason": r.finish_reason}

    config = Config().with_overrides({"agent.memory_file": str(tmp_path / "m.json")})
    registry = PublicRegistry.with_builtins(config, plugins=False)
    install_agent_handlers(registry)
    tools = registry.get_tool_definitions(["coding"])
    pipeline = ToolCallPipeline(registry, tools=tools, task_id="session-1")
    messages: list = [{"role": "user", "content": "Count the TODOs"}]
    statuses = []
    while True:
        messages = repair_transcript(messages).messages
        response = my_llm(messages, tools)
        message, finish = response["message"], response["finish_reason"]
        if not message.get("tool_calls"):
            messages.append(message)
            break
        turn = pipeline.process(message, finish_reason=finish, history=messages)
        messages.extend(turn.messages)
        statuses += [c.status for c in turn.calls]
    registry.close()
    assert statuses == ["ok"]
    assert json.loads(messages[2]["content"])["total_count"] == 2
    assert_valid_transcript(messages)
