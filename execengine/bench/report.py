"""Per-workflow and aggregate figures: a table, JSON and a chart.

Savings are ``1 - programmatic / sequential`` of the context tokens at the end of the task
(tool definitions + transcript). Billed input tokens add up the prompt of every model call,
which is what a provider charges for. Medians are over workflows; totals over all of them.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine.bench.tokens import INSTALL_HINT
from execengine.cli._common import table as render
from execengine.errors import BenchError

if TYPE_CHECKING:
    from execengine.bench.runner import WorkflowResult

#: published figures to compare against: (label, fraction saved)
REFERENCES: tuple[tuple[str, float], ...] = (
    ("published: programmatic tool calling, complex research tasks", 0.37),
    ("published: code execution over tool definitions and results (150,000 → 2,000)", 0.987),
)


def _saving(seq: int, prog: int) -> float:
    return 0.0 if seq <= 0 else 1 - prog / seq


def row(result: WorkflowResult) -> dict[str, Any]:
    s, p = result.sequential, result.programmatic
    return {
        "workflow": result.name, "family": result.family, "agree": result.agree,
        "detail": result.detail,
        "tool_calls": s.tool_calls,
        "sequential": {"context_tokens": s.context_tokens, "billed_tokens": s.billed_tokens,
                       "tool_definition_tokens": s.tool_tokens, "round_trips": s.round_trips,
                       "seconds": round(s.seconds, 3)},
        "programmatic": {"context_tokens": p.context_tokens, "billed_tokens": p.billed_tokens,
                         "tool_definition_tokens": p.tool_tokens, "round_trips": p.round_trips,
                         "script_tool_calls": p.inner_tool_calls,
                         "seconds": round(p.seconds, 3)},
        "savings": round(_saving(s.context_tokens, p.context_tokens), 4),
        "billed_savings": round(_saving(s.billed_tokens, p.billed_tokens), 4),
        "transcript_savings": round(_saving(s.context_tokens - s.tool_tokens,
                                            p.context_tokens - p.tool_tokens), 4),
    }


def summarize(results: Sequence[WorkflowResult], *, encoding: str = "o200k_base",
              meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything the report shows, as plain JSON-able data."""
    return aggregate([row(r) for r in results], encoding=encoding, meta=meta)


def aggregate(rows: Sequence[Mapping[str, Any]], *, encoding: str = "o200k_base",
              meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    rows = list(rows)

    def total(way: str, key: str) -> int:
        return sum(int(r[way][key]) for r in rows)

    def agg(subset: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if not subset:
            return {"workflows": 0}
        seq = sum(int(r["sequential"]["context_tokens"]) for r in subset)
        prog = sum(int(r["programmatic"]["context_tokens"]) for r in subset)
        return {"workflows": len(subset),
                "median_savings": round(statistics.median(r["savings"] for r in subset), 4),
                "total_savings": round(_saving(seq, prog), 4)}

    families = sorted({r["family"] for r in rows})
    summary: dict[str, Any] = {
        "encoding": encoding,
        "workflows": rows,
        "aggregate": {
            **agg(rows),
            "agreeing": sum(1 for r in rows if r["agree"]),
            "tool_calls": sum(int(r["tool_calls"]) for r in rows),
            "sequential_context_tokens": total("sequential", "context_tokens"),
            "programmatic_context_tokens": total("programmatic", "context_tokens"),
            "sequential_billed_tokens": total("sequential", "billed_tokens"),
            "programmatic_billed_tokens": total("programmatic", "billed_tokens"),
            "billed_savings": round(_saving(total("sequential", "billed_tokens"),
                                            total("programmatic", "billed_tokens")), 4),
            "median_billed_savings": round(statistics.median(
                r["billed_savings"] for r in rows), 4) if rows else 0.0,
            "transcript_savings": round(_saving(
                total("sequential", "context_tokens")
                - total("sequential", "tool_definition_tokens"),
                total("programmatic", "context_tokens")
                - total("programmatic", "tool_definition_tokens")), 4),
            "sequential_round_trips": total("sequential", "round_trips"),
            "programmatic_round_trips": total("programmatic", "round_trips"),
        },
        "by_family": {f: agg([r for r in rows if r["family"] == f]) for f in families},
        "references": [{"label": label, "savings": v} for label, v in REFERENCES],
    }
    if meta:
        summary["meta"] = dict(meta)
    return summary


def pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def table(summary: Mapping[str, Any]) -> str:
    """The human-readable report."""

    rows = []
    for r in summary["workflows"]:
        s, p = r["sequential"], r["programmatic"]
        rows.append([r["workflow"], r["family"], str(r["tool_calls"]),
                     f"{s['context_tokens']:,}", f"{p['context_tokens']:,}", pct(r["savings"]),
                     f"{s['billed_tokens']:,}", f"{p['billed_tokens']:,}",
                     f"{s['round_trips']}/{p['round_trips']}",
                     "yes" if r["agree"] else "NO"])
    out = [render(rows, ["workflow", "family", "calls", "seq ctx", "prog ctx", "saved",
                         "seq billed", "prog billed", "trips", "same answer"])]
    a = summary["aggregate"]
    if a.get("workflows"):
        out += ["",
                f"{a['workflows']} workflows, {a['tool_calls']} tool calls, "
                f"{a['agreeing']}/{a['workflows']} reach the same answer both ways "
                f"(tokens: {summary['encoding']}, exact).",
                f"context tokens: {a['sequential_context_tokens']:,} sequential -> "
                f"{a['programmatic_context_tokens']:,} programmatic; total savings "
                f"{pct(a['total_savings'])}, median {pct(a['median_savings'])}",
                f"transcript alone (without tool definitions): total savings "
                f"{pct(a['transcript_savings'])}",
                f"billed input tokens (every model call): {a['sequential_billed_tokens']:,} -> "
                f"{a['programmatic_billed_tokens']:,}; total savings {pct(a['billed_savings'])},"
                f" median {pct(a['median_billed_savings'])}",
                f"model round trips: {a['sequential_round_trips']} -> "
                f"{a['programmatic_round_trips']}"]
        for fam, f in summary["by_family"].items():
            out.append(f"  {fam:9} median {pct(f['median_savings'])}, total "
                       f"{pct(f['total_savings'])} over {f['workflows']} workflows")
    for ref in summary["references"]:
        out.append(f"reference: {pct(ref['savings'])}  {ref['label']}")
    disagreeing = [r for r in summary["workflows"] if not r["agree"]]
    for r in disagreeing:
        out.append(f"DISAGREE {r['workflow']}: {r['detail']}")
    return "\n".join(out)


def to_json(summary: Mapping[str, Any]) -> str:
    return json.dumps(summary, indent=2, ensure_ascii=False)


FAMILY_COLORS = {"data": "#4C72B0", "research": "#DD8452", "refactor": "#55A868",
                 "build": "#C44E52"}


def chart(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Draw tokens each way and savings per workflow, with the references, to a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError as exc:
        raise BenchError(f"matplotlib is not installed; {INSTALL_HINT}") from exc
    rows = summary["workflows"]
    if not rows:
        raise BenchError("no workflow results to chart")
    names = [r["workflow"] for r in rows]
    ys = range(len(rows))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.32 * len(rows) + 3.0),
                                      sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    seq = [r["sequential"]["context_tokens"] for r in rows]
    prog = [r["programmatic"]["context_tokens"] for r in rows]
    h = 0.4
    left.barh([y - h / 2 for y in ys], seq, h, label="sequential tool calls", color="#999999")
    left.barh([y + h / 2 for y in ys], prog, h, label="one execute_code call", color="#2A7AB0")
    left.set_xlabel(f"context tokens at the end of the task ({summary['encoding']})")
    left.set_yticks(list(ys), [f"{n} ({r['tool_calls']})" for n, r in zip(names, rows,
                                                                          strict=True)])
    left.invert_yaxis()
    fig.legend(*left.get_legend_handles_labels(), loc="lower left", ncol=1, fontsize=8,
               frameon=False)
    colors = [FAMILY_COLORS.get(r["family"], "#777777") for r in rows]
    right.barh(list(ys), [r["savings"] * 100 for r in rows], color=colors)
    agg = summary["aggregate"]
    right.axvline(agg["median_savings"] * 100, color="black", lw=1.2,
                  label=f"median here {pct(agg['median_savings'])}")
    for (ref, style) in zip(summary["references"], ("--", ":"), strict=False):
        right.axvline(ref["savings"] * 100, color="#8E44AD", ls=style, lw=1.2,
                      label=f"{ref['label'].split(':', 1)[1].strip()[:48]} {pct(ref['savings'])}")
    right.set_xlim(min(0.0, min(r["savings"] for r in rows) * 100) - 2, 100)
    right.set_xlabel("context tokens saved (%)")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in FAMILY_COLORS.values()]
    line_handles, line_labels = right.get_legend_handles_labels()
    fig.legend([*line_handles, *handles], [*line_labels, *FAMILY_COLORS], loc="lower right",
               ncol=2, fontsize=8, frameon=False)
    fig.suptitle(f"Programmatic tool calling: {pct(agg['total_savings'])} fewer context tokens "
                 f"in total, median {pct(agg['median_savings'])}, over {agg['workflows']} "
                 "workflows (tool calls in brackets)", fontsize=11)
    fig.tight_layout(rect=(0, 0.75 / (0.32 * len(rows) + 3.0), 1, 1))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
