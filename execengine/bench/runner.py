"""Running a workflow for real, both ways, and measuring the context each builds.

Sequential: every call the plan yields goes through ``registry.dispatch`` and the transcript
grows as a model's would (an assistant message with ``tool_calls``, one ``role=tool``
message per result). Programmatic: one ``execute_code`` call with the workflow's script,
dispatched the same way, so the transcript holds exactly the result the model would see.
Both transcripts start with the same system and user messages and end with the same final
answer, and both offer the model the workflow's tools (the programmatic way offers
``execute_code`` besides, as a real session does).

Measured per way: the context at the end (tool definitions + messages, tokens), the input
tokens summed over every model call (what a provider bills), model round trips, tool calls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from execengine.bench.errors import WorkflowError
from execengine.bench.workflow import Workflow, answer_from_output, decode_result, normalize

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures
    from execengine.bench.tokens import TokenCounter
    from execengine.config import Config
    from execengine.registry import ToolRegistry

SYSTEM_PROMPT = ("You are a software agent working in a project directory. Use the tools to "
                 "complete the user's task, then answer with the result.")
EXECUTE_CODE = "execute_code"


@dataclass
class WayResult:
    """One way of running a workflow: its transcript and its figures."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    answer: Any = None
    error: str = ""
    round_trips: int = 0
    tool_calls: int = 0
    #: tool calls the script made inside execute_code (programmatic way)
    inner_tool_calls: int = 0
    tool_tokens: int = 0
    context_tokens: int = 0
    billed_tokens: int = 0
    seconds: float = 0.0


@dataclass
class WorkflowResult:
    name: str
    family: str
    sequential: WayResult
    programmatic: WayResult
    agree: bool
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def savings(self) -> float:
        """Fraction of the sequential context the programmatic way saves."""
        seq = self.sequential.context_tokens
        return 0.0 if seq == 0 else 1 - self.programmatic.context_tokens / seq


def bench_overrides(fx: Fixtures, *, max_tool_calls: int = 500) -> dict[str, Any]:
    """Config overrides that point the tools at the fixtures."""
    return {
        "terminal.cwd": str(fx.root),
        "web.provider": "searxng",
        "web.searxng.url": fx.base_url,
        "web.allow_private": True,
        "code_execution.max_tool_calls": max_tool_calls,
        "code_execution.timeout": 120.0,
    }


class Runner:
    """Runs workflows on one registry and one set of fixtures."""

    def __init__(self, registry: ToolRegistry, fx: Fixtures, counter: TokenCounter) -> None:
        self.registry = registry
        self.fx = fx
        self.counter = counter
        self._ids = 0

    def _call_id(self) -> str:
        self._ids += 1
        return f"call_{self._ids:04d}"

    def _opening(self, wf: Workflow) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": wf.task}]

    def _tools(self, wf: Workflow, *extra: str) -> list[dict[str, Any]]:
        return self.registry.get_tool_definitions(enabled_toolsets=[*wf.toolsets, *extra])

    def _dispatch(self, wf: Workflow, tool: str, args: Mapping[str, Any]) -> str:
        return self.registry.dispatch(tool, dict(args), task_id=f"bench-{wf.name}")

    # -- the two ways ------------------------------------------------------------------------

    def sequential(self, wf: Workflow) -> WayResult:
        if wf.mutates:
            self.fx.reset_project()
        way = WayResult(self._opening(wf), self._tools(wf))
        started = time.perf_counter()
        gen = wf.plan(self.fx)
        try:
            batch = next(gen)
            while True:
                calls = [(self._call_id(), c) for c in batch]
                way.messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function",
                     "function": {"name": c.tool, "arguments": json.dumps(c.args)}}
                    for cid, c in calls]})
                results = []
                for cid, c in calls:
                    text = self._dispatch(wf, c.tool, c.args)
                    way.messages.append({"role": "tool", "tool_call_id": cid, "content": text})
                    results.append(decode_result(text))
                way.tool_calls += len(calls)
                batch = gen.send(results)
        except StopIteration as stop:
            way.answer = stop.value
        except Exception as exc:  # a plan that breaks on a result it did not expect
            way.error = f"{type(exc).__name__}: {exc}"
        way.seconds = time.perf_counter() - started
        self._finish(way)
        return way

    def programmatic(self, wf: Workflow) -> WayResult:
        if wf.mutates:
            self.fx.reset_project()
        way = WayResult(self._opening(wf), self._tools(wf, "code_execution"))
        code = wf.script(self.fx)
        cid = self._call_id()
        way.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": EXECUTE_CODE, "arguments": json.dumps({"code": code})}}]})
        started = time.perf_counter()
        text = self._dispatch(wf, EXECUTE_CODE, {"code": code})
        way.seconds = time.perf_counter() - started
        way.messages.append({"role": "tool", "tool_call_id": cid, "content": text})
        way.tool_calls = 1
        result = decode_result(text)
        if not isinstance(result, dict) or "output" not in result:
            way.error = f"execute_code failed: {text[:500]}"
        elif result.get("status", "success") != "success":
            way.error = (f"script {result.get('status')}: {result.get('error', '')}"
                         f" {str(result.get('output', ''))[-300:]}").strip()
        else:
            way.inner_tool_calls = int(result.get("tool_calls_made") or 0)
            try:
                way.answer = answer_from_output(str(result["output"]))
            except WorkflowError as exc:
                way.error = str(exc)
        self._finish(way)
        return way

    def _finish(self, way: WayResult) -> None:
        """Append the final answer and count tokens and round trips."""
        final = (json.dumps(normalize(way.answer), ensure_ascii=False) if not way.error
                 else f"I could not finish: {way.error}")
        way.messages.append({"role": "assistant", "content": final})
        c = self.counter
        way.tool_tokens = c.count_tools(way.tools)
        # a model call happens before every assistant message
        prompt = way.tool_tokens + 3  # reply priming
        for msg in way.messages:
            if msg["role"] == "assistant":
                way.round_trips += 1
                way.billed_tokens += prompt
            prompt += c.count_message(msg)
        way.context_tokens = prompt

    def run(self, wf: Workflow) -> WorkflowResult:
        seq = self.sequential(wf)
        prog = self.programmatic(wf)
        if seq.error or prog.error:
            agree, detail = False, "; ".join(
                f"{way}: {err}" for way, err in (("sequential", seq.error),
                                                 ("programmatic", prog.error)) if err)
        else:
            try:
                agree = bool(wf.check(seq.answer, prog.answer))
            except Exception as exc:
                agree = False
                detail = f"check failed: {type(exc).__name__}: {exc}"
            else:
                detail = "" if agree else (
                    f"answers differ: sequential {_short(seq.answer)} vs "
                    f"programmatic {_short(prog.answer)}")
        if wf.mutates:
            self.fx.reset_project()
        return WorkflowResult(wf.name, wf.family, seq, prog, agree, detail)

    def run_all(self, workflows: Iterable[Workflow]) -> list[WorkflowResult]:
        return [self.run(wf) for wf in workflows]


def _short(value: Any) -> str:
    text = json.dumps(normalize(value))
    return text if len(text) <= 200 else text[:200] + "..."


def run_suite(workflows: Iterable[Workflow], *, config: Config | None = None,
              encoding: str = "o200k_base",
              progress: Callable[[WorkflowResult], None] | None = None,
              ) -> list[WorkflowResult]:
    """Run ``workflows`` both ways on fresh fixtures and a registry of the built-in tools.

    ``config`` (default: built-in defaults) is adjusted by :func:`bench_overrides`.
    """
    from execengine.bench.fixtures import Fixtures
    from execengine.bench.tokens import TokenCounter
    from execengine.config import Config
    from execengine.engine import Engine
    from execengine.registry import ToolRegistry

    counter = TokenCounter(encoding)
    out: list[WorkflowResult] = []
    with Fixtures() as fx:
        cfg = (config or Config()).with_overrides(bench_overrides(fx))
        with ToolRegistry.with_builtins(cfg, plugins=False) as registry, \
                Engine(cfg, registry):  # runs the registry's execute_code calls
            runner = Runner(registry, fx, counter)
            for wf in workflows:
                result = runner.run(wf)
                out.append(result)
                if progress is not None:
                    progress(result)
    return out
