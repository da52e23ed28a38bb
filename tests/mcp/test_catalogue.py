"""A large catalogue: 500 tools from a generated server stay under 1,000 model tokens."""

from __future__ import annotations

import json

from _mcp_helpers import TOY

from execengine.bench.tokens import TokenCounter
from execengine.engine.tool import bound_engine

SERVERS = f"  gen:\n    command: {{python}}\n    args: [{TOY!r}, --tools, '500']\n" \
          "    connect_timeout: 50\n"


def test_500_tools_model_catalogue_under_1000_tokens_and_scripts_still_reach_them(
        mcp_registry):
    import sys

    reg, manager = mcp_registry(SERVERS.format(python=sys.executable), engine=True)
    assert manager.status()[0].tools == 500
    toolsets = ["code_execution", "mcp-gen"]
    definitions = reg.get_tool_definitions(toolsets)
    assert [d["function"]["name"] for d in definitions] == ["execute_code"]
    tokens = TokenCounter().count_tools(definitions)
    print(f"model-facing catalogue with 500 MCP tools: {tokens} tokens")
    assert tokens <= 1000
    description = definitions[0]["function"]["description"]
    assert "search_tools(query)" in description and "server gen" in description
    # the full direct catalogue, for the record: what search mode saves
    every = [{"type": "function", "function": dict(reg.get(n).schema)}
             for n in reg.names() if n.startswith("mcp_gen_")]
    assert TokenCounter().count_tools(every) > 20 * tokens
    result = bound_engine(reg).execute("""
from hermes_tools import search_tools, describe_tool, mcp_gen_archive_invoice_7
hits = search_tools("archive invoice")
print(hits[0]["name"])
print(describe_tool(hits[0]["name"])["signature"])
print(mcp_gen_archive_invoice_7(id="42")["result"])
""", enabled_toolsets=toolsets)
    assert result.status == "success", result.stderr
    lines = result.output.splitlines()
    assert lines[0].startswith("mcp_gen_archive_invoice_")
    assert lines[1].startswith(lines[0] + "(id: str, limit: int = 10")
    assert lines[2] == "archive_invoice_7:42:10:False"


def test_below_the_threshold_tools_are_offered_directly(mcp_registry):
    reg, _ = mcp_registry(f"  toy:\n    command: {__import__('sys').executable}\n"
                          f"    args: [{TOY!r}]\n", engine=True)
    names = [d["function"]["name"] for d in reg.get_tool_definitions(["code_execution",
                                                                      "mcp-toy"])]
    assert "mcp_toy_echo" in names and "execute_code" in names
    ce = next(d for d in reg.get_tool_definitions(["code_execution", "mcp-toy"])
              if d["function"]["name"] == "execute_code")
    assert "- mcp_toy_echo: Return the text unchanged." in ce["function"]["description"]
    assert json.loads(reg.dispatch("mcp_toy_echo", {"text": "d"})) == {"result": "d"}
