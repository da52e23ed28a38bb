"""Per-turn guards."""

from __future__ import annotations

from execengine.agent.guards import apply_guards, call_key, find_duplicates


def test_duplicates_ignore_key_order():
    assert call_key("t", {"a": 1, "b": 2}) == call_key("t", {"b": 2, "a": 1})
    assert call_key("t", {"a": 1}) != call_key("u", {"a": 1})
    assert call_key("t", {"a": 1}) != call_key("t", {"a": "1"})


def test_first_occurrence_runs():
    calls = [("1", "t", {"a": 1}), ("2", "t", {"a": 2}), ("3", "t", {"a": 1}),
             ("4", "t", {"a": 1})]
    assert find_duplicates(calls) == {"3": "1", "4": "1"}


def test_delegate_cap_counts_unique_calls_only():
    calls = [("1", "delegate_task", {"goal": "a"}), ("2", "delegate_task", {"goal": "a"}),
             ("3", "delegate_task", {"goal": "b"}), ("4", "read_file", {"path": "x"}),
             ("5", "delegate_task", {"goal": "c"})]
    v = apply_guards(calls, max_delegate_calls=2)
    assert v.duplicates == {"2": "1"}
    assert list(v.refused) == ["5"]
    assert "at most 2" in v.refused["5"]


def test_zero_cap_refuses_every_delegate_call():
    v = apply_guards([("1", "delegate_task", {"goal": "a"})], max_delegate_calls=0)
    assert list(v.refused) == ["1"]
