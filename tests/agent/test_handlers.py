"""Reference handlers for todo and memory, routed through the registry."""

from __future__ import annotations

import json
import os

import pytest

from execengine.agent.handlers import MemoryStore, TodoStore, install_agent_handlers
from execengine.config import Config
from execengine.registry import ToolRegistry


@pytest.fixture
def registry(tmp_path):
    cfg = Config().with_overrides({"agent.memory_file": str(tmp_path / "m" / "memory.json")})
    reg = ToolRegistry.with_builtins(cfg, plugins=False)
    install_agent_handlers(reg)
    yield reg
    reg.close()


def dispatch(reg, name, args, task_id=None):
    return json.loads(reg.dispatch(name, args, task_id=task_id))


def test_todo_is_per_session_and_merges(registry):
    items = [{"id": "1", "content": "plan", "status": "in_progress"},
             {"id": "2", "content": "build", "status": "pending"}]
    dispatch(registry, "todo", {"todos": items}, task_id="s1")
    out = dispatch(registry, "todo", {"todos": [{"id": "1", "content": "plan",
                                                 "status": "completed"},
                                                {"id": "3", "content": "ship",
                                                 "status": "pending"}], "merge": True},
                   task_id="s1")
    assert [(i["id"], i["status"]) for i in out["todos"]] == [
        ("1", "completed"), ("2", "pending"), ("3", "pending")]
    assert out["summary"]["completed"] == 1
    assert dispatch(registry, "todo", {}, task_id="s2")["todos"] == []
    replaced = dispatch(registry, "todo", {"todos": []}, task_id="s1")
    assert replaced["todos"] == []


def test_memory_persists_atomically(registry, tmp_path):
    assert dispatch(registry, "memory", {"action": "add", "content": "user likes tea"})[
        "count"] == 1
    dispatch(registry, "memory", {"action": "add", "content": "repo uses ruff"})
    dispatch(registry, "memory", {"action": "replace", "old_text": "tea",
                                  "content": "user likes green tea"})
    dispatch(registry, "memory", {"action": "remove", "old_text": "ruff"})
    path = tmp_path / "m" / "memory.json"
    assert json.loads(path.read_text())["entries"] == ["user likes green tea"]
    assert os.listdir(path.parent) == ["memory.json"]  # no temporary files left
    fresh = MemoryStore(path)
    assert fresh.entries() == ["user likes green tea"]


@pytest.mark.parametrize("args, message", [
    ({"action": "add"}, "non-empty 'content'"),
    ({"action": "remove"}, "needs 'old_text'"),
    ({"action": "remove", "old_text": "absent"}, "no note contains"),
    ({"action": "add", "content": "x" * 3000}, "the limit is"),
])
def test_memory_errors_are_results(registry, args, message):
    assert message in dispatch(registry, "memory", args)["error"]


def test_ambiguous_memory_edit_is_refused(tmp_path):
    store = MemoryStore(tmp_path / "mem.json")
    store.apply("add", "a note")
    store.apply("add", "another note")
    out = store.apply("remove", old_text="note")
    assert "2 notes" in out["error"] and store.entries() == ["a note", "another note"]


def test_corrupt_memory_file_is_left_untouched(registry, tmp_path):
    path = tmp_path / "m" / "memory.json"
    path.parent.mkdir()
    path.write_text("{not json")
    out = dispatch(registry, "memory", {"action": "add", "content": "x"})
    assert "not valid JSON" in out["error"] and str(path) in out["error"]
    assert path.read_text() == "{not json"


def test_host_handlers_replace_the_references(tmp_path):
    reg = ToolRegistry.with_builtins(plugins=False)
    try:
        installed = install_agent_handlers(
            reg, memory=lambda a, c: {"host": True},
            session_search=lambda a, c: {"results": [a["query"]]})
        assert set(installed) == {"todo", "memory", "session_search"}
        assert dispatch(reg, "memory", {"action": "read"}) == {"host": True}
        assert dispatch(reg, "session_search", {"query": "q"}) == {"results": ["q"]}
        assert "set_agent_handler" in dispatch(reg, "delegate_task", {"goal": "g"})["error"]
    finally:
        reg.close()


def test_todo_store_direct():
    store = TodoStore()
    store.write("s", [{"id": 1, "content": "c", "status": "pending"}], merge=False)
    assert store.items("s") == [{"id": "1", "content": "c", "status": "pending"}]
