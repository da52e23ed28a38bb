"""Transcript repair."""

from __future__ import annotations

import copy

from execengine.agent.transcript import repair_transcript

from .conftest import assert_valid_transcript


def asst(*ids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "t", "arguments": "{}"}}
        for i in ids]}


def tool(cid: str, content: str = "r") -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def test_valid_history_is_unchanged():
    history = [{"role": "user", "content": "q"}, asst("a", "b"), tool("a"), tool("b"),
               {"role": "assistant", "content": "done"}]
    fixed = repair_transcript(history)
    assert fixed.messages == history and not fixed.changed


def test_missing_results_get_placeholders_in_call_order():
    history = [{"role": "user", "content": "q"}, asst("a", "b", "c"), tool("b", "B")]
    fixed = repair_transcript(history)
    assert [m.get("tool_call_id") for m in fixed.messages[2:]] == ["a", "b", "c"]
    assert fixed.messages[3]["content"] == "B"
    assert "No result" in fixed.messages[2]["content"]
    assert fixed.placeholders == ("a", "c")
    assert_valid_transcript(fixed.messages)


def test_orphans_and_second_answers_are_dropped():
    history = [tool("early"), {"role": "user", "content": "q"}, asst("a"), tool("a", "1"),
               tool("a", "2"), tool("zzz"), {"role": "user", "content": "next"}, tool("late")]
    fixed = repair_transcript(history)
    assert fixed.dropped == ("early", "a", "zzz", "late")
    assert [m["role"] for m in fixed.messages] == ["user", "assistant", "tool", "user"]
    assert fixed.messages[2]["content"] == "1"
    assert_valid_transcript(fixed.messages)


def test_result_after_an_interjected_user_message_moves_up():
    history = [asst("a"), {"role": "user", "content": "wait"}, tool("a")]
    fixed = repair_transcript(history)
    assert [m["role"] for m in fixed.messages] == ["assistant", "tool", "user"]
    assert fixed.moved == ("a",) and not fixed.placeholders


def test_result_for_an_earlier_turn_is_not_borrowed():
    history = [asst("a"), asst("b"), tool("a"), tool("b")]
    fixed = repair_transcript(history)
    assert [m.get("tool_call_id") for m in fixed.messages] == [None, "a", None, "b"]
    assert fixed.placeholders == ("a",) and fixed.dropped == ("a",)


def test_input_is_not_modified():
    history = [asst("a")]
    before = copy.deepcopy(history)
    repair_transcript(history)
    assert history == before
