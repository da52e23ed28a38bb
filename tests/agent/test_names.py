"""Tool-name repair."""

from __future__ import annotations

import pytest

from execengine.agent.names import resolve_tool_name

TOOLS = ["read_file", "write_file", "search_files", "web_search", "patch", "terminal"]


@pytest.mark.parametrize("requested, expected, how", [
    ("read_file", "read_file", ""),
    ("Read_File", "read_file", "case"),
    ("read-file", "read_file", "separators"),
    ("read file", "read_file", "separators"),
    (" read_file ", "read_file", "whitespace"),
    ("functions.read_file", "read_file", "prefix"),
    ("default_api:web_search", "web_search", "prefix"),
    ("tool_patch", "patch", "prefix"),
    ("functions.tool_terminal", "terminal", "prefix"),
    ("read_fiel", "read_file", "close-match"),
    ("serch_files", "search_files", "close-match"),
])
def test_repairs(requested, expected, how):
    res = resolve_tool_name(requested, TOOLS)
    assert (res.name, res.repair, res.error) == (expected, how, "")
    assert res.repaired == bool(how)


@pytest.mark.parametrize("requested", ["frobnicate", "", "file", "read"])
def test_unclear_names_get_the_tool_list(requested):
    res = resolve_tool_name(requested, TOOLS)
    assert res.name is None
    assert "Available tools: patch, read_file, search_files, terminal, web_search, write_file" \
        in res.error


def test_ambiguous_close_match_is_not_guessed():
    res = resolve_tool_name("get_b", ["get_a", "get_c"])
    assert res.name is None


def test_exact_name_with_prefix_like_start_wins():
    assert resolve_tool_name("tool_x", ["tool_x", "x"]).name == "tool_x"


def test_only_exposed_tools_count():
    assert resolve_tool_name("terminal", ["read_file"]).name is None


def test_cutoff_is_configurable():
    assert resolve_tool_name("rd_file", ["read_file"], cutoff=0.95).name is None
    assert resolve_tool_name("rd_file", ["read_file"], cutoff=0.7).name == "read_file"
