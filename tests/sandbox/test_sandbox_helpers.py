"""Script helpers: json_parse, shell_quote, retry."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from sandbox import helpers
from sandbox.helpers import json_parse, retry, shell_quote


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ('\ufeff{"a": 1}', {"a": 1}),
    (b'\xef\xbb\xbf{"a": [1, 2]}', {"a": [1, 2]}),
    ('  [1, 2, 3,]  ', [1, 2, 3]),
    ('{"a": {"b": [1, 2,],},}', {"a": {"b": [1, 2]}}),
    ('{"s": "keep, ] this,}", "t": 1,}', {"s": "keep, ] this,}", "t": 1}),
    ('{"s": "quote \\" then ,]",}', {"s": 'quote " then ,]'}),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('```\n[1,]\n```\n', [1]),
    ('{"text": "line\none"}', {"text": "line\none"}),  # raw control character in a string
    ("42", 42),
    ('"just a string"', "just a string"),
])
def test_json_parse_lenient(text: Any, expected: Any) -> None:
    assert json_parse(text) == expected


@pytest.mark.parametrize("text", ["", "{", "{'single': 1}", "[1,,2]", "```json\n{\n```", "nope"])
def test_json_parse_rejects_what_is_not_json(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json_parse(text)


def test_json_parse_error_points_at_the_original_text() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        json_parse('{"a": 1,, }')
    assert info.value.doc == '{"a": 1,, }'


def test_json_parse_type_error() -> None:
    with pytest.raises(TypeError, match="str or bytes"):
        json_parse(None)


@pytest.mark.parametrize("value", ["plain", "it's", "a b; rm -rf /", "$(id)", "", "`x`\n\"y\"", 7])
def test_shell_quote_round_trips_through_a_real_shell(value: Any) -> None:
    out = subprocess.run(["sh", "-c", f"printf %s {shell_quote(value)}"], capture_output=True,
                         text=True, timeout=10, check=True).stdout
    assert out == str(value)


def test_retry_succeeds_after_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(helpers.time, "sleep", sleeps.append)
    attempts = iter([ValueError("1"), ValueError("2"), "done"])

    def flaky() -> str:
        item = next(attempts)
        if isinstance(item, Exception):
            raise item
        return item

    assert retry(flaky, max_attempts=3, delay=0.5) == "done"
    assert sleeps == [0.5, 1.0]  # exponential backoff


def test_retry_reraises_the_last_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(helpers.time, "sleep", sleeps.append)
    count = iter(range(10))

    def always() -> None:
        raise OSError(f"attempt {next(count)}")

    with pytest.raises(OSError, match="attempt 3"):
        retry(always, max_attempts=4, delay=2)
    assert sleeps == [2, 4, 8]  # no sleep after the last attempt


def test_retry_does_not_swallow_keyboard_interrupt() -> None:
    calls = []

    def interrupted() -> None:
        calls.append(1)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        retry(interrupted, delay=0)
    assert calls == [1]


def test_retry_really_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(helpers.time, "sleep", slept.append)
    results = iter([RuntimeError(), RuntimeError(), "ok"])

    def twice_failing() -> str:
        item = next(results)
        if isinstance(item, Exception):
            raise item
        return item

    assert retry(twice_failing, delay=0.5) == "ok"
    assert slept == [0.5, 1.0]  # delay, then twice the delay, between the attempts


@pytest.mark.parametrize("kwargs, match", [
    ({"max_attempts": 0}, "at least 1"),
    ({"delay": -1}, "negative"),
])
def test_retry_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        retry(lambda: None, **kwargs)
    with pytest.raises(TypeError, match="callable"):
        retry("not callable")  # type: ignore[arg-type]
