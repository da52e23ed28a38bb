"""The token benchmark's summary: JSON, the table, the figures block of the docs.

The figures are an **oracle upper bound**: both sides are hand-written (plans and scripts that
succeed on the first try, with no exploration, no errors and no reasoning of their own), no
model is involved. ``bench tokens --model`` runs the same tasks with a real model.

What is compared (:mod:`~execengine.bench.compare`): per task, the cheapest sequential
strategy against the cheapest script (``best``); the naive plan against the script making
the same calls (``matched``) and one call per message (``serial``) are ablations. Figures:

- **cost**: dollars as the price sheet bills every request (cached and uncached input, cache
  writes, output, reasoning tokens per call, the provider's tool-use system prompt);
- **context**: tokens in the context at the end of the task (definitions + transcript);
- **input**: prompt tokens summed over every model call (before caching);
- **round trips**: model calls.

Medians over tasks (near-duplicate workflows counted once) come first, per family next,
totals last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine._text import plural
from execengine._text import table as render
from execengine.bench import compare
from execengine.bench.compare import COMPARISONS, METRICS, SWEEP, Billing, stats, tasks
from execengine.bench.cost import CACHE_MODES, Prices, load_prices
from execengine.errors import BenchError

if TYPE_CHECKING:
    from execengine.bench.runner import SuiteRun

LABELS = {"context_tokens": "context tokens at the end of the task",
          "input_tokens": "input tokens over every model call (before caching)",
          "cost": "billed cost per task",
          "round_trips": "model round trips"}
ABOUT = ("Oracle upper bound: hand-written plans and scripts that succeed first time, no model "
         "involved; run the same tasks with a real model with `bench tokens --model URL/NAME`.")
FIGURES_START = "<!-- token-figures:start -->"
FIGURES_END = "<!-- token-figures:end -->"
HEADLINE_START = "<!-- token-headline:start -->"
HEADLINE_END = "<!-- token-headline:end -->"


def sheet_info(prices: Prices, billing: Billing, encoding: str) -> dict[str, Any]:
    ps = billing.sheet
    return {"sheet": ps.name, "provider": ps.provider, "input": ps.input,
            "cached_input": ps.cached_input, "cache_write": ps.cache_write,
            "output": ps.output, "source": ps.source, "retrieved": ps.retrieved,
            "tokenizer": ps.tokenizer, "tokenizer_matches": ps.tokenizer == encoding,
            "tool_system_tokens": ps.tool_system_tokens,
            "tool_system_source": ps.tool_system_source,
            "reasoning_tokens_per_call": billing.reasoning_tokens,
            "reasoning_source": ("--reasoning-tokens" if billing.reasoning is not None
                                 else ps.reasoning_source or "not a reasoning model"),
            "cache": billing.cache, "file": prices.path}


def aggregate(rows: Sequence[Mapping[str, Any]], billing: Billing, *,
              prefix: str = "realistic", prices: Prices | None = None) -> dict[str, Any]:
    """The statistics of ``rows`` (see :func:`summarize`)."""
    rows = list(rows)
    out: dict[str, Any] = {"tasks": [], "workflows": rows}
    if not rows:
        out["headline"] = {"tasks": 0}
        return out
    best = tasks(rows, "best", prefix, billing)
    prefixes = list(rows[0]["strategies"]["naive"]["ways"]["programmatic"])
    out["headline"] = {m: stats(best, m) for m in METRICS}
    out["by_family"] = compare.by_family(best)
    out["totals"] = {m: {k: v for k, v in stats(best, m).items() if k.startswith("total")}
                     for m in METRICS}
    ablations: dict[str, Any] = {}
    for comparison in COMPARISONS[1:]:
        ablations[comparison] = {m: stats(tasks(rows, comparison, prefix, billing), m)
                                 for m in ("cost", "context_tokens", "round_trips")}
    for other in prefixes:
        if other != prefix:
            ablations[f"{other}_prefix"] = {
                m: stats(tasks(rows, "best", other, billing), m, intervals=False)
                for m in ("cost", "context_tokens")}
    per_workflow = [compare.Task(r["workflow"], r["family"], (r["workflow"],), t.values,
                                 t.chosen)
                    for r in rows for t in tasks([{**r, "cluster": r["workflow"]}], "best",
                                                 prefix, billing)]
    ablations["every_workflow_counted"] = {m: stats(per_workflow, m, intervals=False)
                                           for m in ("cost", "context_tokens")}
    out["ablations"] = ablations
    out["reasoning_sweep"] = [
        {"reasoning_tokens_per_call": n,
         **{k: v for k, v in stats(tasks(rows, "best", prefix, Billing(
             billing.sheet, billing.cache, n), ("cost",)), "cost",
             intervals=False).items() if k in ("median_saving", "total_saving")}}
        for n in SWEEP]
    if prices is not None:
        out["cost_by_price_sheet"] = _by_sheet(rows, prices, prefix, billing)
    matched = {t.name: t for t in tasks(rows, "matched", prefix, billing)}
    out["tasks"] = [{"task": t.name, "family": t.family, "workflows": list(t.workflows),
                     "chosen": [list(c) for c in t.chosen],
                     **{m: {"baseline": round(t.values[m][0], 6 if m == "cost" else 1),
                            "programmatic": round(t.values[m][1], 6 if m == "cost" else 1),
                            "saving": round(t.saving(m), 4),
                            "matched_baseline": round(matched[t.name].values[m][0],
                                                      6 if m == "cost" else 1)}
                        for m in METRICS}}
                    for t in best]
    out["programmatic_loses"] = [t.name for t in best if t.saving("cost") < 0]
    return out


def _by_sheet(rows: Sequence[Mapping[str, Any]], prices: Prices, prefix: str,
              billing: Billing) -> dict[str, Any]:
    """The cost saving under every price sheet and cache mode (each sheet with its default
    reasoning tokens unless the run gave a number)."""
    out: dict[str, Any] = {}
    for name, ps in prices.sheets.items():
        entry: dict[str, Any] = {"tokenizer": ps.tokenizer,
                                 "reasoning_tokens_per_call": (
                                     ps.reasoning_tokens if billing.reasoning is None
                                     else billing.reasoning),
                                 "tool_system_tokens": ps.tool_system_tokens,
                                 "retrieved": ps.retrieved}
        for cache in CACHE_MODES:
            b = Billing(ps, cache, billing.reasoning)
            s = stats(tasks(rows, "best", prefix, b, ("cost",)), "cost", intervals=False)
            entry[cache] = {"median_saving": s["median_saving"],
                            "total_saving": s["total_saving"]}
        out[name] = entry
    return out


def summarize(run: SuiteRun, *, prices: Prices | None = None, sheet: str | None = None,
              cache: str = "warm", reasoning: int | None = None, prefix: str = "realistic",
              encoding: str = "o200k_base", system_tokens: int = 4000) -> dict[str, Any]:
    """Everything the report shows, as plain JSON-able data (no timings: two runs with one
    seed and config give the same JSON)."""
    prices = prices or load_prices()
    billing = Billing(prices.sheet(sheet), cache, reasoning)
    rows = [compare.row(r) for r in run.results]
    measured = (list(run.results[0].programmatic.figures) if run.results else [prefix])
    if prefix not in measured:
        raise BenchError(f"prefix {prefix!r} was not measured (measured: {', '.join(measured)})")
    agg = aggregate(rows, billing, prefix=prefix, prices=prices)
    out: dict[str, Any] = {
        "about": ABOUT,
        "settings": {"encoding": encoding, "prefix": prefix, "system_tokens": system_tokens,
                     "comparison": "best", "baseline_way": "batched", "seed": run.seed,
                     # --reasoning-tokens (None: each sheet's own default)
                     "reasoning_tokens": reasoning},
        "prices": sheet_info(prices, billing, encoding),
        "execute_code": {"description": run.description, "tokens": run.description_tokens,
                         "counted_at_level": run.isolation.get("counted_description_level")},
        "run": {"isolation_configured": run.isolation.get("configured"),
                "isolation_level": run.isolation.get("level")},
        "checks": {"workflows": len(rows), "tasks": len(agg["tasks"]),
                   "strategies": sum(len(r["strategies"]) for r in rows),
                   "agreeing": sum(1 for r in rows if r["agree"]),
                   "checked": sum(1 for r in rows if r["checked"]),
                   "tool_calls_naive": sum(r["strategies"]["naive"]["tool_calls"]
                                           for r in rows)},
    }
    out.update({k: v for k, v in agg.items() if k != "workflows"})
    out["workflows"] = rows
    return out


# -- text ----------------------------------------------------------------------------------

def pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def _amount(name: str, x: float) -> str:
    if name == "cost":
        return f"-${-x:,.4f}" if x < 0 else f"${x:,.4f}"
    return f"{x:,.0f}"


def _ci(c: Mapping[str, Any], key: str) -> str:
    lo, hi = c.get(key, (None, None))
    return "" if lo is None else f" (95% CI over tasks {pct(lo)} to {pct(hi)})"


def _median_line(c: Mapping[str, Any], name: str) -> str:
    return (f"median {pct(c['median_saving'])}{_ci(c, 'median_saving_ci95')}; per task "
            f"{_amount(name, c['median_baseline'])} -> {_amount(name, c['median_programmatic'])}"
            f" (median saved {_amount(name, c['median_saved'])})")


def _total_line(c: Mapping[str, Any], name: str) -> str:
    return (f"{_amount(name, c['total_baseline'])} -> {_amount(name, c['total_programmatic'])}:"
            f" saved {_amount(name, c['total_saved'])} ({pct(c['total_saving'])}"
            f"{_ci(c, 'total_saving_ci95')})")


def _sheet_note(p: Mapping[str, Any], encoding: str) -> str:
    note = (f"{p['sheet']} prices retrieved {p['retrieved']} ({p['source']}), {p['cache']} "
            f"cache, {p['reasoning_tokens_per_call']} reasoning tokens per model call")
    if p.get("tool_system_tokens"):
        note += f", +{p['tool_system_tokens']} tool-use system prompt tokens per request"
    if not p.get("tokenizer_matches"):
        note += (f"; APPROXIMATE: counted with {encoding}, the provider's tokenizer "
                 f"({p['tokenizer'] or '?'}) is not available offline")
    return note


def table(summary: Mapping[str, Any]) -> str:
    """The human-readable report: per workflow, then medians and families, then totals."""
    settings, p = summary["settings"], summary["prices"]
    prefix = settings["prefix"]
    billing_rows = []
    by_task = {n: t for t in summary.get("tasks", []) for n in t["workflows"]}
    for r in summary["workflows"]:
        t = by_task.get(r["workflow"])
        i = t["workflows"].index(r["workflow"]) if t else 0
        chosen = t["chosen"][i] if t else ["?", "?"]
        s = r["strategies"]
        billing_rows.append([
            r["workflow"], r["family"], r["cluster"] if r["cluster"] != r["workflow"] else "",
            str(s["naive"]["tool_calls"]), chosen[0], chosen[1],
            "/".join(str(s[c]["ways"][w][prefix]["round_trips"])
                     for c, w in ((chosen[0], "batched"), (chosen[1], "programmatic"))),
            ("yes" if r["agree"] else "NO") + ("" if r["checked"] else " (unchecked)")])
    out = [render(billing_rows, ["workflow", "family", "task", "calls", "baseline", "script",
                                 "trips", "right"])]
    h = summary.get("headline", {})
    if not h.get("cost"):
        return "\n".join([*out, "", "no workflows"])
    c = summary["checks"]
    out += ["", summary["about"].replace("Oracle upper bound", "ORACLE UPPER BOUND", 1),
            f"{plural(c['workflows'], 'workflow')} "
            f"({plural(c['strategies'], 'strategy', 'strategies')}) in "
            f"{plural(c['tasks'], 'task')}; "
            f"{c['agreeing']}/{c['workflows']} right every way with the same calls both ways "
            f"({c['checked']} checked against the expected answer). Tokens: "
            f"{settings['encoding']}; {prefix} prefix; seed {settings['seed']}.",
            f"Cost: {_sheet_note(p, settings['encoding'])}.",
            "Each task: the cheapest plan of batched tool calls against the cheapest script "
            "(one execute_code call); near-duplicate workflows are one task.",
            "Per task (medians over tasks):"]
    for name in METRICS:
        out.append(f"  {LABELS[name]}: {_median_line(h[name], name)}")
    out.append("By family (median / total cost saved; median context saved):")
    for fam, f in summary["by_family"].items():
        out.append(f"  {fam:9} {plural(f['cost']['tasks'], 'task'):>8}: cost "
                   f"{pct(f['cost']['median_saving'])}"
                   f" / {pct(f['cost']['total_saving'])}; context "
                   f"{pct(f['context_tokens']['median_saving'])}")
    out.append("Totals over tasks:")
    for name in METRICS:
        out.append(f"  {LABELS[name]}: {_total_line(h[name], name)}")
    ab = summary["ablations"]
    out.append("Ablations (cost saved, median / total):")
    for key, label in (("matched", "naive plan against the script making the same calls"),
                       ("serial", "the same, one call per message (worst case)"),
                       ("every_workflow_counted", "best strategies, every workflow counted "
                                                  "(near-duplicates too)")):
        a = ab[key]["cost"]
        out.append(f"  {label}: {pct(a['median_saving'])} / {pct(a['total_saving'])}")
    for key, a in ab.items():
        if key.endswith("_prefix"):
            out.append(f"  {key.replace('_', ' ')}: {pct(a['cost']['median_saving'])} / "
                       f"{pct(a['cost']['total_saving'])}")
    out.append(f"Reasoning tokens per model call, both sides ({p['sheet']}; median / total "
               "cost saved): " + ", ".join(
                   f"{s['reasoning_tokens_per_call']}: {pct(s['median_saving'])} / "
                   f"{pct(s['total_saving'])}" for s in summary["reasoning_sweep"]))
    if summary.get("cost_by_price_sheet"):
        out.append("By price sheet (median cost saved, warm / cold / no cache):")
        for name, v in summary["cost_by_price_sheet"].items():
            label = "" if v["tokenizer"] == settings["encoding"] else (
                f" [approximate: {v['tokenizer']} tokenizer not available offline]")
            out.append(f"  {name} ({v['reasoning_tokens_per_call']} reasoning/call, retrieved "
                       f"{v['retrieved']}): " + " / ".join(
                           pct(v[m]["median_saving"]) for m in CACHE_MODES) + label)
    if summary.get("programmatic_loses"):
        out.append("execute_code costs more than the best plan on: "
                   + ", ".join(summary["programmatic_loses"]))
    for r in summary["workflows"]:
        if not r["agree"]:
            out.append(f"WRONG {r['workflow']}: {r['detail']}")
    return "\n".join(out)


def to_json(summary: Mapping[str, Any]) -> str:
    return json.dumps(summary, indent=2, ensure_ascii=False)


def figures_block(summary: Mapping[str, Any]) -> str:
    """docs/benchmarks.md's figures (between its markers; ``--figures FILE`` rewrites them)."""
    h, p, s = summary["headline"], summary["prices"], summary["settings"]
    c = summary["checks"]
    lines = [FIGURES_START,
             f"Oracle upper bound, {plural(c['tasks'], 'task')} "
             f"({plural(c['workflows'], 'workflow')}, "
             f"{c['agreeing']}/{c['workflows']} right every way); {s['encoding']}, {s['prefix']}"
             f" prefix, seed {s['seed']}; cost at {_sheet_note(p, s['encoding'])}.", "",
             "| per task | tool calls (best plan) | execute_code (best script) | saved, median "
             "(95% CI over tasks) | saved, total |", "|---|---|---|---|---|"]
    for name in METRICS:
        m = h[name]
        lo, hi = m["median_saving_ci95"]
        lines.append(f"| {LABELS[name]} | {_amount(name, m['median_baseline'])} | "
                     f"{_amount(name, m['median_programmatic'])} | **{pct(m['median_saving'])}**"
                     f" ({pct(lo)} to {pct(hi)}) | {pct(m['total_saving'])} |")
    lines += ["", "| family | tasks | cost saved, median | cost saved, total | context saved, "
                  "median |", "|---|---|---|---|---|"]
    for fam, f in summary["by_family"].items():
        lines.append(f"| {fam} | {f['cost']['tasks']} | {pct(f['cost']['median_saving'])} | "
                     f"{pct(f['cost']['total_saving'])} | "
                     f"{pct(f['context_tokens']['median_saving'])} |")
    ab = summary["ablations"]
    lines += ["", "Ablations, cost saved (median / total): matched calls (the naive plan "
              f"against its own script) {pct(ab['matched']['cost']['median_saving'])} / "
              f"{pct(ab['matched']['cost']['total_saving'])}; serial calls "
              f"{pct(ab['serial']['cost']['median_saving'])} / "
              f"{pct(ab['serial']['cost']['total_saving'])}. With reasoning tokens per call "
              "on both sides: " + ", ".join(
                  f"{r['reasoning_tokens_per_call']} {pct(r['median_saving'])} / "
                  f"{pct(r['total_saving'])}" for r in summary["reasoning_sweep"]) + "."]
    if summary.get("programmatic_loses"):
        lines.append("execute_code costs more than the best plan on: "
                     + ", ".join(f"`{n}`" for n in summary["programmatic_loses"]) + ".")
    lines.append(FIGURES_END)
    return "\n".join(lines)


def headline_block(summary: Mapping[str, Any]) -> str:
    """A short block for a README (at most 8 lines between the markers)."""
    h, p = summary["headline"], summary["prices"]
    fam = ", ".join(f"{f} {pct(v['cost']['median_saving'])}"
                    for f, v in summary["by_family"].items())
    lines = [HEADLINE_START,
             "| per task, median over tasks (oracle upper bound) | tool calls | execute_code "
             "| saved |", "|---|---|---|---|"]
    for name in ("cost", "context_tokens", "round_trips"):
        m = h[name]
        lines.append(f"| {LABELS[name]} | {_amount(name, m['median_baseline'])} | "
                     f"{_amount(name, m['median_programmatic'])} | {pct(m['median_saving'])} |")
    lines.append("")
    lines.append(f"Cost saved by family (median): {fam}; total over "
                 f"{plural(h['cost']['tasks'], 'task')} {pct(h['cost']['total_saving'])} "
                 f"({p['sheet']}, prices retrieved {p['retrieved']}).")
    lines.append(HEADLINE_END)
    return "\n".join(lines)


def update_block(path: str | Path, block: str) -> Path:
    """Replace the block between ``block``'s own markers in the file at ``path``."""
    p = Path(path)
    start, end = block.split("\n", 1)[0], block.rsplit("\n", 1)[-1]
    text = p.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise BenchError(f"{p}: no {start} ... {end} block to update")
    p.write_text(pattern.sub(lambda _: block, text, count=1), encoding="utf-8")
    return p
