import asyncio
import dataclasses
import json
import logging
import threading

import pytest

from execengine import Refuse, ToolRegistry
from execengine.context import CallContext

SCHEMA = {"description": "x", "parameters": {"type": "object", "properties": {
    "n": {"type": "integer"}}}}


def reg_with(handler, **kw):
    reg = ToolRegistry()
    reg.register("t", "demo", SCHEMA, handler, **kw)
    return reg


def err(text):
    return json.loads(text)["error"]


def test_results_become_text_at_the_edge():
    out = reg_with(lambda a, c: {"ok": a}).dispatch("t", {"n": 1})
    assert json.loads(out) == {"ok": {"n": 1}}
    assert reg_with(lambda a, c: "plain").dispatch("t", {}) == "plain"
    assert json.loads(reg_with(lambda a, c: [1, "é"]).dispatch("t", {})) == [1, "é"]


class _Named:
    def __str__(self):
        return "named-object"


@pytest.mark.parametrize("value", [
    {"ok": True}, [1, 2.5, "é", None, False], {"a": {"b": [{"c": "\u2603 \ud83d\ude00"}]}},
    {1: "int key", 2.5: "float key", False: "bool key", None: "null key"},
    (1, "tuple"), {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")},
    {"object": _Named(), "set": {1}}, 10 ** 30, -0.0, "already text", b"bytes \xff",
])
def test_results_are_encoded_as_json_dumps_does(value):
    from execengine.registry import to_text

    expected = (value if isinstance(value, str) else value.decode("utf-8", "replace")
                if isinstance(value, bytes) else json.dumps(value, ensure_ascii=False,
                                                            default=str))
    assert to_text(value) == expected


def test_results_are_encoded_the_same_without_jsons_c_module():
    """An interpreter without json's C encoder gets json's own, and the same text."""
    import subprocess
    import sys

    code = ("import json, json.encoder\njson.encoder.c_make_encoder = None\n"
            "from execengine.registry import to_text\n"
            "v = {'a': [1, 2.5, '\u00e9', None], 1: float('nan'), 'o': object}\n"
            "assert to_text(v) == json.dumps(v, ensure_ascii=False, default=str)\n"
            "print(to_text(v))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('{"a": [1, 2.5, "\u00e9", null], "1": NaN')


def test_a_result_that_cannot_be_encoded_is_an_error_not_an_exception():
    circular: list = []
    circular.append(circular)
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    for value in (circular, deep, {(1, 2): "a tuple key"}):
        assert "its result cannot be sent as JSON" in err(
            reg_with(lambda a, c, v=value: v).dispatch("t", {}))


def test_errors_never_escape():
    reg = reg_with(lambda a, c: 1 / 0)
    failed = "Tool execution failed: ZeroDivisionError: division by zero"
    assert err(reg.dispatch("t", {})) == failed
    assert "Unknown tool 'x'" in err(reg.dispatch("x", {}))
    assert "did you mean 't'" in err(reg.dispatch("tt", {}))
    assert "must be a JSON object, got list" in err(reg.dispatch("t", [1]))
    assert "not valid JSON" in err(reg.dispatch("t", "{bad"))


def test_json_string_and_empty_arguments():
    reg = reg_with(lambda a, c: a)
    assert json.loads(reg.dispatch("t", '{"n": 2}')) == {"n": 2}
    assert json.loads(reg.dispatch("t", "")) == {}
    assert json.loads(reg.dispatch("t", None)) == {}


def test_result_cap_keeps_head_and_tail_and_says_how_much_was_cut():
    reg = reg_with(lambda a, c: "h" * 500 + "t" * 500, max_result_size_chars=200)
    out = reg.dispatch("t", {})
    assert len(out) <= 200 and out.startswith("h") and out.endswith("t")
    head, tail = out.split("\n\n... [")[0], out.rsplit("] ...\n\n", 1)[1]
    assert set(head) == {"h"} and set(tail) == {"t"}
    omitted = 1000 - len(head) - len(tail)
    assert f"... [RESULT TRUNCATED - {omitted:,} chars omitted out of 1,000 total] ..." in out


def test_context_is_passed():
    seen = {}

    def h(args, ctx):
        seen.update(task=ctx.task_id, origin=ctx.origin, cwd=ctx.call.cwd,
                    session=ctx.call.session_id)
        return "ok"

    reg = reg_with(h)
    reg.dispatch("t", {}, CallContext(origin="execute_code", cwd="/w", session_id="S"),
                 task_id="T1")
    assert seen == {"task": "T1", "origin": "execute_code", "cwd": "/w", "session": "S"}
    reg.dispatch("t", {}, CallContext(task_id="T2"))
    assert seen["task"] == "T2" and seen["origin"] == "agent"


def test_call_context_is_typed_and_frozen():
    call = CallContext(enabled_toolsets=["web"])
    assert call.enabled_toolsets == ("web",)  # any iterable of names, kept as a tuple
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.cwd = "/x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        reg_with(lambda a, c: "ok").dispatch("t", {}, approver="A")  # type: ignore[call-arg]


def test_hooks_refuse_rewrite_transform_and_failures_are_ignored(caplog):
    reg = reg_with(lambda a, c: {"n": a.get("n")})
    reg.add_hook("pre_tool_call", lambda name, args, ctx: 1 / 0)
    reg.add_hook("pre_tool_call", lambda name, args, ctx: {"n": 42})
    reg.add_hook("post_tool_call", lambda name, args, result, ctx: result.upper())
    reg.add_hook("post_tool_call", lambda name, args, result, ctx: 1 / 0)
    with caplog.at_level(logging.ERROR):
        assert reg.dispatch("t", {"n": 1}) == '{"N": 42}'
    assert "pre_tool_call hook" in caplog.text
    reg.add_hook("pre_tool_call", lambda name, args, ctx: Refuse("not today"))
    assert err(reg.dispatch("t", {})) == "Tool call refused: not today"


def test_agent_level_tools_need_a_host_handler():
    reg = ToolRegistry.with_builtins(plugins=False)
    assert "agent-level tool" in err(reg.dispatch("todo", {}))
    reg.set_agent_handler("todo", lambda args, ctx: {"todos": []})
    assert json.loads(reg.dispatch("todo", {})) == {"todos": []}


class LoopBound:
    """A client bound to the loop it was created on, as aiohttp/httpx clients are."""

    def __init__(self):
        self.loop = asyncio.get_running_loop()

    async def get(self):
        assert asyncio.get_running_loop() is self.loop, "client used on another loop"
        await asyncio.sleep(0.01)
        return id(self.loop)


def make_async_registry():
    state = {}

    async def handler(args, ctx):
        if "client" not in state:
            state["client"] = LoopBound()
        return {"loop": await state["client"].get()}

    reg = ToolRegistry()
    reg.register("a", "demo", SCHEMA, handler, is_async=True)
    return reg


def test_async_handler_from_sync_code_reuses_one_loop():
    reg = make_async_registry()
    first = json.loads(reg.dispatch("a", {}))
    second = json.loads(reg.dispatch("a", {}))
    assert first == second  # same long-lived loop: the cached client stays valid


def test_async_handler_from_worker_threads_in_parallel():
    reg = make_async_registry()
    results = []

    def worker():
        results.append(json.loads(reg.dispatch("a", {})))

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 10
    assert len({r["loop"] for r in results}) == 1


def test_sync_dispatch_inside_a_running_loop_does_not_nest_loops():
    reg = make_async_registry()

    async def host():
        return json.loads(reg.dispatch("a", {}))

    assert "loop" in asyncio.run(host())


def test_async_entry_point_does_not_block_the_host_loop():
    reg = make_async_registry()
    reg.register("slow", "demo", SCHEMA, lambda a, c: __import__("time").sleep(0.2) or "done")

    async def host():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        out = await asyncio.gather(reg.adispatch("slow", {}), reg.adispatch("a", {}),
                                   reg.adispatch("nope", {}))
        t.cancel()
        return out, ticks

    (slow, a, nope), ticks = asyncio.run(host())
    assert slow == "done"
    assert "loop" in json.loads(a)
    assert "Unknown tool" in err(nope)
    assert ticks > 3  # the host loop kept running while the sync handler slept


def test_async_handler_exception_is_a_result():
    async def boom(args, ctx):
        raise ValueError("nope")

    reg = ToolRegistry()
    reg.register("b", "demo", SCHEMA, boom, is_async=True)
    assert err(reg.dispatch("b", {})) == "Tool execution failed: ValueError: nope"
    assert err(asyncio.run(reg.adispatch("b", {}))) == "Tool execution failed: ValueError: nope"


def test_module_level_helpers_use_a_lazily_built_default_registry(tmp_path, monkeypatch):
    import execengine.registry as registry_module

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("EXECENGINE_CONFIG", raising=False)
    monkeypatch.setattr(registry_module, "_default", None)
    from execengine import default_registry, get_tool_definitions, handle_function_call

    (tmp_path / "notes.txt").write_text("hello\n")
    out = json.loads(handle_function_call("read_file", {"path": str(tmp_path / "notes.txt")}))
    assert "hello" in out["content"]
    assert "Unknown tool" in err(handle_function_call("nope", {}))
    names = {d["function"]["name"] for d in get_tool_definitions(["file"])}
    assert names == {"read_file", "write_file", "patch", "search_files"}
    reg = default_registry()
    assert default_registry() is reg
    reg.close()


def test_one_truncation_marker_everywhere():
    from execengine.truncation import head_tail, marker

    cut = head_tail("a" * 300 + "b" * 700, 200, what="OUTPUT", note="see /x")
    assert len(cut.text) <= 200 and cut.text.startswith("a") and cut.text.endswith("b")
    head, tail = cut.text.split("\n\n... [")[0], cut.text.rsplit("]\n\n", 1)[1]
    assert set(head) == {"a"} and set(tail) == {"b"}
    assert cut.omitted == 1000 - len(head) - len(tail)
    assert head + marker(cut.omitted, 1000, note="see /x") + tail == cut.text
    assert marker(5, 10) == "\n\n... [OUTPUT TRUNCATED - 5 chars omitted out of 10 total] ...\n\n"
    assert head_tail("short", 10).text == "short" and not head_tail("short", 10).truncated
