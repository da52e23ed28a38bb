"""The tool-call pipeline: from "the model answered with tool calls" to "results appended".

:class:`ToolCallPipeline` takes one assistant message (OpenAI or Anthropic shape) and

1. normalises it (:mod:`~execengine.agent.messages`): stable ids, reasoning split off;
2. resolves each tool name against the tools the session exposed (:mod:`~.names`);
3. parses and validates the arguments (:mod:`~.arguments`), never running truncated calls;
4. applies the per-turn guards (:mod:`~.guards`): duplicates run once, delegate cap;
5. runs the remaining calls through ``registry.dispatch``, in parallel when safe
   (:mod:`~.batch`);
6. returns the assistant message to append and one ``role=tool`` message per call, in the
   model's order, plus a typed record of every call.

Every call gets exactly one result message, whatever happened to it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from execengine.agent.arguments import check_arguments
from execengine.agent.batch import (
    BatchPlan,
    ParallelPolicy,
    plan_batch,
    run_parallel,
    run_sequential,
)
from execengine.agent.guards import apply_guards
from execengine.agent.messages import AssistantTurn, ToolCall, history_ids, normalize_assistant
from execengine.agent.names import DEFAULT_CUTOFF, resolve_tool_name
from execengine.context import CallContext
from execengine.registry import ToolRegistry, error_result
from execengine.schema import NAME_RE

CallStatus = Literal[
    "ok",                 # ran; the tool returned a result
    "tool_error",         # ran; the tool's result is an {"error": ...} object
    "unknown_tool",       # no exposed tool fits the name
    "truncated",          # arguments cut off: not run
    "invalid_json",       # arguments not parseable: not run
    "not_object",         # arguments parse to something other than an object: not run
    "invalid_arguments",  # schema violations: not run
    "duplicate",          # same as an earlier call of the turn: shares its result
    "refused",            # a per-turn cap refused it
    "timeout",            # the parallel batch deadline passed while it ran
]


@dataclass(frozen=True)
class CallOutcome:
    """What happened to one tool call."""

    id: str
    requested_name: str
    #: the exposed tool it resolved to (None when unknown)
    name: str | None
    status: CallStatus
    result: str
    raw_arguments: Any = None
    args: dict[str, Any] | None = None
    #: how the name was repaired ("" when it was exact)
    repair: str = ""
    duplicate_of: str | None = None
    executed: bool = False

    def message(self) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": self.id, "content": self.result}


@dataclass(frozen=True)
class TurnOutcome:
    turn: AssistantTurn
    #: the assistant message to append (tool names repaired)
    assistant_message: dict[str, Any]
    calls: tuple[CallOutcome, ...]
    plan: BatchPlan = field(default_factory=lambda: BatchPlan(False, "no calls"))

    @property
    def tool_messages(self) -> list[dict[str, Any]]:
        return [c.message() for c in self.calls]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The assistant message followed by its results, ready to extend a history."""
        return [self.assistant_message, *self.tool_messages]


def _definition_parts(defn: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    inner = defn.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else defn
    params = fn.get("parameters", fn.get("input_schema"))
    return str(fn.get("name")), params if isinstance(params, Mapping) else None


def history_name(name: str) -> str:
    """A name providers accept in a history, for a call whose name matched no tool.

    The model's own spelling is kept when it is a valid function name; otherwise invalid
    characters become ``_`` (the error result still quotes the original).
    """
    if NAME_RE.match(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64].strip("_")
    return cleaned or "unknown_tool"


def _is_error(text: str) -> bool:
    if not text.startswith("{"):
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and set(value) >= {"error"} and bool(value["error"])


class ToolCallPipeline:
    """Validate, repair and execute the tool calls of assistant messages.

    ``tools`` are the definitions the session served to the model (OpenAI or Anthropic
    format); the default is ``registry.get_tool_definitions()``. Only those names are valid.
    ``context`` goes with every dispatch (e.g. an ``approver``, a ``cwd``); ``task_id`` sets
    its task. ``policy`` (default: what the registered tools declare) decides batching.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        tools: Iterable[Mapping[str, Any]] | None = None,
        task_id: str | None = None,
        policy: ParallelPolicy | None = None,
        name_cutoff: float = DEFAULT_CUTOFF,
        context: CallContext | None = None,
    ) -> None:
        self.registry = registry
        self.config = registry.config.agent
        defs = registry.get_tool_definitions() if tools is None else list(tools)
        self.parameters: dict[str, Mapping[str, Any] | None] = dict(
            _definition_parts(d) for d in defs
        )
        context = (context or CallContext()).replace(origin="agent")
        if task_id is not None:
            context = context.replace(task_id=task_id)
        self.context = context
        self.task_id = context.task_id
        self.policy = policy or ParallelPolicy.from_registry(registry)
        self.name_cutoff = name_cutoff

    def _cwd(self) -> str:
        explicit = self.context.cwd
        if explicit:
            return explicit
        return self.registry.services.workdirs.get(self.task_id or "default")

    def normalize(
        self, message: Mapping[str, Any] | AssistantTurn, *, finish_reason: str | None = None,
        history: Sequence[Mapping[str, Any]] = (), turn: int = 0,
    ) -> AssistantTurn:
        if isinstance(message, AssistantTurn):
            if finish_reason and not message.finish_reason:
                return replace(message, finish_reason=finish_reason)
            return message
        return normalize_assistant(message, finish_reason=finish_reason, turn=turn,
                                   taken_ids=history_ids(history))

    def process(
        self,
        message: Mapping[str, Any] | AssistantTurn,
        *,
        finish_reason: str | None = None,
        history: Sequence[Mapping[str, Any]] = (),
        turn: int = 0,
    ) -> TurnOutcome:
        """Run one assistant message's tool calls; see the module docstring."""
        t = self.normalize(message, finish_reason=finish_reason, history=history, turn=turn)
        outcomes: dict[str, CallOutcome] = {}
        runnable: list[tuple[ToolCall, str, dict[str, Any], str]] = []
        for call in t.tool_calls:
            res = resolve_tool_name(call.name, self.parameters, cutoff=self.name_cutoff)
            base = CallOutcome(call.id, call.name, res.name, "unknown_tool",
                               error_result(res.error),
                               raw_arguments=call.arguments, repair=res.repair)
            if res.name is None:
                outcomes[call.id] = base
                continue
            parsed = check_arguments(call.arguments, res.name, self.parameters[res.name],
                                     truncated_response=t.truncated)
            if not parsed.ok:
                outcomes[call.id] = replace(base, status=parsed.status,
                                            result=error_result(parsed.error), args=parsed.args)
                continue
            assert parsed.args is not None
            runnable.append((call, res.name, parsed.args, res.repair))

        verdicts = apply_guards([(c.id, n, a) for c, n, a, _ in runnable],
                                max_delegate_calls=self.config.max_delegate_calls)
        to_run = [r for r in runnable
                  if r[0].id not in verdicts.duplicates and r[0].id not in verdicts.refused]
        plan = plan_batch([(n, a) for _, n, a, _ in to_run], policy=self.policy,
                          cwd=self._cwd() if len(to_run) > 1 else None)
        jobs = [self._job(n, a) for _, n, a, _ in to_run]
        if plan.parallel:
            batch = run_parallel(jobs, max_workers=self.config.max_parallel_tools,
                                 timeout=self.config.batch_timeout,
                                 names=[n for _, n, _, _ in to_run])
        else:
            batch = run_sequential(jobs)
        for i, ((call, name, args, repair), text) in enumerate(
            zip(to_run, batch.results, strict=True)
        ):
            status: CallStatus = ("timeout" if i in batch.timed_out
                                  else "tool_error" if _is_error(text) else "ok")
            outcomes[call.id] = CallOutcome(call.id, call.name, name, status, text,
                                            raw_arguments=call.arguments, args=args,
                                            repair=repair, executed=True)
        for call, name, args, repair in runnable:
            if call.id in verdicts.refused:
                outcomes[call.id] = CallOutcome(
                    call.id, call.name, name, "refused",
                    error_result(verdicts.refused[call.id]), raw_arguments=call.arguments,
                    args=args, repair=repair)
        for call, name, args, repair in runnable:
            first = verdicts.duplicates.get(call.id)
            if first is not None:
                outcomes[call.id] = CallOutcome(
                    call.id, call.name, name, "duplicate", outcomes[first].result,
                    raw_arguments=call.arguments, args=args, repair=repair,
                    duplicate_of=first)

        ordered = tuple(outcomes[c.id] for c in t.tool_calls)
        repaired = [replace(c, name=o.name or history_name(c.name))
                    for c, o in zip(t.tool_calls, ordered, strict=True)]
        return TurnOutcome(t, t.to_openai(repaired), ordered, plan)

    async def aprocess(
        self,
        message: Mapping[str, Any] | AssistantTurn,
        *,
        finish_reason: str | None = None,
        history: Sequence[Mapping[str, Any]] = (),
        turn: int = 0,
    ) -> TurnOutcome:
        """:meth:`process` for hosts running an event loop (runs in a worker thread)."""
        return await asyncio.to_thread(self.process, message, finish_reason=finish_reason,
                                       history=history, turn=turn)

    def _job(self, name: str, args: dict[str, Any]) -> Any:
        def run() -> str:
            return self.registry.dispatch(name, args, self.context)
        return run
