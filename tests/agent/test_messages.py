"""Normalising assistant messages (OpenAI and Anthropic shapes)."""

from __future__ import annotations

import json

import pytest

from execengine.agent.messages import normalize_assistant, split_reasoning


def test_openai_message_keeps_arguments_exactly():
    raw = '{ "path" :"a.txt" }'
    turn = normalize_assistant({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": raw}}]},
        finish_reason="tool_calls")
    (c,) = turn.tool_calls
    assert (c.id, c.name, c.arguments, c.index) == ("c1", "read_file", raw, 0)
    msg = turn.to_openai()
    assert msg["tool_calls"][0]["function"]["arguments"] == raw
    assert msg["content"] is None
    assert not turn.truncated


def test_anthropic_blocks():
    turn = normalize_assistant({"role": "assistant", "stop_reason": "max_tokens", "content": [
        {"type": "thinking", "thinking": "let me look"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "x"}},
    ]})
    assert turn.content == "Checking."
    assert turn.reasoning == "let me look"
    assert turn.truncated
    (c,) = turn.tool_calls
    assert (c.id, c.arguments) == ("toolu_1", {"path": "x"})
    assert json.loads(turn.to_openai()["tool_calls"][0]["function"]["arguments"]) == {"path": "x"}


def test_missing_ids_are_generated_stably_and_uniquely():
    msg = {"role": "assistant", "tool_calls": [
        {"function": {"name": "a", "arguments": "{}"}},
        {"function": {"name": "a", "arguments": "{}"}},
        {"id": "", "function": {"name": "b", "arguments": "{}"}}]}
    one = normalize_assistant(msg, turn=3)
    two = normalize_assistant(msg, turn=3)
    ids = [c.id for c in one.tool_calls]
    assert ids == [c.id for c in two.tool_calls]
    assert len(set(ids)) == 3 and all(i.startswith("call_t3_") for i in ids)
    assert ids != [c.id for c in normalize_assistant(msg, turn=4).tool_calls]


def test_ids_taken_in_history_or_repeated_are_replaced():
    msg = {"role": "assistant", "tool_calls": [
        {"id": "call_0", "function": {"name": "a", "arguments": "{}"}},
        {"id": "call_1", "function": {"name": "b", "arguments": "{}"}},
        {"id": "call_1", "function": {"name": "c", "arguments": "{}"}}]}
    turn = normalize_assistant(msg, taken_ids={"call_0"})
    a, b, c = turn.tool_calls
    assert a.id != "call_0" and a.original_id == "call_0"
    assert b.id == "call_1" and c.id not in ("call_1", a.id)


def test_legacy_function_call_and_content_parts():
    turn = normalize_assistant({"role": "assistant",
                                "content": [{"type": "text", "text": "a"}, {"type": "text",
                                                                            "text": "b"}],
                                "function_call": {"name": "f", "arguments": '{"x":1}'}})
    assert turn.content == "ab"
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("f", '{"x":1}')]


def test_reasoning_fields_and_inline_blocks_combine():
    turn = normalize_assistant({"role": "assistant", "reasoning_content": "field",
                                "content": "<think>inline</think>Answer"})
    assert turn.content == "Answer"
    assert turn.reasoning == "field\n\ninline"


@pytest.mark.parametrize("text, visible, reasoning", [
    ("plain", "plain", ""),
    ("<think>a</think>b", "b", "a"),
    ("x<THINKING>a</THINKING>y<reasoning>c</reasoning>", "xy", "a\n\nc"),
    ("answer <think>cut off mid", "answer", "cut off mid"),
    ("prompt-opened reasoning</think>visible", "visible", "prompt-opened reasoning"),
    ("<think></think>", "", ""),
])
def test_split_reasoning(text, visible, reasoning):
    assert split_reasoning(text) == (visible, reasoning)


def test_not_a_mapping_is_rejected():
    with pytest.raises(TypeError):
        normalize_assistant("hello")  # type: ignore[arg-type]


def test_plain_answer_message_has_text_content():
    msg = normalize_assistant({"role": "assistant", "content": None}).to_openai()
    assert msg == {"role": "assistant", "content": ""}
