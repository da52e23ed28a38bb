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
