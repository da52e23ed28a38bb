"""The live benchmark: a real model does each task, choosing its own calls or writing its own
script, over N runs per task and mode, beside the oracle's bound for the same tasks.

Modes: ``tools`` offers the workflow's tools; ``code`` offers them and ``execute_code``,
with a system prompt that suggests a script for multi-step work. Every tool call goes
through the real dispatcher on the generated fixtures. Recorded per run: the provider's
usage summed over the run's requests (prompt, cached, cache writes, completion, reasoning),
model calls, tool calls, retried requests, tool errors, and whether the final answer equals
the expected one (the last JSON value of the model's final message).

The report (:func:`beside_oracle`) puts each task's live figures beside the oracle's: the
cheapest hand-written plan for ``tools``, the cheapest script for ``code``, run on fixtures
of the same seed, counted with ``o200k_base`` and priced with the same sheet. Prompts match
the live ones in shape (the ``minimal`` prefix: a short system prompt and the task's tools).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine._text import table as render
from execengine.bench import compare
from execengine.bench.compare import Billing, interval
from execengine.bench.fixtures import Fixtures
from execengine.bench.live.providers import Provider, Usage, make_provider, resolve_api
from execengine.bench.runner import DEFAULT_SEED, MINIMAL, Prefix, bench_overrides, run_suite
from execengine.bench.workflow import Workflow, normalize
from execengine.config import Config
from execengine.engine import Engine
from execengine.errors import BenchError
from execengine.registry import ToolRegistry

if TYPE_CHECKING:
    import argparse

    from execengine.bench.cost import Prices, PriceSheet
    from execengine.registry import ToolRegistry

MODES = ("tools", "code")
SYSTEM = {
    "tools": "You are a software agent working in a project directory. Use the tools to "
             "complete the user's task. Make independent tool calls in parallel.",
    "code": "You are a software agent working in a project directory. Use the tools to "
            "complete the user's task. For work that takes several tool calls, write one "
            "Python script with execute_code that makes them and prints only what you need.",
}


@dataclass
class Run:
    workflow: str
    mode: str
    index: int
    success: bool = False
    answer: Any = None
    error: str = ""
    model_calls: int = 0
    tool_calls: int = 0
    retries: int = 0
    tool_errors: int = 0
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0


def final_answer(text: str) -> Any:
    """The last JSON value of the model's final message (a line, or a fenced block)."""
    for line in reversed([ln.strip().strip("`") for ln in text.strip().splitlines()]):
        if line:
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise ValueError("no JSON answer in the final message")


def run_once(provider: Provider, registry: ToolRegistry, fx: Fixtures, wf: Workflow,
             mode: str, index: int, *, max_turns: int = 40) -> Run:
    """One run of ``wf`` by the model in ``mode``."""
    run = Run(wf.name, mode, index)
    if wf.mutates:
        fx.reset_project()
    toolsets = [*wf.toolsets, *(["code_execution"] if mode == "code" else [])]
    tools = registry.get_tool_definitions(enabled_toolsets=toolsets)
    messages: list[dict[str, Any]] = [{"role": "user", "content": wf.prompt(fx)}]
    started = time.perf_counter()
    try:
        for _ in range(max_turns):
            turn = provider.complete(SYSTEM[mode], messages, tools)
            run.model_calls += 1
            run.retries += turn.retries
            run.usage += turn.usage
            msg: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if turn.calls:
                msg["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in turn.calls]
            messages.append(msg)
            if not turn.calls:
                run.answer = final_answer(turn.text)
                break
            for c in turn.calls:
                try:
                    args: Any = json.loads(c.arguments or "{}")
                except ValueError:
                    args = c.arguments  # the dispatcher answers with a clear error
                text = registry.dispatch(c.name, args, task_id=f"live-{wf.name}")
                run.tool_calls += 1
                run.tool_errors += _is_error(text)
                messages.append({"role": "tool", "tool_call_id": c.id, "content": text})
        else:
            raise RuntimeError(f"no final answer within {max_turns} model calls")
        expected = wf.truth(fx) if wf.truth else None
        run.success = wf.truth is not None and bool(wf.check(expected, run.answer))
    except Exception as exc:  # the run failed: recorded, the benchmark goes on
        run.error = f"{type(exc).__name__}: {exc}"
    run.seconds = time.perf_counter() - started
    if wf.mutates:
        fx.reset_project()
    return run


def _is_error(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and (("error" in value and value.get("success") is not True)
                                        or value.get("status") not in (None, "success"))


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate."""
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def run_cost(u: Usage, sheet: PriceSheet) -> float:
    """Dollars for a run's reported usage."""
    uncached = max(0, u.prompt - u.cached - u.cache_write)
    return (uncached * sheet.input + u.cached * sheet.cached_input
            + u.cache_write * (sheet.cache_write or sheet.input)
            + u.completion * sheet.output) / 1e6


def _mean_of(get: Callable[[Run], float]) -> Callable[[Sequence[Any]], float]:
    return lambda runs: statistics.fmean(get(r) for r in runs)


def summarize_live(runs: Sequence[Run], sheet: PriceSheet, *, model: str = "",
                   as_of: str = "") -> dict[str, Any]:
    """Per workflow and mode, and per mode overall: success with a Wilson interval, mean
    usage and cost per run with bootstrap intervals."""
    def stats(sub: Sequence[Run]) -> dict[str, Any]:
        ok = sum(r.success for r in sub)
        lo, hi = wilson(ok, len(sub))
        out: dict[str, Any] = {"runs": len(sub), "successes": ok,
                               "success_rate": round(ok / len(sub), 4) if sub else 0.0,
                               "success_ci95": [round(lo, 4), round(hi, 4)],
                               "retries": sum(r.retries for r in sub),
                               "tool_errors": sum(r.tool_errors for r in sub)}
        fields: dict[str, Callable[[Run], float]] = {
            "prompt_tokens": lambda r: r.usage.prompt,
            "cached_tokens": lambda r: r.usage.cached,
            "cache_write_tokens": lambda r: r.usage.cache_write,
            "completion_tokens": lambda r: r.usage.completion,
            "reasoning_tokens": lambda r: r.usage.reasoning,
            "model_calls": lambda r: r.model_calls, "tool_calls": lambda r: r.tool_calls,
            "cost": lambda r: run_cost(r.usage, sheet)}
        for key, get in fields.items():
            mean = statistics.fmean(get(r) for r in sub) if sub else 0.0
            lo, hi = interval(list(sub), _mean_of(get), resamples=500)
            digits = 6 if key == "cost" else 1
            out[key] = {"mean": round(mean, digits), "ci95": [round(lo, digits),
                                                              round(hi, digits)]}
        return out

    names = list(dict.fromkeys(r.workflow for r in runs))
    modes = list(dict.fromkeys(r.mode for r in runs))
    out: dict[str, Any] = {
        "model": model, "prices": {"sheet": sheet.name, "as_of": as_of},
        "by_workflow": {n: {m: stats([r for r in runs if r.workflow == n and r.mode == m])
                            for m in modes} for n in names},
        "by_mode": {m: stats([r for r in runs if r.mode == m]) for m in modes},
        "runs": [{**asdict(r), "answer": normalize(r.answer)} for r in runs],
    }
    if {"tools", "code"} <= set(modes):
        t, c = out["by_mode"]["tools"], out["by_mode"]["code"]
        out["code_vs_tools"] = {
            key: round(1 - c[key]["mean"] / t[key]["mean"], 4) if t[key]["mean"] else 0.0
            for key in ("prompt_tokens", "completion_tokens", "cost", "model_calls")}
    return out


def run_live(provider: Provider, workflows: Sequence[Workflow], *, runs: int = 3,
             modes: Sequence[str] = MODES, max_turns: int = 40,
             config: Any = None, progress: Callable[[Run], None] | None = None,
             seed: int = DEFAULT_SEED) -> list[Run]:
    """Every workflow, in every mode, ``runs`` times, on fresh fixtures (from ``seed``)."""

    out: list[Run] = []
    with Fixtures(seed=seed) as fx:
        cfg = (config or Config()).with_overrides(bench_overrides(fx))
        with ToolRegistry.with_builtins(cfg, plugins=False) as registry, \
                Engine(cfg, registry):  # runs the registry's execute_code calls
            for wf in workflows:
                for mode in modes:
                    for i in range(runs):
                        run = run_once(provider, registry, fx, wf, mode, i, max_turns=max_turns)
                        out.append(run)
                        if progress is not None:
                            progress(run)
    return out


def oracle_figures(rows: Sequence[Mapping[str, Any]], billing: Billing,
                   prefix: str = MINIMAL.name) -> dict[str, Any]:
    """Per workflow, the oracle's cheapest plan (``tools``) and cheapest script (``code``)."""
    out: dict[str, Any] = {}
    for r in rows:
        (bs, base), (ps, prog) = compare.pair(r, "best", prefix, billing)
        out[r["workflow"]] = {
            mode: {"strategy": strategy, "cost": round(billing.dollars(fig), 6),
                   "prompt_tokens": fig["input_tokens"], "completion_tokens": fig["output_tokens"]
                   + billing.reasoning_tokens * fig["round_trips"],
                   "model_calls": fig["round_trips"]}
            for mode, strategy, fig in (("tools", bs, base), ("code", ps, prog))}
        out[r["workflow"]]["code_vs_tools"] = round(
            compare.saving(out[r["workflow"]]["tools"]["cost"],
                           out[r["workflow"]]["code"]["cost"]), 4)
    return out


def beside_oracle(live: Mapping[str, Any], oracle: Mapping[str, Any]) -> dict[str, Any]:
    """The live figures per workflow and mode next to the oracle's, and the two savings."""
    out: dict[str, Any] = {}
    for name, modes in live["by_workflow"].items():
        o = oracle.get(name)
        if o is None:
            continue
        entry: dict[str, Any] = {}
        for mode, s in modes.items():
            entry[mode] = {"success_rate": s["success_rate"],
                           "live_cost": s["cost"]["mean"], "oracle_cost": o[mode]["cost"],
                           "live_prompt_tokens": s["prompt_tokens"]["mean"],
                           "oracle_prompt_tokens": o[mode]["prompt_tokens"],
                           "live_reasoning_tokens": s["reasoning_tokens"]["mean"],
                           "live_model_calls": s["model_calls"]["mean"],
                           "oracle_model_calls": o[mode]["model_calls"],
                           "oracle_strategy": o[mode]["strategy"]}
        if {"tools", "code"} <= set(modes):
            t, c = modes["tools"]["cost"]["mean"], modes["code"]["cost"]["mean"]
            entry["code_vs_tools"] = {"live": round(compare.saving(t, c), 4),
                                      "oracle_bound": o["code_vs_tools"]}
        out[name] = entry
    return out


def _cost_saving(by_workflow: Mapping[str, Any], key: str) -> float:
    return compare.saving(sum(w["tools"][key] for w in by_workflow.values()),
                          sum(w["code"][key] for w in by_workflow.values()))


def table(summary: Mapping[str, Any]) -> str:

    rows = []
    for name, modes in summary["by_workflow"].items():
        for mode, s in modes.items():
            lo, hi = s["success_ci95"]
            rows.append([name, mode, f"{s['successes']}/{s['runs']} ({lo:.0%}-{hi:.0%})",
                         f"{s['prompt_tokens']['mean']:,.0f}", f"{s['cached_tokens']['mean']:,.0f}",
                         f"{s['completion_tokens']['mean']:,.0f}",
                         f"{s['reasoning_tokens']['mean']:,.0f}",
                         f"{s['model_calls']['mean']:.1f}", f"{s['cost']['mean']:.4f}",
                         str(s["retries"])])
    out = [render(rows, ["workflow", "mode", "right (95% CI)", "prompt", "cached", "completion",
                         "reasoning", "calls", "$/run", "retries"]), ""]
    for mode, s in summary["by_mode"].items():
        lo, hi = s["success_ci95"]
        c = s["cost"]
        out.append(f"{mode}: {s['successes']}/{s['runs']} right ({lo:.0%}-{hi:.0%}); per run "
                   f"{s['prompt_tokens']['mean']:,.0f} prompt tokens "
                   f"({s['cached_tokens']['mean']:,.0f} cached), "
                   f"{s['completion_tokens']['mean']:,.0f} completion, ${c['mean']:.4f} "
                   f"(95% CI {c['ci95'][0]:.4f}-{c['ci95'][1]:.4f})")
    if "code_vs_tools" in summary:
        v = summary["code_vs_tools"]
        out.append(f"code against tools: prompt tokens {v['prompt_tokens']:.1%}, cost "
                   f"{v['cost']:.1%}, model calls {v['model_calls']:.1%} saved")
    beside = summary.get("beside_oracle") or {}
    if beside:
        rows = []
        for name, e in beside.items():
            for mode in MODES:
                if mode in e:
                    m = e[mode]
                    rows.append([name, mode, f"{m['success_rate']:.0%}",
                                 f"{m['live_cost']:.4f}", f"{m['oracle_cost']:.4f}",
                                 f"{m['live_prompt_tokens']:,.0f}",
                                 f"{m['oracle_prompt_tokens']:,}",
                                 f"{m['live_model_calls']:.1f}", str(m["oracle_model_calls"])])
        out += ["", "beside the oracle (hand-written plans and scripts, no model: an upper bound "
                "on what execute_code saves; its tokens are o200k_base counts):",
                render(rows, ["workflow", "mode", "right", "live $", "oracle $", "live prompt",
                              "oracle prompt", "live calls", "oracle calls"])]
        both = {n: e for n, e in beside.items() if "code_vs_tools" in e}
        if both:
            live = _cost_saving({n: {m: {"c": e[m]["live_cost"]} for m in MODES}
                                 for n, e in both.items()}, "c")
            bound = _cost_saving({n: {m: {"c": e[m]["oracle_cost"]} for m in MODES}
                                  for n, e in both.items()}, "c")
            out.append(f"cost saved by code against tools over these tasks: live {live:.1%}, "
                       f"oracle bound {bound:.1%}")
    return "\n".join(out)


def run_live_cli(args: argparse.Namespace, workflows: Sequence[Workflow],
                 prices: Prices, *, config: Config,
                 prefixes: Sequence[Prefix] = (MINIMAL,)) -> int:
    """``bench tokens --model``: the live runs, then the oracle on the same tasks beside
    them."""
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise BenchError(f"--modes: {', '.join(bad) or 'nothing'} is not one of "
                         f"{', '.join(MODES)}")
    if args.runs < 1:
        raise BenchError("--runs must be at least 1")
    try:
        api = resolve_api(args.model, args.api)
        env = args.api_key_env or ("ANTHROPIC_API_KEY" if api == "anthropic"
                                   else "OPENAI_API_KEY")
        provider = make_provider(args.model, api=api, api_key=os.environ.get(env) or None)
    except ValueError as exc:
        raise BenchError(str(exc)) from None

    def progress(r: Run) -> None:
        if not args.json:
            print(f"  {r.workflow:32} {r.mode:5} #{r.index + 1}  "
                  f"{'right' if r.success else 'WRONG'}  {r.usage.prompt:,} prompt tokens"
                  + (f"  ({r.error[:80]})" if r.error else ""), file=sys.stderr, flush=True)

    runs = run_live(provider, workflows, runs=args.runs, modes=modes, max_turns=args.max_turns,
                    config=config, progress=progress, seed=args.seed)
    sheet = prices.sheet(args.price)
    summary = summarize_live(runs, sheet, model=args.model, as_of=sheet.retrieved)
    oracle = run_suite(workflows, config=config, encoding="o200k_base", prefixes=prefixes,
                       seed=args.seed)
    billing = Billing(sheet, "warm", args.reasoning_tokens)
    figures = oracle_figures([compare.row(r) for r in oracle.results], billing)
    summary["oracle"] = {"about": "hand-written plans and scripts, no model (an upper bound)",
                         "prefix": MINIMAL.name, "encoding": "o200k_base",
                         "reasoning_tokens_per_call": billing.reasoning_tokens,
                         "right": all(r.agree for r in oracle.results), "by_workflow": figures}
    summary["beside_oracle"] = beside_oracle(summary, figures)
    text = json.dumps(summary, indent=2, ensure_ascii=False)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text if args.json else table(summary))
    return 0 if all(r.success for r in runs) else 1
