"""The token benchmark's chart: dollars per task both ways, the saving per task, and the
summary statistics with their intervals (over tasks: that is what the bootstrap measures)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from execengine.bench.report import pct
from execengine.bench.tokens import INSTALL_HINT
from execengine.errors import BenchError

FAMILY_COLORS = {"data": "#4C72B0", "research": "#DD8452", "refactor": "#55A868",
                 "build": "#C44E52", "small": "#8C8C8C"}
BASE_COLOR, PROG_COLOR = "#9A9A9A", "#2A7AB0"


def chart(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Three panels, one row per task: dollars per task (the best plan, the best script, and
    the matched-calls plan as a marker); the cost saved per task; and the medians per family
    and overall with the total, each with its 95 % bootstrap interval over tasks."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError as exc:
        raise BenchError(f"matplotlib is not installed; {INSTALL_HINT}") from exc
    tasks = list(summary.get("tasks") or ())
    if not tasks:
        raise BenchError("no workflow results to chart")
    ys = list(range(len(tasks)))
    height = 0.32 * len(tasks) + 3.2
    fig, (cost, saved, stat) = plt.subplots(
        1, 3, figsize=(17, height), gridspec_kw={"width_ratios": [3, 2, 2]})
    h = 0.4
    base = [t["cost"]["baseline"] for t in tasks]
    prog = [t["cost"]["programmatic"] for t in tasks]
    cost.barh([y - h / 2 for y in ys], base, h, color=BASE_COLOR,
              label="tool calls, cheapest plan")
    cost.barh([y + h / 2 for y in ys], prog, h, color=PROG_COLOR,
              label="one execute_code call, cheapest script")
    cost.plot([t["cost"].get("matched_baseline", b) for t, b in zip(tasks, base, strict=True)],
              [y - h / 2 for y in ys], "k|", markersize=8,
              label="tool calls, naive plan (matched calls)")
    for y, b, p in zip(ys, base, prog, strict=True):
        cost.text(max(b, p), y, f" ${b:.4f} / ${p:.4f}", va="center", fontsize=6.5)
    cost.set_yticks(ys, [t["task"] + (f" ({len(t['workflows'])})" if len(t["workflows"]) > 1
                                      else "") for t in tasks], fontsize=8)
    cost.invert_yaxis()
    cost.set_xlim(0, max(*base, *prog) * 1.45)
    cost.set_xlabel("dollars per task (mean of a cluster's workflows)")
    cost.legend(loc="lower right", fontsize=7, frameon=False)

    vals = [t["cost"]["saving"] * 100 for t in tasks]
    saved.barh(ys, vals, color=[FAMILY_COLORS.get(t["family"], "#777777") for t in tasks])
    saved.axvline(0, color="#555555", lw=0.6)
    saved.set_yticks(ys, [""] * len(ys))
    saved.invert_yaxis()
    saved.set_xlim(min(-10.0, min(vals) - 5), 100)
    saved.set_xlabel("cost saved per task (%)")

    _summary_panel(stat, summary)
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in FAMILY_COLORS.values()]
    fig.legend(handles, list(FAMILY_COLORS), loc="lower center", ncol=len(FAMILY_COLORS),
               fontsize=8, frameon=False)
    p, s = summary["prices"], summary["settings"]
    approx = "" if p.get("tokenizer_matches") else " (approximate tokenizer)"
    fig.suptitle(
        f"ORACLE UPPER BOUND (hand-written plans and scripts, no model): execute_code against "
        f"tool calls, {len(tasks)} tasks\n{s['prefix']} prefix, {s['encoding']}; {p['sheet']} "
        f"prices retrieved {p['retrieved']}{approx}, {p['cache']} cache, "
        f"{p['reasoning_tokens_per_call']} reasoning tokens per call; workflows per cluster "
        "in brackets", fontsize=10)
    fig.tight_layout(rect=(0, 0.6 / height, 1, 1))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return out


def _summary_panel(ax: Any, summary: Mapping[str, Any]) -> None:
    """Medians per family and overall, and the total, with their intervals over tasks."""
    rows: list[tuple[str, float, list[float] | None, str]] = []
    for fam, f in summary["by_family"].items():
        c = f["cost"]
        rows.append((f"{fam} median ({c['tasks']})", c["median_saving"],
                     c.get("median_saving_ci95"), FAMILY_COLORS.get(fam, "#777777")))
    h = summary["headline"]["cost"]
    rows.append((f"all tasks, median ({h['tasks']})", h["median_saving"],
                 h.get("median_saving_ci95"), "black"))
    rows.append(("all tasks, total", h["total_saving"], h.get("total_saving_ci95"), "black"))
    ab = summary["ablations"]["matched"]["cost"]
    rows.append(("matched calls, median (ablation)", ab["median_saving"],
                 ab.get("median_saving_ci95"), "#999999"))
    ys = list(range(len(rows)))
    for y, (_, v, ci, color) in zip(ys, rows, strict=True):
        err = None if not ci else [[(v - ci[0]) * 100], [(ci[1] - v) * 100]]
        ax.errorbar([v * 100], [y], xerr=err, fmt="o", color=color, capsize=3)
        ax.text(v * 100, y - 0.25, pct(v), ha="center", fontsize=7)
    ax.set_yticks(ys, [r[0] for r in rows], fontsize=8)
    ax.yaxis.tick_right()
    ax.invert_yaxis()
    ax.axvline(0, color="#555555", lw=0.6)
    ax.set_xlim(-20, 100)
    ax.set_xlabel("cost saved (%), 95% bootstrap interval over tasks\n(the task mix; the oracle "
                  "has no run-to-run variance)")
