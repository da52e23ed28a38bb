"""The reference suite of ``execengine bench speed``: the reference system (hermes-agent,
pinned in benchmarks/reference-requirements.txt) run by its driver, beside ours, both on one
interpreter and site (ours runs in a process of the reference's interpreter), refused when
the two engines' ``python -c pass`` differ by more than 10 %.

CI installs the reference into a venv of its own (.ci/run) and sets
EXECENGINE_BENCH_REFERENCE to its interpreter and EXECENGINE_REQUIRE_REFERENCE=1, which
turns a missing reference into a failure; elsewhere the tests that run it are skipped
unless EXECENGINE_BENCH_REFERENCE is set.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from execengine.bench import reference
from execengine.bench.speed import ROUND_TRIPS, run_all, versus, versus_reference
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


def test_the_suite_needs_an_interpreter(monkeypatch, tmp_path):
    monkeypatch.delenv("EXECENGINE_BENCH_REFERENCE", raising=False)
    with pytest.raises(BenchError, match="--reference PYTHON"):
        run_all(quick=True, suites=["reference"], emit=lambda line: None)
    # without --reference, the variable CI sets names it
    monkeypatch.setenv("EXECENGINE_BENCH_REFERENCE", str(tmp_path / "python"))
    with pytest.raises(BenchError, match="not an executable interpreter"):
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
    # ours ran in a process of the reference's interpreter (the tests' is another one)
    assert not reference.same_interpreter(python)
    assert lines[0].startswith("the reference suite runs on the reference's interpreter")
    assert lines[1].startswith(f"reference: hermes-agent 0.19.0 on python {sys.version.split()[0]}"
                               f" at {python}")
    assert "not the same" not in lines[1]
    assert lines[2].startswith("floors (1/3): python -c pass, our child's interpreter ")
    names = [f.name for f in figures]
    assert names[0] == "python -c pass, our child's interpreter"
    assert abs(figures[0].ratio - 1) <= reference.FLOOR_TOLERANCE
    assert 'print("hi") at none' in names and 'CPU per print("hi") at none' in names
    assert "no-op tool round trip" in names
    assert names[-1].startswith("executions/s, 4 callers (")
    for fig in figures[1:]:
        assert fig.baseline_name in ("the reference", "python -c pass CPU")
        assert fig.value.median > 0 and fig.baseline.median > 0
    trips = figures[names.index("no-op tool round trip")]
    # three rounds of 200 calls a side, each call timed inside its script
    assert trips.value.n == trips.baseline.n == 3 * 200
    assert "web_search()" in ROUND_TRIPS and 'web_search("q")' in reference.ROUND_TRIPS


# -- the harness's logic, without the reference ------------------------------------------------


def _floors(ours: list[float], theirs: list[float], log: list[str]):
    """Sample functions returning the given seconds in turn, logging which side ran."""
    def side(name: str, values: list[float]):
        it = iter(values)

        def run() -> float:
            log.append(name)
            return next(it)
        return run
    return side("ours", ours), side("theirs", theirs)


def test_floors_more_than_10_percent_apart_are_refused_and_both_printed():
    lines: list[str] = []
    log: list[str] = []
    ours, theirs = _floors([0.0115] * 12, [0.010] * 12, log)
    with pytest.raises(BenchError, match=r"refused: .* start 15% apart .* more than 10%"):
        reference.agreed_floors(ours, theirs, rounds=4, emit=lines.append)
    assert len(lines) == 3  # measured three times, each printed with both figures
    assert lines[0] == ("floors (1/3): python -c pass, our child's interpreter 11.50 ms "
                        "(min 11.50, p90 11.50), the reference's 10.00 ms (min 10.00, p90 "
                        "10.00): +15.0%")
    # the other way round too
    ours, theirs = _floors([0.010] * 12, [0.0115] * 12, [])
    with pytest.raises(BenchError, match="refused"):
        reference.agreed_floors(ours, theirs, rounds=4, emit=lines.append)


def test_floors_within_10_percent_are_compared_and_measured_interleaved():
    lines: list[str] = []
    log: list[str] = []
    ours, theirs = _floors([0.0109, 0.0109, 0.0109, 0.0109], [0.010] * 4, log)
    mine, ref = reference.agreed_floors(ours, theirs, rounds=4, emit=lines.append)
    assert (mine.median, ref.median) == pytest.approx((10.9, 10.0))
    assert len(lines) == 1 and lines[0].endswith("+9.0%")
    # interleaved, the order alternating round by round
    assert log == ["theirs", "ours", "ours", "theirs", "theirs", "ours", "ours", "theirs"]


def test_floors_apart_once_are_measured_again():
    lines: list[str] = []
    ours, theirs = _floors([0.013] * 3 + [0.010] * 3, [0.010] * 6, [])
    mine, ref = reference.agreed_floors(ours, theirs, rounds=3, emit=lines.append)
    assert len(lines) == 2 and lines[0].endswith("+30.0%") and lines[1].endswith("+0.0%")
    assert mine.median == ref.median == pytest.approx(10.0)


def test_same_interpreter_means_the_same_program_in_the_same_folder(tmp_path):
    assert reference.same_interpreter(sys.executable)
    # the same program named from another folder: another virtualenv's, maybe (its
    # pyvenv.cfg is found next to the name)
    other = tmp_path / "python"
    other.symlink_to(os.path.realpath(sys.executable))
    assert not reference.same_interpreter(str(other))
    # another program in our folder
    assert not reference.same_interpreter(str(Path(sys.executable).parent / "no-such-python"))


def test_the_suite_runs_on_the_references_interpreter_and_passes_its_errors_back(tmp_path):
    # an interpreter that is not ours (named elsewhere) and has no reference: the suite
    # starts a process of it, whose driver cannot import the reference, and says so
    other = tmp_path / "python"
    other.symlink_to(os.path.realpath(sys.executable))
    lines: list[str] = []
    with pytest.raises(BenchError, match="cannot import the reference"):
        versus_reference(Config(), str(other), reps=2, emit=lines.append)
    assert lines == [f"the reference suite runs on the reference's interpreter, {other} (ours "
                     "on it too: one interpreter and site for both)"]
    with pytest.raises(BenchError, match="not an executable interpreter"):
        versus_reference(Config(), str(tmp_path / "missing"), reps=2, emit=lines.append)


def test_a_relative_interpreter_is_the_callers(tmp_path, monkeypatch):
    # the README's command names .ci/reference/bin/python: the suite's processes start in
    # folders of their own, where that name would be no file ("No such file or directory")
    folder = tmp_path / "venv" / "bin"
    folder.mkdir(parents=True)
    (folder / "python").symlink_to(os.path.realpath(sys.executable))
    monkeypatch.chdir(tmp_path)
    assert reference.interpreter_path("venv/bin/python") == str(folder / "python")
    assert reference.interpreter_path("python3") == shutil.which("python3")
    lines: list[str] = []
    with pytest.raises(BenchError, match="cannot import the reference"):
        versus_reference(Config(), "venv/bin/python", reps=2, emit=lines.append)
    assert str(folder / "python") in lines[0]
    with pytest.raises(BenchError, match="cannot import the reference"):
        reference.Reference("venv/bin/python")


class _SlowStartingReference:
    """The driver's seam: a reference whose scripts' interpreter starts 30 times slower
    than ours (another site, say), recording what it was asked."""

    version, python, prefix, child = "0.19.0", sys.version.split()[0], sys.prefix, sys.executable

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def run(self, code: str | None, *, count: int = 1, workers: int = 1) -> reference.Run:
        self.asked.append(code)
        return reference.Run(wall=1.0, cpu=0.5, outputs=["" if code is None else "hi\n"])


def test_the_suite_refuses_a_reference_whose_interpreter_starts_otherwise():
    ref = _SlowStartingReference()
    lines: list[str] = []
    with pytest.raises(BenchError, match="refused"):
        versus(Config(), ref, reps=2, emit=lines.append)  # type: ignore[arg-type]
    assert [line[:13] for line in lines[1:]] == ["floors (1/3):", "floors (2/3):",
                                                 "floors (3/3):"]
    # nothing was compared after the floors: only the warm-up ran print("hi")
    assert ref.asked.count('print("hi")') == 3 and ref.asked.count(None) == 3 * 10
