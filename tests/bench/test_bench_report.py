"""The report's arithmetic on made-up rows: billing, the best-strategy choice, clusters,
medians before totals, the blocks, the chart; and the committed figures against their rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from execengine.bench import compare, report
from execengine.bench.chart import chart
from execengine.bench.compare import Billing
from execengine.bench.cost import Prices, PriceSheet, bill, load_prices
from execengine.errors import BenchError

SHEET = PriceSheet("test", "openai", input=2.0, cached_input=0.5, output=8.0, cache_min=1024,
                   cache_step=128, tokenizer="o200k_base", retrieved="2025-01-01",
                   source="https://example.com/prices")
PRICES = Prices("2025-01-01", "test", {"test": SHEET})
BILLING = Billing(SHEET)
ROOT = Path(__file__).resolve().parents[2]


def _fig(requests: list[tuple[int, int]]) -> dict[str, Any]:
    return {"context_tokens": requests[-1][0] + requests[-1][1],
            "input_tokens": sum(p for p, _ in requests),
            "output_tokens": sum(o for _, o in requests), "round_trips": len(requests),
            "tool_definition_tokens": 100, "prefix_tokens": requests[0][0] // 2,
            "requests": [list(r) for r in requests]}


def _strategy(base: int, prog: int, calls: int = 4) -> dict[str, Any]:
    batched = [(base // 3, 30), (base // 2, 30), (base, 20)]
    serial = [(base // (calls + 1) * (i + 1), 20) for i in range(calls + 1)]
    programmatic = [(prog // 2, 200), (prog, 20)]
    return {"agree": True, "correct": {}, "same_calls": True, "detail": "",
            "tool_calls": calls, "script_tool_calls": calls,
            "ways": {w: {p: _fig(reqs) for p in ("minimal", "realistic")}
                     for w, reqs in (("serial", serial), ("batched", batched),
                                     ("programmatic", programmatic))}}


def _row(name: str, family: str, base: int, prog: int, *, shell: tuple[int, int] | None = None,
         cluster: str = "", agree: bool = True) -> dict[str, Any]:
    strategies = {"naive": _strategy(base, prog)}
    if shell:
        strategies["shell"] = _strategy(*shell)
    return {"workflow": name, "family": family, "cluster": cluster or name, "agree": agree,
            "checked": True, "detail": "" if agree else "x is not the expected",
            "strategies": strategies}


def test_billing_follows_the_price_sheet() -> None:
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


def test_reasoning_is_output_per_call_and_never_context() -> None:
    plain = bill([(2100, 50), (2300, 10)], SHEET, prefix_tokens=2000)
    thinking = bill([(2100, 50), (2300, 10)], SHEET, prefix_tokens=2000, reasoning=500)
    assert thinking.output == plain.output + 2 * 500
    assert (thinking.cached, thinking.uncached) == (plain.cached, plain.uncached)
    assert thinking.dollars - plain.dollars == pytest.approx(1000 * 8.0 / 1e6)
    with pytest.raises(BenchError, match=">= 0"):
        bill([], SHEET, reasoning=-1)


def test_tool_system_prompt_is_added_to_every_request_and_cached() -> None:
    claude = PriceSheet("c", "anthropic", input=3.0, cached_input=0.3, output=15.0,
                        cache_min=1024, cache_step=1, tool_system_tokens=346)
    b = bill([(2000, 10), (2500, 10)], claude, prefix_tokens=1500, cache="warm")
    # the warm prefix (1500 + 346) is read, then the whole previous request (2346)
    assert b.cached == 1846 + 2346 and b.uncached == (2346 - 1846) + (2846 - 2346)
    assert bill([(2000, 10)], claude, cache="off").uncached == 2346


def test_shipped_prices_are_dated_sourced_and_name_their_tokenizer(tmp_path: Path) -> None:
    prices = load_prices()
    default = prices.sheet()
    assert default.reasoning_tokens == 0 and default.tokenizer == "o200k_base"
    for sheet in prices.sheets.values():
        assert sheet.cached_input < sheet.input < sheet.output
        assert sheet.source.startswith("https://") and sheet.retrieved and sheet.tokenizer
        if sheet.provider == "anthropic":
            assert sheet.tool_system_tokens > 0 and sheet.tool_system_source
            assert sheet.tokenizer not in ("o200k_base", "cl100k_base")
        if sheet.reasoning_tokens:
            assert sheet.reasoning_source
    assert prices.sheet("gpt-5").reasoning_tokens > 0
    bad = tmp_path / "p.yaml"
    bad.write_text("as_of: x\nsheets:\n  m: {input: 1, cached_input: 1, output: 1, colour: 2}\n")
    with pytest.raises(BenchError, match="unknown key.*colour"):
        load_prices(bad)
    with pytest.raises(BenchError, match="no price sheet 'nope'"):
        prices.sheet("nope")
    undated = tmp_path / "q.yaml"
    undated.write_text("as_of: 2030-01-01\nsheets:\n  m: {input: 2, cached_input: 1, output: 3}\n")
    assert load_prices(undated).sheet().retrieved == "2030-01-01"


def test_the_baseline_is_the_cheapest_strategy() -> None:
    r = _row("a", "data", 30000, 3000, shell=(2000, 3500))
    (bs, base), (ps, _) = compare.pair(r, "best", "realistic", BILLING)
    assert (bs, ps) == ("shell", "naive")
    assert base is r["strategies"]["shell"]["ways"]["batched"]["realistic"]
    (ms, _), (mp, _) = compare.pair(r, "matched", "realistic", BILLING)
    assert (ms, mp) == ("naive", "naive")
    (_, serial), _ = compare.pair(r, "serial", "realistic", BILLING)
    assert serial["round_trips"] == 5
    # a strategy that went wrong is never the cheapest: the next right one is
    wrong = json.loads(json.dumps(r))
    wrong["strategies"]["shell"]["agree"] = False
    (bs2, _), (ps2, _) = compare.pair(wrong, "best", "realistic", BILLING)
    assert (bs2, ps2) == ("naive", "naive")
    # the shell plan cuts the saving: against it, the script saves little or nothing
    best = compare.tasks([r], "best", "realistic", BILLING)[0]
    matched = compare.tasks([r], "matched", "realistic", BILLING)[0]
    assert best.saving("cost") < 0.3 < matched.saving("cost")


def test_clusters_count_once_and_medians_come_before_totals() -> None:
    rows = [_row("p-4", "data", 3000, 1500, cluster="p"),
            _row("p-20", "data", 30000, 3000, cluster="p"),
            _row("q", "research", 8000, 2000),
            _row("r", "small", 2000, 6000)]
    ts = compare.tasks(rows, "best", "realistic", BILLING, ("context_tokens",))
    assert [t.name for t in ts] == ["p", "q", "r"] and ts[0].workflows == ("p-4", "p-20")
    assert ts[0].values["context_tokens"] == ((3020 + 30020) / 2, (1520 + 3020) / 2)
    s = compare.stats(ts, "context_tokens")
    savings = sorted(t.saving("context_tokens") for t in ts)
    assert s["tasks"] == 3 and s["median_saving"] == round(savings[1], 4)
    lo, hi = s["median_saving_ci95"]
    assert lo <= s["median_saving"] <= hi
    assert s["total_baseline"] == round(sum(t.values["context_tokens"][0] for t in ts), 1)
    summary = report.aggregate(rows, BILLING, prices=PRICES)
    assert summary["headline"]["cost"]["tasks"] == 3
    assert summary["ablations"]["every_workflow_counted"]["cost"]["tasks"] == 4
    assert summary["programmatic_loses"] == ["r"]
    assert set(summary["by_family"]) == {"data", "research", "small"}
    sweep = summary["reasoning_sweep"]
    assert [s["reasoning_tokens_per_call"] for s in sweep] == list(compare.SWEEP)
    # every plan here makes 3 model calls, every script 2: reasoning adds n * calls * price
    base = summary["headline"]["cost"]["total_baseline"]
    prog = summary["headline"]["cost"]["total_programmatic"]
    for s in sweep:
        n = s["reasoning_tokens_per_call"] * 8.0 / 1e6 * 3  # 3 tasks
        assert s["total_saving"] == pytest.approx(compare.saving(base + 3 * n, prog + 2 * n),
                                                  abs=2e-4)
    assert set(summary["cost_by_price_sheet"]["test"]) >= {"warm", "cold", "off"}
    assert json.loads(report.to_json(summary)) == summary


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    billing = Billing(SHEET)
    out = {"about": report.ABOUT,
           "settings": {"encoding": "o200k_base", "prefix": "realistic", "seed": 7},
           "prices": report.sheet_info(PRICES, billing, "o200k_base"),
           "checks": {"workflows": len(rows), "tasks": len({r["cluster"] for r in rows}),
                      "strategies": 5, "agreeing": sum(r["agree"] for r in rows),
                      "checked": len(rows)}}
    agg = report.aggregate(rows, billing, prices=PRICES)
    return {**out, **agg}


def test_table_and_blocks(tmp_path: Path) -> None:
    rows = [_row("alpha", "data", 4000, 1000, shell=(3000, 1200)),
            _row("beta", "research", 8000, 1000, agree=False)]
    s = _summary(rows)
    text = report.table(s)
    assert "ORACLE UPPER BOUND" in text and "1/2 right" in text
    assert text.index("Per task (medians") < text.index("By family") < text.index("Totals")
    assert "WRONG beta: x is not the expected" in text and "retrieved 2025-01-01" in text
    assert "APPROXIMATE" not in text
    figures = report.figures_block(s)
    headline = report.headline_block(s)
    assert len(headline.splitlines()) - 2 <= 8 and "oracle upper bound" in headline
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{report.FIGURES_START}\nstale\n{report.FIGURES_END}\noutro\n")
    report.update_block(doc, figures)
    out = doc.read_text()
    assert out.startswith("intro\n") and out.endswith("outro\n") and "stale" not in out
    assert "| billed cost per task |" in out and "https://example.com/prices" in out
    with pytest.raises(BenchError, match="no <!-- token-headline:start -->"):
        report.update_block(doc, headline)


def test_an_approximate_tokenizer_is_labelled() -> None:
    claude = PriceSheet("claude-x", "anthropic", input=3.0, cached_input=0.3, output=15.0,
                        tokenizer="claude", tool_system_tokens=346, retrieved="2025-01-01")
    info = report.sheet_info(Prices("x", "claude-x", {"claude-x": claude}), Billing(claude),
                             "o200k_base")
    assert info["tokenizer_matches"] is False and info["tool_system_tokens"] == 346
    s = {**_summary([_row("a", "data", 4000, 1000)]), "prices": info}
    assert "APPROXIMATE: counted with o200k_base" in report.table(s)
    assert "+346 tool-use system prompt tokens" in report.table(s)


def test_empty_report() -> None:
    s = report.aggregate([], BILLING)
    assert s["headline"] == {"tasks": 0}
    pytest.importorskip("matplotlib")
    with pytest.raises(BenchError, match="no workflow results"):
        chart({**s, "prices": {}, "settings": {}}, "unused.png")


def test_chart_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [_row(f"w{i}", fam, 1000 * (i + 1), 300 + i, shell=(900, 400))
            for i, fam in enumerate(["data", "research", "refactor", "build", "small"])]
    out = chart(_summary(rows), tmp_path / "sub" / "chart.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000


# -- the committed figures -------------------------------------------------------------------

def _committed() -> dict[str, Any]:
    return json.loads((ROOT / "docs" / "token_savings.json").read_text(encoding="utf-8"))


def test_committed_figures_come_from_the_committed_rows() -> None:
    """Every statistic of docs/token_savings.json recomputes from its own rows, with the
    accounting of this tree (a change to billing or statistics must regenerate it)."""
    committed = _committed()
    prices = load_prices()
    p = committed["prices"]
    billing = Billing(prices.sheet(p["sheet"]), p["cache"],
                      committed["settings"]["reasoning_tokens"])
    again = report.aggregate(committed["workflows"], billing,
                             prefix=committed["settings"]["prefix"], prices=prices)
    for key in ("headline", "by_family", "totals", "ablations", "reasoning_sweep",
                "cost_by_price_sheet", "tasks", "programmatic_loses"):
        assert again[key] == committed[key], key
    assert committed["checks"]["agreeing"] == committed["checks"]["workflows"]
    assert committed["about"].startswith("Oracle upper bound")


def test_docs_figures_match_the_committed_json() -> None:
    """docs/benchmarks.md's figures block, and the README's headline block if it has one,
    come from docs/token_savings.json (``bench tokens --out ... --figures ... --readme``)."""
    committed = _committed()
    assert report.figures_block(committed) in (ROOT / "docs" / "benchmarks.md").read_text(
        encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if report.HEADLINE_START in readme:
        assert report.headline_block(committed) in readme
    assert (ROOT / "docs" / "token_savings.png").stat().st_size > 10_000
