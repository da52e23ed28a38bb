"""The reference suite of ``execengine bench speed``: the reference system (hermes-agent,
pinned in benchmarks/reference-requirements.txt) run by its driver, beside ours.

CI installs the reference into a venv of its own (.ci/run) and sets
EXECENGINE_BENCH_REFERENCE to its interpreter and EXECENGINE_REQUIRE_REFERENCE=1, which
turns a missing reference into a failure; elsewhere the tests that run it are skipped
unless EXECENGINE_BENCH_REFERENCE is set.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from execengine.bench import reference
from execengine.bench.speed import ROUND_TRIPS, run_all, versus_reference
from execengine.config import Config
from execengine.errors import BenchError


@pytest.fixture(scope="module")
def python() -> str:
    path = os.environ.get("EXECENGINE_BENCH_REFERENCE", "")
    if not path:
        message = ("no reference interpreter: set EXECENGINE_BENCH_REFERENCE to a python with "
                   "benchmarks/reference-requirements.txt installed")
        if os.environ.get("EXECENGINE_REQUIRE_REFERENCE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def test_an_interpreter_without_the_reference_is_refused_clearly():
    with pytest.raises(BenchError, match="cannot import the reference"):
        reference.Reference(sys.executable)
    with pytest.raises(BenchError, match="not an executable interpreter"):
        reference.Reference("/nonexistent/python")


def test_the_suite_needs_an_interpreter():
    with pytest.raises(BenchError, match="--reference PYTHON"):
        run_all(quick=True, suites=["reference"], emit=lambda line: None)


def test_the_driver_runs_the_references_execute_code(python):
    with reference.Reference(python) as ref:
        assert ref.version == "0.19.0"
        hi = ref.run('print("hi")')
        assert hi.outputs == ["hi\n"]
        assert hi.wall > 0 and hi.cpu > 0  # its child was reaped: its CPU is counted
        # its web_search is the no-op, and its 50-call limit is raised
        times = json.loads(ref.run(reference.ROUND_TRIPS.format(n=60)).outputs[0])
        assert len(times) == 60 and all(0 < t < 1 for t in times)
        many = ref.run("print(1)", count=6, workers=3)
        assert many.outputs == ["1\n"] * 6
        assert ref.run(None, count=2).outputs == ["", ""]  # its interpreter, -c pass
        with pytest.raises(BenchError, match="execution failed"):
            ref.run("raise SystemExit(3)")
        assert ref.run('print("still here")').outputs == ["still here\n"]


def test_a_driver_that_dies_is_an_error_not_a_hang(python):
    with reference.Reference(python) as ref:
        ref.run('print("hi")')
        ref._proc.kill()
        ref._proc.wait()  # gone before the request: writing it finds a broken pipe
        with pytest.raises(BenchError, match="ended without a reply"):
            ref.run('print("hi")')


def test_the_suite_measures_each_figure_against_the_reference(python):
    lines: list[str] = []
    figures = versus_reference(Config(), python, reps=2, emit=lines.append)
    assert lines[0].startswith("reference: hermes-agent 0.19.0 on python ")
    names = [f.name for f in figures]
    assert names[0] == "python -c pass, our interpreter"
    assert 'print("hi") at none' in names and 'CPU per print("hi") at none' in names
    assert "no-op tool round trip" in names
    assert names[-1].startswith("executions/s, 4 callers (")
    for fig in figures[1:]:
        assert fig.baseline_name == "the reference"
        assert fig.value.median > 0 and fig.baseline.median > 0
    trips = figures[names.index("no-op tool round trip")]
    # three rounds of 200 calls a side, each call timed inside its script
    assert trips.value.n == trips.baseline.n == 3 * 200
    assert "web_search()" in ROUND_TRIPS and 'web_search("q")' in reference.ROUND_TRIPS
