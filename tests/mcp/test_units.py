"""The MCP pieces that need no server: names, result mapping, registration rules,
the script-side catalogue."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

from execengine.config import parse_config as parse
from execengine.mcp.manager import McpManager
from execengine.mcp.names import sanitize, short_name, tool_name
from execengine.mcp.results import to_value
from execengine.registry import ToolRegistry


def test_names_are_sanitised_and_bounded():
    assert sanitize("my-server.v2") == "my_server_v2"
    assert sanitize("---") == "_"
    assert tool_name("git", "git_status") == "mcp_git_git_status"
    assert tool_name("my-srv", "list files!") == "mcp_my_srv_list_files"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long.startswith("mcp_server_xxx")
    assert long != tool_name("server", "x" * 101)  # the hash keeps them apart
    assert short_name("my-srv", "mcp_my_srv_list_files") == "list_files"
    assert short_name("s", "mcp_s_class") is None  # a keyword cannot be an attribute


def _text(text):
    return NS(type="text", text=text)


def test_result_mapping():
    assert to_value(NS(content=[_text("a"), _text("b")], is_error=False,
                       structured_content=None), has_output_schema=False) == {"result": "a\nb"}
    assert to_value(NS(content=[_text("boom")], is_error=True, structured_content={"x": 1}),
                    has_output_schema=True) == {"error": "boom"}
    assert to_value(NS(content=[], is_error=True, structured_content=None),
                    has_output_schema=False)["error"].startswith("the MCP tool reported")
    # structuredContent only counts when the tool declares an output schema
    structured = NS(content=[_text('{"x": 1}')], is_error=False, structured_content={"x": 1})
    assert to_value(structured, has_output_schema=True) == {"x": 1}
    assert to_value(structured, has_output_schema=False) == {"result": '{"x": 1}'}
    blob = NS(type="resource", resource=NS(uri="file:///b", mime_type="application/x",
                                           blob="AAAA"))
    link = NS(type="resource_link", uri="file:///l", name="l", description="d", mime_type=None)
    audio = NS(type="audio", data="not base64!!", mime_type="audio/wav")
    value = to_value(NS(content=[blob, link, audio, NS(type="new-kind")], is_error=False,
                        structured_content=None), has_output_schema=False)
    assert value["content"] == [
        {"type": "resource", "uri": "file:///b", "mime_type": "application/x", "bytes": 3,
         "note": "binary resource data not included"},
        {"type": "resource_link", "uri": "file:///l", "name": "l", "description": "d",
         "mime_type": None},
        {"type": "audio", "mime_type": "audio/wav", "bytes": None,
         "note": "audio data not included"},
        {"type": "new-kind", "note": "content type not understood"}]


def _tool(name, description="d", schema=None):
    return NS(name=name, title=None, description=description, annotations=None,
              input_schema=schema or {"type": "object", "properties": {"q": {"type": "string"}}},
              output_schema=None)


def test_collisions_and_bad_schemas_are_reported_and_the_rest_registered():
    config = parse("mcp_servers:\n  s:\n    command: x\n  t:\n    command: x\n")
    with ToolRegistry(config) as reg:
        reg.register("mcp_t_taken", "other", {"description": "held",
                                              "parameters": {"type": "object"}},
                     lambda a, c: "x")
        with McpManager(reg, servers={}, cache_dir="") as manager:
            conn = NS(name="s", config=config.mcp_servers["s"])
            manager._register(conn, [_tool("a-b"), _tool("a_b"), _tool("ok"),
                                     _tool("bad", schema={"type": "array"})])
            conn_t = NS(name="t", config=config.mcp_servers["t"])
            manager._register(conn_t, [_tool("taken")])
            assert sorted(n for n in reg.names() if n.startswith("mcp_")) == \
                ["mcp_s_a_b", "mcp_s_ok", "mcp_t_taken"]
            assert reg.get("mcp_t_taken").toolset == "other"
            errors = reg.load_errors
            assert "collides with tool 'a-b'" in errors["mcp server s: tool a_b"]
            assert "mcp server s: tool bad" in errors
            assert "already registered by toolset 'other'" in errors["mcp server t: tool taken"]
            assert reg.get("mcp_s_ok").policy.script_callable
            # a new list replaces the old: removed tools go, reports are renewed
            manager._register(conn, [_tool("ok", description="new")])
            assert sorted(n for n in reg.names() if n.startswith("mcp_s_")) == ["mcp_s_ok"]
            assert reg.get("mcp_s_ok").description == "new"
            assert not [k for k in errors if k.startswith("mcp server s:")]


def test_calls_after_close_are_errors_not_hangs():
    config = parse("mcp_servers:\n  s:\n    command: x\n")
    with ToolRegistry(config) as reg:
        manager = McpManager(reg, servers={}, cache_dir="")
        manager.close()
        manager.close()  # idempotent
        assert "not running" in manager.call("s", "t", {})["error"]


def test_script_side_catalogue():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "sandbox" / "catalogue.py"
    spec = importlib.util.spec_from_file_location("catalogue_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def get_invoice(id: str, limit: int = 10) -> dict:
        """Fetch an invoice by id.

        More text."""

    def list_users() -> dict:
        """List every user."""

    cat = module.Catalogue({"get_invoice": get_invoice, "list_users": list_users,
                            "x": 3}, ["get_invoice", "list_users", "x", "missing"])
    assert [h["name"] for h in cat.search("invoice")] == ["get_invoice"]
    assert cat.search("invoice")[0]["summary"] == "Fetch an invoice by id."
    assert len(cat.search("")) == 2 and cat.search("", limit=1) == cat.search("")[:1]
    described = cat.describe("get_invoice")
    assert described["signature"] == "get_invoice(id: str, limit: int = 10) -> dict"
    assert "More text." in described["doc"]
    assert "Did you mean: get_invoice" in cat.describe("get_invoic")["error"]
    assert json.dumps(cat.search("nothing matches this")) == "[]"


def test_parameters_that_are_not_python_names_go_through_extra_args():
    from execengine.engine.stub import render_stub

    schema = {"name": "mcp_m_send", "description": "Send.",
              "parameters": {"type": "object", "required": ["to", "from"],
                             "properties": {"to": {"type": "string"},
                                            "from": {"type": "string"},
                                            "reply-to": {"type": "string"}}}}
    from execengine.engine.stub import stub_function

    fn = stub_function("mcp_m_send", schema)
    assert fn.signature == "to: str, extra_args: dict | None = None"
    assert "go in extra_args={...}: from, reply-to." in fn.doc
    namespace: dict = {"_args": lambda given, optional: given}
    exec(f"def send({fn.signature}):\n    return _args({fn.packed}, {fn.optional!r})",
         namespace)
    assert namespace["send"]("a", extra_args={"from": "b"}) == {"to": "a", "from": "b"}
    assert namespace["send"]("a") == {"to": "a"}
    source = render_stub([schema], groups={"m": {"send": "mcp_m_send"}})
    compile(source, "hermes_tools.py", "exec")
    assert "send = staticmethod(mcp_m_send)" in source
