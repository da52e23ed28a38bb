"""Argument parsing, truncation detection and schema validation."""

from __future__ import annotations

import pytest

from execengine.agent.arguments import check_arguments, looks_unterminated, parse_arguments

SCHEMA = {"type": "object", "properties": {
    "path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
    "mode": {"type": "string", "enum": ["a", "b"]}}, "required": ["path"]}


@pytest.mark.parametrize("raw", [None, "", "   ", "null"])
def test_empty_is_an_empty_object(raw):
    assert parse_arguments(raw, "t").args == {}


def test_object_is_used_as_is():
    obj = {"path": "x"}
    res = parse_arguments(obj, "t")
    assert res.ok and res.args == obj


def test_invalid_json_says_where():
    res = parse_arguments('{"path": "x",\n "limit": 5,, }', "read_file")
    assert res.status == "invalid_json"
    assert "line 2 column 13 (char 26)" in res.error
    assert ">>>" in res.error and "'read_file'" in res.error


@pytest.mark.parametrize("raw", ['{"content": "abc', '{"a": [1, 2', '{"a": {"b": 1}',
                                 '{"a": "esc\\"aped'])
def test_unterminated_json_is_truncation(raw):
    res = parse_arguments(raw, "write_file")
    assert res.status == "truncated" and "cut off" in res.error


def test_length_cut_response_is_truncation_even_when_parseable():
    res = parse_arguments('{"path": "x"}', "t", truncated_response=True)
    assert res.status == "truncated" and "output-token limit" in res.error


@pytest.mark.parametrize("raw, kind", [("[1, 2]", "list"), ("42", "int"), (7, "int")])
def test_non_objects_are_refused(raw, kind):
    res = parse_arguments(raw, "t")
    assert res.status == "not_object" and kind in res.error


def test_looks_unterminated():
    assert not looks_unterminated('{"a": "}"}')
    assert looks_unterminated('{"a": "}')
    assert not looks_unterminated('{"a": 1}}')


def test_schema_violations_are_all_listed():
    res = check_arguments({"limit": 0, "mode": "c", "extra": 1}, "read_file", SCHEMA)
    assert res.status == "invalid_arguments"
    assert set(res.violations) == {
        "path: required field missing", "limit: must be >= 1, got 0",
        "mode: must be one of ['a', 'b'], got 'c'",
        "extra: unknown field (known fields: limit, mode, path)"}
    assert res.error.count("\n- ") == 4


def test_valid_arguments_pass():
    res = check_arguments('{"path": "x", "limit": 3}', "t", SCHEMA)
    assert res.ok and res.args == {"path": "x", "limit": 3}


def test_no_schema_means_parse_only():
    assert check_arguments('{"anything": 1}', "t", None).ok


def test_deeply_nested_json_is_an_error_not_a_crash():
    res = parse_arguments('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "t")
    assert res.status == "invalid_json" and "nested too deeply" in res.error
