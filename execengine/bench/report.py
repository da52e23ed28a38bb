"""Per-workflow and aggregate figures: a table, JSON, the README block and the chart.

Every figure compares the programmatic way with a baseline, the **batched** sequential agent
by default (the **serial** one, one call per message, is the labelled worst case), under one
prefix (``minimal`` or ``realistic``, see :class:`~execengine.bench.runner.Prefix`):

- **context**: tokens in the context at the end of the task (definitions + transcript);
- **input**: prompt tokens summed over every model call (before caching);
- **cost**: dollars as the chosen price sheet bills the calls (cached and uncached input,
  cache writes, output; :mod:`~execengine.bench.cost`);
- **round trips**: model calls.

A saving is ``1 - programmatic / baseline`` of the totals over workflows, shown with the
absolute amount saved and a 95 % bootstrap confidence interval (workflows resampled with
replacement); medians are of the per-workflow savings.
"""

from __future__ import annotations

import json
import random
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine._text import plural
from execengine.bench.cost import Prices, bill, load_prices
from execengine.bench.tokens import INSTALL_HINT
from execengine.cli._common import table as render
from execengine.errors import BenchError

if TYPE_CHECKING:
    from execengine.bench.runner import WorkflowResult

METRICS = ("context_tokens", "input_tokens", "cost", "round_trips")
LABELS = {"context_tokens": "context tokens at the end of the task",
          "input_tokens": "input tokens over every model call (before caching)",
          "cost": "billed cost",
          "round_trips": "model round trips"}
BOOTSTRAP = 2000
README_START = "<!-- token-figures:start -->"
README_END = "<!-- token-figures:end -->"


def _saving(base: float, prog: float) -> float:
    return 0.0 if base <= 0 else 1 - prog / base


def row(result: WorkflowResult, prices: Prices, *, sheet: str | None = None,
        cache: str = "warm") -> dict[str, Any]:
    """One workflow's figures, every way under every prefix, as JSON-able data."""
    ps = prices.sheet(sheet)
    ways: dict[str, Any] = {}
    for name, way in result.ways.items():
        ways[name] = {}
        for prefix, f in way.figures.items():
            b = bill(f.requests, ps, prefix_tokens=f.prefix_tokens, cache=cache)
            ways[name][prefix] = {
                "context_tokens": f.context_tokens, "input_tokens": f.input_tokens,
                "output_tokens": f.output_tokens, "round_trips": f.round_trips,
                "tool_definition_tokens": f.tool_tokens, "prefix_tokens": f.prefix_tokens,
                "cost": b.as_dict(), "requests": [list(r) for r in f.requests]}
    return {
        "workflow": result.name, "family": result.family, "agree": result.agree,
        "checked": bool(result.correct), "correct": dict(result.correct),
        "same_calls": result.same_calls, "detail": result.detail,
        "tool_calls": result.sequential.tool_calls,
        "script_tool_calls": result.programmatic.inner_tool_calls,
        "seconds": {n: round(w.seconds, 3) for n, w in result.ways.items()},
        "ways": ways,
    }


def value(r: Mapping[str, Any], way: str, prefix: str, metric: str) -> float:
    fig = r["ways"][way][prefix]
    return float(fig["cost"]["dollars"] if metric == "cost" else fig[metric])


def interval(rows: Sequence[Any], stat: Callable[[Sequence[Any]], float], *,
             resamples: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of ``stat`` over ``rows`` resampled with replacement."""
    if len(rows) < 2:
        v = stat(rows) if rows else 0.0
        return v, v
    rng = random.Random(seed)
    n = len(rows)
    got = sorted(stat([rows[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    return got[int(0.025 * resamples)], got[min(resamples - 1, int(0.975 * resamples))]


def compare(rows: Sequence[Mapping[str, Any]], metric: str, prefix: str,
            baseline: str) -> dict[str, Any]:
    """Programmatic against ``baseline`` on ``metric``: totals, saved, median, interval."""
    def total_saving(sub: Sequence[Mapping[str, Any]]) -> float:
        return _saving(sum(value(r, baseline, prefix, metric) for r in sub),
                       sum(value(r, "programmatic", prefix, metric) for r in sub))

    base = sum(value(r, baseline, prefix, metric) for r in rows)
    prog = sum(value(r, "programmatic", prefix, metric) for r in rows)
    per = [_saving(value(r, baseline, prefix, metric), value(r, "programmatic", prefix, metric))
           for r in rows]
    low, high = interval(rows, total_saving)
    digits = 6 if metric == "cost" else 0
    return {"baseline": round(base, digits), "programmatic": round(prog, digits),
            "saved": round(base - prog, digits), "savings": round(_saving(base, prog), 4),
            "ci95": [round(low, 4), round(high, 4)],
            "median_savings": round(statistics.median(per), 4) if per else 0.0}


def aggregate(rows: Sequence[Mapping[str, Any]], *, prefix: str = "realistic",
              baseline: str = "batched", prefixes: Sequence[str] = ("minimal", "realistic"),
              meta: Mapping[str, Any] | None = None, prices: Prices | None = None,
              encoding: str = "o200k_base") -> dict[str, Any]:
    rows = list(rows)
    prefixes = [p for p in prefixes if not rows or p in rows[0]["ways"]["programmatic"]]
    families = sorted({r["family"] for r in rows})
    out: dict[str, Any] = {"encoding": encoding, "prefix": prefix, "baseline": baseline,
                           "workflows": rows}
    if not rows:
        out["aggregate"] = {"workflows": 0}
        return out
    agg: dict[str, Any] = {
        "workflows": len(rows),
        "agreeing": sum(1 for r in rows if r["agree"]),
        "checked": sum(1 for r in rows if r["checked"]),
        "tool_calls": sum(int(r["tool_calls"]) for r in rows),
        "round_trips": {w: int(sum(value(r, w, prefix, "round_trips") for r in rows))
                        for w in ("serial", "batched", "programmatic")},
    }
    for p in prefixes:
        agg[p] = {base: {m: compare(rows, m, p, base) for m in METRICS}
                  for base in ("batched", "serial")}
    out["aggregate"] = agg
    out["by_family"] = {f: {m: compare([r for r in rows if r["family"] == f], m, prefix,
                                       baseline) for m in ("context_tokens", "cost")}
                        for f in families}
    out["programmatic_loses"] = sorted(
        r["workflow"] for r in rows
        if value(r, "programmatic", prefix, "cost") > value(r, baseline, prefix, "cost"))
    if prices is not None:
        out["cost_by_price_sheet"] = _by_sheet(rows, prices, prefix, baseline)
    if meta:
        out["meta"] = dict(meta)
    return out


def _by_sheet(rows: Sequence[Mapping[str, Any]], prices: Prices, prefix: str,
              baseline: str) -> dict[str, Any]:
    """The total cost saving under every price sheet and cache mode (from the requests)."""
    out: dict[str, Any] = {}
    for name, ps in prices.sheets.items():
        out[name] = {}
        for cache in ("warm", "cold", "off"):
            totals = []
            for way in (baseline, "programmatic"):
                totals.append(sum(
                    bill([tuple(q) for q in r["ways"][way][prefix]["requests"]], ps,
                         prefix_tokens=r["ways"][way][prefix]["prefix_tokens"],
                         cache=cache).dollars for r in rows))
            out[name][cache] = {"baseline": round(totals[0], 6),
                                "programmatic": round(totals[1], 6),
                                "savings": round(_saving(totals[0], totals[1]), 4)}
    return out


def summarize(results: Sequence[WorkflowResult], *, prices: Prices | None = None,
              sheet: str | None = None, cache: str = "warm", prefix: str = "realistic",
              baseline: str = "batched", encoding: str = "o200k_base",
              meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything the report shows, as plain JSON-able data."""
    prices = prices or load_prices()
    ps = prices.sheet(sheet)
    rows = [row(r, prices, sheet=sheet, cache=cache) for r in results]
    prefixes = list(results[0].programmatic.figures) if results else [prefix]
    if prefix not in prefixes:
        raise BenchError(f"prefix {prefix!r} was not measured (measured: {', '.join(prefixes)})")
    out = aggregate(rows, prefix=prefix, baseline=baseline, prefixes=prefixes, prices=prices,
                    encoding=encoding, meta=meta)
    out["prices"] = {"sheet": ps.name, "as_of": prices.as_of, "cache": cache,
                     "source": ps.source}
    return out


def pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def _amount(metric: str, x: float) -> str:
    return f"${x:,.4f}" if metric == "cost" else f"{x:,.0f}"


def _line(c: Mapping[str, Any], metric: str) -> str:
    lo, hi = c["ci95"]
    return (f"{_amount(metric, c['baseline'])} -> {_amount(metric, c['programmatic'])}: saved "
            f"{_amount(metric, c['saved'])} ({pct(c['savings'])}, 95% CI {pct(lo)} to "
            f"{pct(hi)}; median {pct(c['median_savings'])})")


def table(summary: Mapping[str, Any]) -> str:
    """The human-readable report."""

    prefix, base = summary["prefix"], summary["baseline"]
    rows = []
    for r in summary["workflows"]:
        b, p = r["ways"][base][prefix], r["ways"]["programmatic"][prefix]
        s = r["ways"]["serial"][prefix]
        rows.append([r["workflow"], r["family"], str(r["tool_calls"]),
                     f"{b['context_tokens']:,}", f"{p['context_tokens']:,}",
                     f"{b['context_tokens'] - p['context_tokens']:,}",
                     pct(_saving(b["context_tokens"], p["context_tokens"])),
                     f"{b['cost']['dollars']:.4f}", f"{p['cost']['dollars']:.4f}",
                     pct(_saving(b["cost"]["dollars"], p["cost"]["dollars"])),
                     f"{s['round_trips']}/{b['round_trips']}/{p['round_trips']}",
                     ("yes" if r["agree"] else "NO") + ("" if r["checked"] else " (unchecked)")])
    out = [render(rows, ["workflow", "family", "calls", f"{base} ctx", "prog ctx", "saved",
                         "%", f"{base} $", "prog $", "$ saved", "trips s/b/p", "right"])]
    a = summary["aggregate"]
    if not a.get("workflows"):
        return "\n".join([*out, "", "no workflows"])
    pr = summary.get("prices", {})
    out += ["",
            f"{plural(a['workflows'], 'workflow')}, {plural(a['tool_calls'], 'tool call')}; "
            f"{a['agreeing']}/"
            f"{a['workflows']} right both ways with the same tool calls ({a['checked']} "
            f"checked against the expected answer). Tokens: {summary['encoding']}.",
            f"Prefix: {prefix}. Baseline: {base} sequential tool calls. Cost: "
            f"{pr.get('sheet', '?')} prices of {pr.get('as_of', '?')}, {pr.get('cache', '?')} "
            "cache."]
    for metric in METRICS:
        out.append(f"  {LABELS[metric]}: {_line(a[prefix][base][metric], metric)}")
    out.append(f"against the serial worst case (one call per message; round trips "
               f"{a['round_trips']['serial']} -> {a['round_trips']['programmatic']}):")
    for metric in ("context_tokens", "cost"):
        out.append(f"  {LABELS[metric]}: {_line(a[prefix]['serial'][metric], metric)}")
    for other in a:
        if other in ("minimal", "realistic") and other != prefix:
            c = a[other][base]
            out.append(f"with the {other} prefix: context {pct(c['context_tokens']['savings'])},"
                       f" cost {pct(c['cost']['savings'])} saved against {base}")
    for fam, f in summary["by_family"].items():
        out.append(f"  {fam:9} context {pct(f['context_tokens']['savings'])}, cost "
                   f"{pct(f['cost']['savings'])} saved")
    if summary.get("cost_by_price_sheet"):
        out.append(f"cost saved by price sheet (warm / cold / no cache): {_sheets(summary)}")
    if summary.get("programmatic_loses"):
        out.append("execute_code costs more than the baseline on: "
                   + ", ".join(summary["programmatic_loses"]))
    for r in summary["workflows"]:
        if not r["agree"]:
            out.append(f"WRONG {r['workflow']}: {r['detail']}")
    return "\n".join(out)


def to_json(summary: Mapping[str, Any]) -> str:
    return json.dumps(summary, indent=2, ensure_ascii=False)


def readme_block(summary: Mapping[str, Any]) -> str:
    """The README's figures, between its markers (regenerated by ``--readme``)."""
    a, prefix, base = summary["aggregate"], summary["prefix"], summary["baseline"]
    pr = summary.get("prices", {})

    def cell(c: Mapping[str, Any], metric: str) -> str:
        lo, hi = c["ci95"]
        return (f"{_amount(metric, c['baseline'])} | {_amount(metric, c['programmatic'])} | "
                f"{_amount(metric, c['saved'])} | **{pct(c['savings'])}** "
                f"({pct(lo)} to {pct(hi)}) | {pct(c['median_savings'])}")

    lines = [README_START,
             f"Current figures ({summary['encoding']}; {plural(a['workflows'], 'workflow')}, "
             f"{plural(a['tool_calls'], 'tool call')}; {a['agreeing']}/{a['workflows']} right "
             "both ways "
             f"against the expected answer, with the same tool calls; {prefix} prefix; cost at "
             f"{pr.get('sheet', '?')} prices of {pr.get('as_of', '?')}, {pr.get('cache', '?')} "
             "prompt cache):", "",
             f"| measure | {base} tool calls | one execute_code call | saved | saved % (95% CI)"
             " | median |", "|---|---|---|---|---|---|"]
    for metric in METRICS:
        lines.append(f"| {LABELS[metric]} | {cell(a[prefix][base][metric], metric)} |")
    for metric in ("context_tokens", "cost"):
        lines.append(f"| {LABELS[metric]}, against serial calls (worst case) | "
                     f"{cell(a[prefix]['serial'][metric], metric)} |")
    lines.append("")
    others = [p for p in ("minimal", "realistic") if p in a and p != prefix]
    for other in others:
        c = a[other][base]
        lines.append(f"With the {other} prefix: context {pct(c['context_tokens']['savings'])}"
                     f" and cost {pct(c['cost']['savings'])} saved against {base} calls.")
    fams = ", ".join(f"{f} {pct(v['context_tokens']['savings'])} / {pct(v['cost']['savings'])}"
                     for f, v in summary["by_family"].items())
    lines.append(f"By family (context / cost saved): {fams}.")
    if summary.get("cost_by_price_sheet"):
        lines.append(f"Cost saved against {base} calls by price sheet (warm / cold / no prompt "
                     f"cache): {_sheets(summary)}.")
    if summary.get("programmatic_loses"):
        lines.append("execute_code costs more than batched calls on: "
                     + ", ".join(f"`{n}`" for n in summary["programmatic_loses"]) + ".")
    lines.append(README_END)
    return "\n".join(lines)


def _sheets(summary: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} " + " / ".join(pct(v[c]["savings"]) for c in ("warm", "cold", "off"))
                     for name, v in summary["cost_by_price_sheet"].items())


def update_readme(path: str | Path, summary: Mapping[str, Any]) -> Path:
    """Replace the figures between the README's markers."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise BenchError(f"{p}: no {README_START} ... {README_END} block to update")
    p.write_text(pattern.sub(lambda _: readme_block(summary), text, count=1), encoding="utf-8")
    return p


FAMILY_COLORS = {"data": "#4C72B0", "research": "#DD8452", "refactor": "#55A868",
                 "build": "#C44E52", "small": "#8C8C8C"}


def chart(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Per workflow: context both ways, and context, cost and round trips saved against the
    baseline (the serial worst case as a marker), to a PNG."""
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
    prefix, base = summary["prefix"], summary["baseline"]
    ys = list(range(len(rows)))
    height = 0.3 * len(rows) + 3.0
    fig, axes = plt.subplots(1, 4, figsize=(17, height), sharey=True,
                             gridspec_kw={"width_ratios": [3, 2, 2, 2]})
    ctx, saved, cost, trips = axes
    h = 0.4
    ctx.barh([y - h / 2 for y in ys], [value(r, base, prefix, "context_tokens") for r in rows],
             h, label=f"{base} tool calls", color="#999999")
    ctx.barh([y + h / 2 for y in ys],
             [value(r, "programmatic", prefix, "context_tokens") for r in rows], h,
             label="one execute_code call", color="#2A7AB0")
    ctx.set_xlabel(f"context tokens at the end ({summary['encoding']})")
    ctx.set_yticks(ys, [f"{r['workflow']} ({r['tool_calls']})" for r in rows])
    ctx.invert_yaxis()
    ctx.legend(loc="lower right", fontsize=8, frameon=False)
    colors = [FAMILY_COLORS.get(r["family"], "#777777") for r in rows]
    a = summary["aggregate"][prefix]
    for ax, metric, title in ((saved, "context_tokens", "context saved (%)"),
                              (cost, "cost", "billed cost saved (%)"),
                              (trips, "round_trips", "round trips saved (%)")):
        vals = [_saving(value(r, base, prefix, metric), value(r, "programmatic", prefix, metric))
                * 100 for r in rows]
        ax.barh(ys, vals, color=colors)
        worst = [_saving(value(r, "serial", prefix, metric),
                         value(r, "programmatic", prefix, metric)) * 100 for r in rows]
        ax.plot(worst, ys, "k|", markersize=7, label="against serial calls")
        c = a[base][metric]
        ax.axvline(c["savings"] * 100, color="black", lw=1.2,
                   label=f"total {pct(c['savings'])} ({pct(c['ci95'][0])} to {pct(c['ci95'][1])})")
        ax.axvspan(c["ci95"][0] * 100, c["ci95"][1] * 100, color="black", alpha=0.08)
        ax.axvline(0, color="#555555", lw=0.6)
        ax.set_xlim(min(-5.0, min(vals) - 5), 100)
        ax.set_xlabel(title)
        ax.legend(loc="lower left", fontsize=7, frameon=False)
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in FAMILY_COLORS.values()]
    fig.legend(handles, list(FAMILY_COLORS), loc="lower center", ncol=len(FAMILY_COLORS),
               fontsize=8, frameon=False)
    pr = summary.get("prices", {})
    fig.suptitle(f"execute_code against {base} tool calls ({prefix} prefix; cost at "
                 f"{pr.get('sheet', '?')} prices, {pr.get('cache', '?')} cache; 95% bootstrap "
                 f"CI over {len(rows)} workflows; tool calls in brackets)", fontsize=11)
    fig.tight_layout(rect=(0, 0.6 / height, 1, 1))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
