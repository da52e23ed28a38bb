"""Running a workflow for real, both ways, checking the answers, measuring each transcript.

Sequential: every batch of calls the plan yields goes through ``registry.dispatch``; the
transcript grows as a model's would (an assistant message with ``tool_calls``, one
``role=tool`` message per result). That is the *batched* baseline: every call that does not
depend on another's result shares one assistant message. The *serial* worst case is the
same transcript with one call per assistant message (same calls, same results, more model
calls). Programmatic: one ``execute_code`` call with the workflow's script, dispatched the
same way, so the transcript holds exactly the result the model would see.

Checked per workflow: each way's answer against the expected answer computed from the
generated records, and the script's tool calls against the sequential ones (the same calls,
as a multiset: a script may order independent calls differently).

Measured per way and per prefix (:class:`Prefix`: what precedes the task in every request):
the context at the end, every model request's prompt and output tokens (for
:mod:`~execengine.bench.cost`), round trips, tool calls.
"""

from __future__ import annotations

import json
import random
import string
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from execengine.bench.fixtures import Fixtures
from execengine.bench.reproducible import (
    PINNED_LEVEL,
    Canon,
    execute_code_description,
    pin_definitions,
)
from execengine.bench.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TokenCounter
from execengine.bench.workflow import (
    NAIVE,
    Call,
    Plan,
    Workflow,
    answer_from_output,
    decode_result,
    normalize,
)
from execengine.config import Config
from execengine.engine import Engine
from execengine.errors import WorkflowError
from execengine.registry import ToolRegistry

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures
    from execengine.bench.tokens import TokenCounter
    from execengine.config import Config
    from execengine.context import ToolContext
    from execengine.registry import ToolRegistry

SYSTEM_PROMPT = ("You are a software agent working in a project directory. Use the tools to "
                 "complete the user's task, then answer with the result.")
EXECUTE_CODE = "execute_code"
WAYS = ("serial", "batched", "programmatic")
#: the default baseline the savings are measured against
BASELINE = "batched"
#: the fixtures' and the call ids' seed: two runs with one seed count the same tokens
DEFAULT_SEED = 7

# A system prompt of a real agent's size: its text does not matter to the counts, only its
# length, so it is these guidelines repeated (numbered) up to the size asked for.
_GUIDELINES = (
    "Read the relevant files before changing them, and keep changes small and focused on the "
    "task. Prefer the project's existing conventions over your own preferences.",
    "When a command fails, read its output, find the cause, and fix it rather than retrying "
    "blindly. Never claim a command succeeded without seeing its output.",
    "Ask for clarification only when the task is ambiguous in a way that changes the result; "
    "otherwise make a reasonable assumption and state it in your answer.",
    "Do not expose secrets, credentials or tokens in tool calls, files or answers. Refuse "
    "destructive operations outside the project directory.",
    "Use parallel tool calls for independent reads and searches. Summarise long tool results "
    "instead of repeating them, and quote only the lines that matter.",
    "Answer concisely: the result first, then the evidence, then any caveats. Use code blocks "
    "for code and commands, and absolute dates for anything time-related.",
)


@dataclass(frozen=True)
class Prefix:
    """What precedes the task in every request: a system prompt and the tool definitions.

    ``minimal``: two sentences, and only the workflow's toolsets (the programmatic way adds
    ``execute_code``). ``realistic``: a system prompt of ``system_tokens`` tokens and every
    tool of the session, ``execute_code`` included, offered the same both ways.
    """

    name: str
    system_tokens: int = 0
    session_tools: bool = False

    def system_prompt(self, counter: TokenCounter) -> str:
        if not self.system_tokens:
            return SYSTEM_PROMPT
        key = (self.system_tokens, counter.name)
        text = _SYSTEM_CACHE.get(key)
        if text is None:
            parts = [SYSTEM_PROMPT]
            size = counter.count(SYSTEM_PROMPT)
            while size < self.system_tokens:
                part = f"{len(parts)}. {_GUIDELINES[(len(parts) - 1) % len(_GUIDELINES)]}"
                size += counter.count("\n\n" + part)
                parts.append(part)
            text = _SYSTEM_CACHE[key] = "\n\n".join(parts)
        return text


_SYSTEM_CACHE: dict[tuple[int, str], str] = {}


MINIMAL = Prefix("minimal")
REALISTIC = Prefix("realistic", system_tokens=4000, session_tools=True)


@dataclass(frozen=True)
class Figures:
    """One way's figures under one prefix. ``requests`` holds (prompt, output) tokens of
    every model call, in order."""

    prefix_tokens: int
    tool_tokens: int
    context_tokens: int
    requests: tuple[tuple[int, int], ...]

    @property
    def round_trips(self) -> int:
        return len(self.requests)

    @property
    def input_tokens(self) -> int:
        return sum(p for p, _ in self.requests)

    @property
    def output_tokens(self) -> int:
        return sum(o for _, o in self.requests)


@dataclass
class WayResult:
    """One way of running a strategy: its transcript (after the system message), its calls,
    its answer and its figures per prefix."""

    messages: list[dict[str, Any]]
    answer: Any = None
    error: str = ""
    #: the tool calls made (for the programmatic way: the calls its script made)
    calls: list[Call] = field(default_factory=list)
    #: tool calls the model made (1 for the programmatic way)
    tool_calls: int = 0
    seconds: float = 0.0
    figures: dict[str, Figures] = field(default_factory=dict)

    @property
    def inner_tool_calls(self) -> int:
        return len(self.calls)


@dataclass
class StrategyResult:
    """One strategy run every way (``serial``, ``batched``, ``programmatic``), checked."""

    name: str
    ways: dict[str, WayResult]
    #: each way's answer equals the expected one (None: the workflow has no expected answer)
    correct: dict[str, bool | None] = field(default_factory=dict)
    #: the script made the same tool calls as the plan
    same_calls: bool = True
    detail: str = ""

    @property
    def agree(self) -> bool:
        """Every way right (or, without an expected answer, equal) with the same calls."""
        return (not self.detail and self.same_calls
                and all(v is not False for v in self.correct.values()))


@dataclass
class WorkflowResult:
    name: str
    family: str
    strategies: dict[str, StrategyResult]
    cluster: str = ""
    expected: Any = None

    @property
    def naive(self) -> StrategyResult:
        return self.strategies[NAIVE]

    @property
    def ways(self) -> dict[str, WayResult]:
        """The naive strategy's ways."""
        return self.naive.ways

    @property
    def sequential(self) -> WayResult:
        return self.ways[BASELINE]

    @property
    def programmatic(self) -> WayResult:
        return self.ways["programmatic"]

    @property
    def correct(self) -> dict[str, bool | None]:
        return self.naive.correct

    @property
    def same_calls(self) -> bool:
        return all(s.same_calls for s in self.strategies.values())

    @property
    def detail(self) -> str:
        return "; ".join(s.detail if s.name == NAIVE else f"[{s.name}] {s.detail}"
                         for s in self.strategies.values() if s.detail)

    @property
    def agree(self) -> bool:
        """Every strategy right every way, with the same calls both ways."""
        return all(s.agree for s in self.strategies.values())

    def savings(self, prefix: str = "minimal", baseline: str = BASELINE) -> float:
        """Fraction of the naive baseline's final context the naive script saves."""
        seq = self.ways[baseline].figures[prefix].context_tokens
        prog = self.programmatic.figures[prefix].context_tokens
        return 0.0 if seq == 0 else 1 - prog / seq


def bench_overrides(fx: Fixtures, *, max_tool_calls: int = 500) -> dict[str, Any]:
    """Config overrides that point the tools at the fixtures."""
    return {
        "terminal.cwd": str(fx.root),
        "web.provider": "searxng",
        "web.searxng.url": fx.base_url,
        "web.allow_private": True,
        "code_execution.max_tool_calls": max_tool_calls,
        "code_execution.timeout": 120.0,
        # the scripts are the benchmark's own: no one to ask, at any isolation level
        "approvals.execute_code": "allow",
    }


def call_key(tool: str, args: Mapping[str, Any]) -> str:
    return json.dumps([tool, normalize(dict(args))], sort_keys=True)


class Runner:
    """Runs workflows on one registry and one set of fixtures."""

    def __init__(self, registry: ToolRegistry, fx: Fixtures, counter: TokenCounter,
                 prefixes: Sequence[Prefix] = (MINIMAL, REALISTIC), *, seed: int = 0) -> None:
        self.registry = registry
        self.fx = fx
        self.counter = counter
        self.prefixes = tuple(prefixes)
        self.seed = seed
        self.canon = Canon(str(fx.root), fx.base_url)
        self._ids = random.Random(f"bench-call-ids-{seed}")
        self._recording: list[Call] | None = None
        registry.add_hook("pre_tool_call", self._record)

    def _record(self, name: str, args: Mapping[str, Any], ctx: ToolContext) -> None:
        if self._recording is not None and ctx.origin == EXECUTE_CODE:
            self._recording.append(Call(name, dict(args)))

    def call_id(self) -> str:
        """An id of the length real providers use (``call_`` and 24 letters and digits),
        from the run's seed (ids are not counted; they keep transcripts comparable)."""
        return "call_" + "".join(self._ids.choices(string.ascii_letters + string.digits,
                                                   k=24))

    def _tools(self, wf: Workflow, prefix: Prefix, programmatic: bool) -> list[dict[str, Any]]:
        if prefix.session_tools:
            tools = self.registry.get_tool_definitions()
        else:
            extra = ["code_execution"] if programmatic else []
            tools = self.registry.get_tool_definitions(enabled_toolsets=[*wf.toolsets, *extra])
        return pin_definitions(tools, self.registry.config)

    def counted_description(self) -> str:
        """execute_code's description as the counts see it (pinned; see
        :mod:`~execengine.bench.reproducible`)."""
        return execute_code_description(pin_definitions(self.registry.get_tool_definitions(),
                                                        self.registry.config))

    def _dispatch(self, wf: Workflow, tool: str, args: Mapping[str, Any]) -> str:
        return self.registry.dispatch(tool, dict(args), task_id=f"bench-{wf.name}")

    # -- the two ways ------------------------------------------------------------------------

    def sequential(self, wf: Workflow, plan: Callable[[Fixtures], Plan] | None = None
                   ) -> WayResult:
        """``plan`` (default: the workflow's naive one) as a model's tool calls."""
        if wf.mutates:
            self.fx.reset_project()
        way = WayResult([{"role": "user", "content": wf.prompt(self.fx)}])
        started = time.perf_counter()
        gen = (plan or wf.plan)(self.fx)
        try:
            batch = next(gen)
            while True:
                if not batch:
                    raise WorkflowError("the plan yielded an empty batch")
                calls = [(self.call_id(), c) for c in batch]
                way.messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function",
                     "function": {"name": c.tool,
                                  "arguments": self.canon(json.dumps(c.args))}}
                    for cid, c in calls]})
                results = []
                for cid, c in calls:
                    text = self._dispatch(wf, c.tool, c.args)
                    way.messages.append({"role": "tool", "tool_call_id": cid,
                                         "content": self.canon(text)})
                    results.append(decode_result(text))
                way.calls += [c for _, c in calls]
                way.tool_calls += len(calls)
                batch = gen.send(results)
        except StopIteration as stop:
            way.answer = stop.value
        except Exception as exc:  # a plan that breaks on a result it did not expect
            way.error = f"{type(exc).__name__}: {exc}"
        way.seconds = time.perf_counter() - started
        self._finish(way)
        return way

    def programmatic(self, wf: Workflow, script: Callable[[Fixtures], str] | None = None
                     ) -> WayResult:
        """``script`` (default: the workflow's naive one) in one execute_code call."""
        if wf.mutates:
            self.fx.reset_project()
        way = WayResult([{"role": "user", "content": wf.prompt(self.fx)}])
        code = (script or wf.script)(self.fx)
        cid = self.call_id()
        way.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": EXECUTE_CODE,
                          "arguments": self.canon(json.dumps({"code": code}))}}]})
        started = time.perf_counter()
        self._recording = way.calls
        try:
            text = self._dispatch(wf, EXECUTE_CODE, {"code": code})
        finally:
            self._recording = None
        way.seconds = time.perf_counter() - started
        way.messages.append({"role": "tool", "tool_call_id": cid, "content": self.canon(text)})
        way.tool_calls = 1
        result = decode_result(text)
        if not isinstance(result, dict) or "output" not in result:
            way.error = f"execute_code failed: {text[:500]}"
        elif result.get("status", "success") != "success":
            way.error = (f"script {result.get('status')}: {result.get('error', '')}"
                         f" {str(result.get('output', ''))[-300:]}").strip()
        else:
            try:
                way.answer = answer_from_output(str(result["output"]))
            except WorkflowError as exc:
                way.error = str(exc)
        self._finish(way)
        return way

    def _finish(self, way: WayResult) -> None:
        """Append the final answer."""
        final = (json.dumps(normalize(way.answer), ensure_ascii=False) if not way.error
                 else f"I could not finish: {way.error}")
        way.messages.append({"role": "assistant", "content": final})

    # -- accounting --------------------------------------------------------------------------

    def measure(self, way: WayResult, tools: list[dict[str, Any]], prefix: Prefix) -> Figures:
        """Every request's prompt and output, and the final context, under ``prefix``."""
        c = self.counter
        system = {"role": "system", "content": prefix.system_prompt(c)}
        tool_tokens = c.count_tools(tools)
        prompt = tool_tokens + c.count_message(system) + REPLY_PRIMING
        prefix_tokens = prompt
        requests = []
        for msg in way.messages:
            n = c.count_message(msg)
            if msg["role"] == "assistant":  # a model call produced it
                requests.append((prompt, n - TOKENS_PER_MESSAGE))
            prompt += n
        return Figures(prefix_tokens, tool_tokens, prompt, tuple(requests))

    def run(self, wf: Workflow) -> WorkflowResult:
        result = WorkflowResult(wf.name, wf.family, {}, cluster=wf.group)
        if wf.truth is not None:
            try:
                result.expected = wf.truth(self.fx)
            except Exception as exc:
                result.expected = _TruthFailed(f"{type(exc).__name__}: {exc}")
        for strategy in wf.strategies():
            batched = self.sequential(wf, strategy.plan)
            prog = self.programmatic(wf, strategy.script)
            serial = WayResult(split_serial(batched.messages), batched.answer, batched.error,
                               list(batched.calls), batched.tool_calls, batched.seconds)
            ways = {"serial": serial, "batched": batched, "programmatic": prog}
            for prefix in self.prefixes:
                for name, way in ways.items():
                    tools = self._tools(wf, prefix, programmatic=name == "programmatic")
                    way.figures[prefix.name] = self.measure(way, tools, prefix)
            sr = StrategyResult(strategy.name, ways)
            self._check(wf, sr, result.expected)
            result.strategies[strategy.name] = sr
        if isinstance(result.expected, _TruthFailed):
            result.expected = None
        if wf.mutates:
            self.fx.reset_project()
        return result

    def _check(self, wf: Workflow, result: StrategyResult, expected: Any) -> None:
        seq, prog = result.ways[BASELINE], result.ways["programmatic"]
        problems = [f"{name}: {way.error}" for name, way in (("sequential", seq),
                                                             ("programmatic", prog))
                    if way.error]
        if isinstance(expected, _TruthFailed):
            problems.append(f"expected answer failed: {expected.error}")
        elif wf.truth is not None:
            for name, way in (("batched", seq), ("programmatic", prog)):
                ok = not way.error and _checked(wf, expected, way.answer)
                result.correct[name] = ok
                if not ok and not way.error:
                    problems.append(f"{name} answer {_short(way.answer)} is not the "
                                    f"expected {_short(expected)}")
            result.correct["serial"] = result.correct["batched"]
        elif not seq.error and not prog.error and not _checked(wf, seq.answer, prog.answer):
            problems.append(f"answers differ: sequential {_short(seq.answer)} vs "
                            f"programmatic {_short(prog.answer)}")
        if not prog.error:
            missing, extra = compare_calls([self._full(c) for c in seq.calls],
                                           [self._full(c) for c in prog.calls])
            result.same_calls = not missing and not extra
            if missing or extra:
                problems.append(f"the script's tool calls differ from the sequential ones: "
                                f"{len(missing)} missing, {len(extra)} extra "
                                f"(first: {(missing or extra)[0][:160]})")
        result.detail = "; ".join(problems)

    def _full(self, c: Call) -> Call:
        """The call with its schema's defaults filled in (a stub sends them explicitly)."""
        try:
            props = self.registry.get(c.tool).parameters.get("properties", {})
        except Exception:
            return c
        defaults = {k: v["default"] for k, v in props.items()
                    if isinstance(v, Mapping) and "default" in v}
        return Call(c.tool, {**defaults, **c.args})

    def run_all(self, workflows: Iterable[Workflow]) -> list[WorkflowResult]:
        return [self.run(wf) for wf in workflows]


@dataclass(frozen=True)
class _TruthFailed:
    error: str


def _checked(wf: Workflow, expected: Any, answer: Any) -> bool:
    try:
        return bool(wf.check(expected, answer))
    except Exception:
        return False


def compare_calls(sequential: Sequence[Call], script: Sequence[Call],
                  ) -> tuple[list[str], list[str]]:
    """Calls the sequential way made that the script did not, and the other way round."""
    a = Counter(call_key(c.tool, c.args) for c in sequential)
    b = Counter(call_key(c.tool, c.args) for c in script)
    return sorted((a - b).elements()), sorted((b - a).elements())


def split_serial(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same transcript with one tool call per assistant message (the serial worst case)."""
    out: list[dict[str, Any]] = []
    results = {m["tool_call_id"]: m for m in messages if m.get("role") == "tool"}
    for msg in messages:
        if msg.get("role") == "tool":
            continue
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            for tc in msg["tool_calls"]:
                out.append({**msg, "tool_calls": [tc]})
                out.append(results[tc["id"]])
        else:
            out.append(msg)
    return out


def _short(value: Any) -> str:
    text = json.dumps(normalize(value))
    return text if len(text) <= 200 else text[:200] + "..."


@dataclass
class SuiteRun:
    """A suite's results and what the run was: the seed, the counted execute_code
    description, the isolation level the scripts ran at."""

    results: list[WorkflowResult]
    seed: int
    description: str
    description_tokens: int
    isolation: dict[str, str]


def run_suite(workflows: Iterable[Workflow], *, config: Config | None = None,
              encoding: str = "o200k_base", prefixes: Sequence[Prefix] = (MINIMAL, REALISTIC),
              progress: Callable[[WorkflowResult], None] | None = None, seed: int = DEFAULT_SEED,
              ) -> SuiteRun:
    """Run ``workflows`` every way on fresh fixtures (generated from ``seed``) and a registry
    of the built-in tools.

    ``config`` (default: built-in defaults) is adjusted by :func:`bench_overrides`.
    """

    counter = TokenCounter(encoding)
    out: list[WorkflowResult] = []
    with Fixtures(seed=seed) as fx:
        cfg = (config or Config()).with_overrides(bench_overrides(fx))
        with ToolRegistry.with_builtins(cfg, plugins=False) as registry, \
                Engine(cfg, registry) as engine:  # runs the registry's execute_code calls
            runner = Runner(registry, fx, counter, prefixes, seed=seed)
            for wf in workflows:
                result = runner.run(wf)
                out.append(result)
                if progress is not None:
                    progress(result)
            description = runner.counted_description()
            level = engine.launcher.level
    return SuiteRun(out, seed, description, counter.count(description),
                    {"configured": str(cfg.code_execution.isolation), "level": str(level),
                     "counted_description_level": PINNED_LEVEL})
