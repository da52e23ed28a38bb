"""The README stays true: its configuration table and commands match the code."""

from pathlib import Path

from execengine.cli import build_parser
from execengine.cli.config_cmd import reference_table

README = Path(__file__).resolve().parent.parent / "README.md"


def section(text: str, name: str) -> str:
    start = f"<!-- {name}:start -->\n"
    return text[text.index(start) + len(start): text.index(f"<!-- {name}:end -->")]


def test_config_reference_matches_the_code():
    assert section(README.read_text(), "config-reference").strip() == reference_table()


def test_the_two_setup_commands_are_there_and_ci_runs_the_test_command():
    text = README.read_text()
    test_cmd = "pip install -e '.[test]' && python -m pytest"
    assert test_cmd in text
    assert "execengine run --cwd examples/inventory examples/todo_report.py" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert test_cmd in ci


def test_every_cli_command_is_documented():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = README.read_text()
    for name in commands:
        assert f"execengine {name}" in text, name
