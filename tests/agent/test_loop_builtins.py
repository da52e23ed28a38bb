"""The loop with the built-in tools (files, patch, execute_code) against the local server."""

from __future__ import annotations

import json

import pytest

from execengine.agent import ChatCompletionsClient, install_agent_handlers, run_conversation
from execengine.config import Config
from execengine.context import CallContext
from execengine.engine import Engine
from execengine.registry import ToolRegistry

from .conftest import assert_valid_transcript, call, reply


@pytest.fixture
def builtins(tmp_path):
    cfg = Config().with_overrides({"agent.memory_file": str(tmp_path / "memory.json")})
    with ToolRegistry.with_builtins(cfg, plugins=False) as reg, Engine(cfg, reg):
        install_agent_handlers(reg)
        yield reg


def test_files_patch_and_execute_code(chat_server, builtins, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = ("from hermes_tools import read_file\n"
              "r = read_file('a.txt')\n"
              "print('A says', r['content'].split('|', 1)[1].strip())\n")
    chat_server.play(
        reply(None, call("write_file", {"path": "a.txt", "content": "hello\n"}, "w1"),
              call("write_file", {"path": "b.txt", "content": "one\n"}, "w2"),
              call("todo", {"todos": [{"id": "1", "content": "write", "status":
                                       "completed"}]}, "t")),
        reply(None, call("patch", {"path": "b.txt", "old_string": "one",
                                   "new_string": "two"}, "p"),
              call("execute_code", {"code": script}, "x")),
        reply(None, call("memory", {"action": "add", "content": "a.txt says hello"}, "m")),
        reply("Done: a.txt says hello, b.txt says two."),
    )
    client = ChatCompletionsClient(chat_server.base_url, "m")
    result = run_conversation("set up the files", registry=builtins, model=client,
                              context=CallContext(cwd=str(work)))
    assert result.stop_reason == "answer", result
    assert [c.status for c in result.tool_calls] == ["ok"] * 6
    assert (work / "a.txt").read_text() == "hello\n"
    assert (work / "b.txt").read_text() == "two\n"
    results = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    executed = json.loads(results["x"])
    assert executed["status"] == "success" and executed["output"] == "A says hello\n"
    assert json.loads((tmp_path / "memory.json").read_text())["entries"] == [
        "a.txt says hello"]
    for body in chat_server.requests:
        assert_valid_transcript(body["messages"])
        names = {t["function"]["name"] for t in body["tools"]}
        assert {"read_file", "execute_code", "todo", "memory"} <= names
