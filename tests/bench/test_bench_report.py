from __future__ import annotations

import json
from pathlib import Path

import pytest

from execengine.bench import report
from execengine.bench.cost import Prices, PriceSheet, bill, load_prices
from execengine.errors import BenchError

SHEET = PriceSheet("test", "openai", input=2.0, cached_input=0.5, output=8.0, cache_min=1024,
                   cache_step=128)
PRICES = Prices("2025-01-01", "test", {"test": SHEET})


def _way(requests: list[tuple[int, int]], context: int) -> dict[str, object]:
    b = bill(requests, SHEET, prefix_tokens=requests[0][0] if requests else 0)
    return {"context_tokens": context, "input_tokens": sum(p for p, _ in requests),
            "output_tokens": sum(o for _, o in requests), "round_trips": len(requests),
            "tool_definition_tokens": 100, "prefix_tokens": requests[0][0],
            "cost": b.as_dict(), "requests": [list(r) for r in requests]}


def _row(name: str, family: str, base: int, prog: int, *, agree: bool = True,
         calls: int = 4) -> dict[str, object]:
    batched = [(base // 3, 30), (base // 2, 30), (base, 20)]
    serial = [(base // (calls + 1) * (i + 1), 20) for i in range(calls + 1)]
    programmatic = [(prog // 2, 200), (prog, 20)]
    ways = {w: {p: _way(reqs, reqs[-1][0] + reqs[-1][1]) for p in ("minimal", "realistic")}
            for w, reqs in (("serial", serial), ("batched", batched),
                            ("programmatic", programmatic))}
    return {"workflow": name, "family": family, "agree": agree, "checked": True,
            "correct": {}, "same_calls": True, "detail": "" if agree else "x is not the expected",
            "tool_calls": calls, "script_tool_calls": calls, "seconds": {}, "ways": ways}


def test_cache_billing_follows_the_price_sheet() -> None:
    # first request: the 2000-token prefix is warm -> 1024 + 7*128 = 1920 cached
    b = bill([(2100, 50)], SHEET, prefix_tokens=2000)
    assert (b.cached, b.uncached, b.output) == (1920, 180, 50)
    assert b.dollars == pytest.approx((1920 * 0.5 + 180 * 2.0 + 50 * 8.0) / 1e6)
    cold = bill([(2100, 50), (3000, 10)], SHEET, prefix_tokens=2000, cache="cold")
    assert cold.cached == 2048 and cold.uncached == 2100 + 3000 - 2048  # 2nd reads the 1st
    off = bill([(2100, 50), (3000, 10)], SHEET, cache="off")
    assert off.cached == 0 and off.uncached == 5100
    assert bill([(900, 5)], SHEET, prefix_tokens=900).cached == 0  # under the minimum
    writes = PriceSheet("w", "anthropic", input=3.0, cached_input=0.3, output=15.0,
                        cache_write=3.75, cache_min=1024, cache_step=1)
    w = bill([(2000, 10), (2500, 10)], writes, cache="cold")
    assert (w.written, w.cached, w.uncached) == (2000 + 500, 2000, 0)
    assert w.dollars == pytest.approx((2500 * 3.75 + 2000 * 0.3 + 20 * 15.0) / 1e6)
    with pytest.raises(BenchError, match="unknown cache mode"):
        bill([], SHEET, cache="hot")


def test_shipped_prices_are_dated_with_sources(tmp_path: Path) -> None:
    prices = load_prices()
    assert prices.as_of and prices.default in prices.sheets
    for sheet in prices.sheets.values():
        assert sheet.cached_input < sheet.input < sheet.output and sheet.source.startswith(
            "https://")
    bad = tmp_path / "p.yaml"
    bad.write_text("as_of: x\nsheets:\n  m: {input: 1, cached_input: 1, output: 1, colour: 2}\n")
    with pytest.raises(BenchError, match="unknown key.*colour"):
        load_prices(bad)
    with pytest.raises(BenchError, match="no price sheet 'nope'"):
        prices.sheet("nope")


def test_aggregate_totals_savings_and_intervals() -> None:
    rows = [_row("a", "data", 3000, 1500), _row("b", "data", 30000, 3000),
            _row("c", "small", 2000, 6000, agree=False)]
    s = report.aggregate(rows, prices=PRICES)
    a = s["aggregate"]
    assert a["workflows"] == 3 and a["agreeing"] == 2 and a["checked"] == 3
    ctx = a["realistic"]["batched"]["context_tokens"]
    assert ctx["baseline"] == 3020 + 30020 + 2020
    assert ctx["programmatic"] == 1520 + 3020 + 6020
    assert ctx["saved"] == ctx["baseline"] - ctx["programmatic"]
    assert ctx["savings"] == round(1 - ctx["programmatic"] / ctx["baseline"], 4)
    lo, hi = ctx["ci95"]
    assert lo <= ctx["savings"] <= hi and lo < hi
    assert a["round_trips"] == {"serial": 15, "batched": 9, "programmatic": 6}
    assert a["realistic"]["serial"]["round_trips"]["savings"] == round(1 - 6 / 15, 4)
    assert s["programmatic_loses"] == ["c"]
    assert set(s["cost_by_price_sheet"]["test"]) == {"warm", "cold", "off"}
    assert json.loads(report.to_json(s)) == s


def test_table_and_readme_block(tmp_path: Path) -> None:
    rows = [_row("alpha", "data", 4000, 1000), _row("beta", "research", 8000, 1000, agree=False)]
    s = report.aggregate(rows, prices=PRICES, encoding="cl100k_base")
    s["prices"] = {"sheet": "test", "as_of": "2025-01-01", "cache": "warm"}
    text = report.table(s)
    assert "alpha" in text and "cl100k_base" in text and "1/2 right" in text
    assert "WRONG beta: x is not the expected" in text
    assert "95% CI" in text and "against the serial worst case" in text
    assert "37.0%" not in text and "98.7%" not in text
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.README_START}\nstale\n{report.README_END}\noutro\n")
    report.update_readme(readme, s)
    out = readme.read_text()
    assert out.startswith("intro\n") and out.endswith("outro\n") and "stale" not in out
    assert "| billed cost |" in out and "2025-01-01" in out
    with pytest.raises(BenchError, match="no <!-- token-figures:start -->"):
        report.update_readme(_empty(tmp_path), s)


def _empty(tmp_path: Path) -> Path:
    p = tmp_path / "empty.md"
    p.write_text("no markers\n")
    return p


def test_empty_report() -> None:
    s = report.aggregate([])
    assert s["aggregate"]["workflows"] == 0
    assert "no workflows" in report.table(s)
    pytest.importorskip("matplotlib")
    with pytest.raises(BenchError, match="no workflow results"):
        report.chart(s, "unused.png")


def test_chart_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [_row(f"w{i}", fam, 1000 * (i + 1), 300 + i)
            for i, fam in enumerate(["data", "research", "refactor", "build", "small"])]
    s = report.aggregate(rows, prices=PRICES)
    s["prices"] = {"sheet": "test", "cache": "warm"}
    out = report.chart(s, tmp_path / "sub" / "chart.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000


def test_readme_figures_match_the_committed_json() -> None:
    """README.md's block and docs/token_savings.json come from the same run
    (``execengine bench tokens --out ... --chart ... --readme README.md``)."""
    root = Path(__file__).resolve().parents[2]
    summary = json.loads((root / "docs" / "token_savings.json").read_text(encoding="utf-8"))
    assert report.readme_block(summary) in (root / "README.md").read_text(encoding="utf-8")
    assert summary["aggregate"]["agreeing"] == summary["aggregate"]["workflows"]
    assert (root / "docs" / "token_savings.png").stat().st_size > 10_000
