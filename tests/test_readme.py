"""The README stays true and short: its commands, its example, its diagram and its figures
match the code and the docs, and the configuration reference in docs/ matches the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from execengine.cli import build_parser
from execengine.cli.config_cmd import reference_table
from execengine.config import load_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def section(text: str, name: str) -> str:
    start = f"<!-- {name}:start -->\n"
    return text[text.index(start) + len(start): text.index(f"<!-- {name}:end -->")]


def readme_part(heading: str) -> str:
    """The text of the README's ``## heading`` section."""
    text = README.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start: end if end != -1 else len(text)]


def test_the_readme_is_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= 300


def test_config_reference_matches_the_code():
    text = (DOCS / "configuration.md").read_text()
    assert section(text, "config-reference").strip() == reference_table()
    assert "(docs/configuration.md)" in readme_part("Configuration")


def test_the_two_setup_commands_are_there_and_ci_runs_the_test_command():
    text = README.read_text()
    test_cmd = "pip install -e '.[test]' && python -m pytest"
    assert test_cmd in text
    assert "execengine run --cwd examples/inventory examples/todo_report.py" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd in ci


def test_every_cli_command_is_documented():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = readme_part("Command line")
    for name in commands:
        assert f"execengine {name}" in text, name


def test_the_python_example_runs_as_shown(tmp_path):
    """The README's example, at most 10 lines, run from the repository root."""
    code = re.search(r"```python\n(.*?)```", readme_part("From Python"), re.S)
    assert code is not None
    assert len(code.group(1).strip().splitlines()) <= 10
    env = {k: v for k, v in os.environ.items() if k != "EXECENGINE_CONFIG"}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code.group(1)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("success 1 ")  # status, one tool call, the notes counted
    assert '"status": "success", "output": "' in done.stdout


def test_the_diagram_is_the_docs_one():
    """One text source, drawn by GitHub (README) and by the site (docs/index.md)."""
    def mermaid(text: str) -> str:
        found = re.search(r"```mermaid\n(.*?)```", text, re.S)
        assert found is not None
        return found.group(1)

    assert mermaid(README.read_text()) == mermaid((DOCS / "index.md").read_text())


def test_reliability_is_summarised_not_repeated():
    """Its figures live in docs/reliability.md only (two copies drifted apart before)."""
    part = readme_part("Reliability")
    assert "(docs/reliability.md)" in part
    assert not re.search(r"\d", part), part


def test_the_speed_figures_are_those_of_docs_benchmarks():
    part = readme_part("Benchmarks")
    table = part[: part.index("Token savings")]
    rows = "\n".join(line for line in table.splitlines() if line.startswith("| "))
    figures = re.findall(r"\d+\.\d+", rows)
    assert len(figures) >= 7, figures
    measured = section((DOCS / "benchmarks.md").read_text(), "speed-figures")
    for figure in figures:
        assert re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", measured), figure
    assert re.search(r"measured (\d{4}-\d\d-\d\d)", table)


def test_the_config_example_is_valid(tmp_path):
    example = re.search(r"```yaml\n(.*?)```", readme_part("Configuration"), re.S)
    assert example is not None
    path = tmp_path / "config.yaml"
    path.write_text(example.group(1))
    config = load_config(path)
    assert config.code_execution.timeout == 120
