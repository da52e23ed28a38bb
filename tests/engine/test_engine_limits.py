"""Limits end to end: message size, hung tool calls."""

from __future__ import annotations

import textwrap


def run(engine, code, **kw):
    return engine.execute(textwrap.dedent(code), **kw)


def test_oversized_call_fails_alone_and_the_connection_lives_on(make_engine, calls):
    engine = make_engine(max_message_bytes=4096)
    r = run(engine, """
        from hermes_tools import web_search
        from _execengine.client import ToolCallError
        try:
            web_search("x" * 5000)
        except ToolCallError as exc:
            print("refused:", exc)
        print(web_search("small")["query"])
    """)
    assert r.status == "success", r.stderr
    first, second = r.output.splitlines()
    assert first.startswith("refused: the call to 'web_search' is ")
    assert "more than the host accepts (4096 bytes)" in first
    assert second == "small"
    assert [a["query"] for a, _, _ in calls] == ["small"]
    assert r.tool_calls_made == 1
