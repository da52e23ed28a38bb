"""The speed benchmarks' arithmetic: spreads, ratios, interleaving."""

from __future__ import annotations

import pytest

from execengine.bench.stats import Figure, Spread, interleaved


def test_spread_uses_nearest_rank_percentiles():
    s = Spread.of([float(x) for x in range(100, 0, -1)])
    assert (s.n, s.min, s.median, s.p90, s.p99) == (100, 1.0, 50.5, 90.0, 99.0)
    assert Spread.of([3.0]).p99 == 3.0
    assert s.scaled(1000).median == 50500.0
    with pytest.raises(ValueError):
        Spread.of([])


def test_ratio_is_of_medians():
    fig = Figure("x", Spread.of([2.0, 4.0, 100.0]), Spread.of([1.0, 2.0, 3.0]), "ms", "base")
    assert fig.ratio == 2.0
    assert "ratio 2.00x" in fig.line()
    assert fig.to_dict()["value"]["p99"] == 100.0


def test_interleaving_alternates_which_side_runs_first():
    calls: list[str] = []

    def side(name: str):
        def run() -> float:
            calls.append(name)
            return float(len(calls))
        return run

    a, b = interleaved(4, side("a"), side("b"))
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert (len(a), len(b)) == (4, 4)


def test_p99_is_printed_when_asked():
    value, base = Spread.of([float(x) for x in range(1, 101)]), Spread.of([1.0, 2.0])
    assert "p99" not in Figure("x", value, base, "us", "base").line()
    line = Figure("x", value, base, "us", "base", show_p99=True).line()
    assert "(min 1.00, p90 90.00, p99 99.00)  vs base 1.50 (min 1.00, p90 2.00, p99 2.00)" in line


def test_the_machine_line_tells_stolen_time_from_idle_and_busy():
    from collections import namedtuple

    from execengine.bench.speed import machine_during

    times = namedtuple("times", "user nice system idle iowait irq softirq steal guest")
    before = times(100.0, 0.0, 50.0, 1000.0, 5.0, 0.0, 1.0, 20.0, 7.0)
    # 10 s of 2 CPUs: 6 busy (4 user, 1 system, 1 softirq), 10 idle (9 + 1 I/O wait),
    # 4 stolen; guest time (already in user) does not count twice
    after = times(104.0, 0.0, 51.0, 1009.0, 6.0, 0.0, 2.0, 24.0, 9.0)
    assert machine_during(before, after) == pytest.approx(
        {"busy": 0.3, "idle": 0.5, "stolen": 0.2})


def test_the_machine_line_without_a_steal_field():
    from collections import namedtuple

    from execengine.bench.speed import machine_during

    times = namedtuple("times", "user system idle")  # psutil's on macOS, say
    got = machine_during(times(1.0, 1.0, 1.0), times(2.0, 1.0, 4.0))
    assert got == pytest.approx({"busy": 0.25, "idle": 0.75, "stolen": 0.0})
