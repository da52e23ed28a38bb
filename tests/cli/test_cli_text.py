"""What the commands print reads well: tables fit 100 columns, counts agree with their
nouns, and a cut text says it was cut."""

from __future__ import annotations

import re

import pytest
from _cli import cli

from execengine._text import plural, shorten

LONG = "/a/very/long/path/with/no/break/" + "x" * 90
CONFIG = ("code_execution:\n  timeout: 7\nfiles:\n  denied_paths: [~/.ssh, ~/.gnupg, ~/.aws, "
          f"~/.netrc, ~/.docker/config.json, ~/.kube, /etc/shadow, /etc/sudoers, {LONG}]\n")


def test_config_show_fits_100_columns_and_wraps_long_values(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    done = cli(tmp_path, "config", "show", "--config", str(cfg))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines[1:]) <= 100, max(lines, key=len)
    assert lines[0] == f"# config file: {cfg}"
    start = next(i for i, line in enumerate(lines) if line.startswith("files.denied_paths"))
    assert lines[start].endswith("line 4")
    # the value, wrapped onto the lines below it, is all there
    value = "".join(line[40:].strip() for line in lines[start:start + 6]
                    if line.startswith(("files.denied_paths", " ")))
    assert LONG.replace("/", "") in value.replace("/", "").replace(" ", "")


@pytest.mark.parametrize("body, said", [
    ("code_execution:\n  timeout: 7\n", "1 option set"),
    ("code_execution:\n  timeout: 7\n  max_tool_calls: 3\n", "2 options set"),
])
def test_config_check_counts_options_in_words(tmp_path, body, said):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(body)
    done = cli(tmp_path, "config", "check", "--config", str(cfg))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{cfg}: ok (explicit path, {said})\n"


def test_a_one_call_benchmark_says_call_and_workflow(tmp_path):
    done = cli(tmp_path, "bench", "tokens", "--only", "count-services")
    assert done.returncode == 0, done.stderr
    assert re.search(r"count-services +1 call  1 strategy  right", done.stderr), done.stderr
    assert "\n1 workflow (1 strategy) in 1 task; 1/1 right" in done.stdout, done.stdout
    assert not re.search(r"\b1 (calls|workflows|tool calls|strategies|tasks|options)\b",
                         done.stdout + done.stderr)


def test_bench_list_fits_cuts_with_an_ellipsis_and_fills_no_placeholders(tmp_path):
    done = cli(tmp_path, "bench", "tokens", "--list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    questions = [line for line in lines[2:] if line.startswith("    ")]
    assert len(questions) > 20 and len(questions) * 2 == len(lines) - 2
    assert max(len(line) for line in lines) <= 100
    assert "{" not in done.stdout and "}" not in done.stdout
    assert "    Which port does the service configured in <first config> listen on?" in lines
    assert any(q.endswith("…") for q in questions)  # a long one was cut, and says so
    for q in questions:  # a question ends as written, or with the mark of the cut
        assert q.endswith(("…", ".", "?", ")")), q


def test_the_helpers():
    assert [plural(n, "call") for n in (0, 1, 2)] == ["0 calls", "1 call", "2 calls"]
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry", "entries") == "3 entries"
    assert shorten("short", 10) == "short"
    assert shorten("one two three four", 12) == "one two…"
    assert shorten("abcdefghijklmnop", 8) == "abcdefg…"


def test_toolsets_fit_100_columns(tmp_path):
    done = cli(tmp_path, "toolsets")
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 100, done.stdout
    assert "coding" in done.stdout and "execute_code" in done.stdout
