from __future__ import annotations

import json

import pytest

from execengine.bench import report
from execengine.errors import BenchError


def _row(name: str, family: str, seq: int, prog: int, *, agree: bool = True,
         seq_billed: int = 0, trips: int = 5) -> dict[str, object]:
    return {"workflow": name, "family": family, "agree": agree, "detail": "",
            "tool_calls": trips - 1,
            "sequential": {"context_tokens": seq, "billed_tokens": seq_billed or seq * 3,
                           "tool_definition_tokens": 100, "round_trips": trips, "seconds": 0.1},
            "programmatic": {"context_tokens": prog, "billed_tokens": prog * 2,
                             "tool_definition_tokens": 120, "round_trips": 2,
                             "script_tool_calls": trips - 1, "seconds": 0.1},
            "savings": round(1 - prog / seq, 4),
            "billed_savings": round(1 - prog * 2 / (seq_billed or seq * 3), 4)}


def test_aggregate_median_and_total() -> None:
    rows = [_row("a", "data", 1000, 500), _row("b", "data", 10000, 1000),
            _row("c", "build", 2000, 1800, agree=False)]
    s = report.aggregate(rows)
    a = s["aggregate"]
    assert a["workflows"] == 3 and a["agreeing"] == 2
    assert a["median_savings"] == 0.5  # of 0.5, 0.9, 0.1
    assert a["total_savings"] == round(1 - 3300 / 13000, 4)
    assert a["sequential_context_tokens"] == 13000
    assert a["programmatic_round_trips"] == 6 and a["sequential_round_trips"] == 15
    assert a["billed_savings"] == round(1 - 6600 / 39000, 4)
    assert a["transcript_savings"] == round(1 - (3300 - 360) / (13000 - 300), 4)
    assert s["by_family"]["data"] == {"workflows": 2, "median_savings": 0.7,
                                      "total_savings": round(1 - 1500 / 11000, 4)}
    assert s["by_family"]["build"]["workflows"] == 1
    assert [r["savings"] for r in s["references"]] == [0.37, 0.987]
    assert json.loads(report.to_json(s)) == s


def test_table_shows_figures_and_disagreements() -> None:
    rows = [_row("alpha", "data", 1000, 250), _row("beta", "research", 4000, 1000, agree=False)]
    rows[1]["detail"] = "answers differ: x vs y"
    text = report.table(report.aggregate(rows, encoding="cl100k_base"))
    assert "alpha" in text and "75.0%" in text and "cl100k_base" in text
    assert "1/2 reach the same answer" in text
    assert "DISAGREE beta: answers differ: x vs y" in text
    assert "37.0%" in text and "98.7%" in text


def test_empty_report() -> None:
    s = report.aggregate([])
    assert s["aggregate"]["workflows"] == 0
    assert "reference" in report.table(s)
    with pytest.raises(BenchError, match="no workflow results"):
        pytest.importorskip("matplotlib")
        report.chart(s, "unused.png")


def test_chart_is_a_png(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    rows = [_row(f"w{i}", fam, 1000 * (i + 1), 300 + i)
            for i, fam in enumerate(["data", "research", "refactor", "build"])]
    out = report.chart(report.aggregate(rows), tmp_path / "sub" / "chart.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
