"""The reference agent loop: model call, tool calls, repeat, until an answer.

:func:`run_conversation` is deliberately small; frameworks with their own loop use
:class:`~execengine.agent.pipeline.ToolCallPipeline` and
:func:`~execengine.agent.transcript.repair_transcript` directly. Per model call:

1. repair the transcript (every call answered, no orphan results);
2. call the model with the session's tool definitions;
3. tool calls → run them through the pipeline, append the results, go on;
4. visible text and no calls → that is the final answer;
5. nothing visible (empty, or reasoning only) → ask again with a nudge, up to
   ``agent.empty_retries`` times.

``agent.max_iterations`` bounds the model calls. When it is used up while the model is still
calling tools, one grace call is made without tools, asking for the answer from what it has.
A model endpoint failure ends the conversation with ``stop_reason="error"``; the messages so
far are kept in the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from execengine.agent.client import ChatCompletionsClient, ChatModel
from execengine.agent.messages import AssistantTurn
from execengine.agent.pipeline import CallOutcome, ToolCallPipeline, TurnOutcome
from execengine.agent.transcript import repair_transcript
from execengine.context import CallContext
from execengine.errors import ModelError
from execengine.registry import ToolRegistry

StopReason = Literal["answer", "budget", "empty", "error"]

EMPTY_NUDGE = ("Your last reply was empty. Continue the task: call a tool, or give your "
               "final answer as text.")
GRACE_PROMPT = ("You have used all {n} steps of your budget, so tools are no longer "
                "available. Give your final answer now, from what you have found so far; "
                "say what is unfinished.")


@dataclass(frozen=True)
class ConversationResult:
    messages: list[dict[str, Any]]
    final_answer: str
    stop_reason: StopReason
    #: model calls made (the grace call and empty retries included)
    iterations: int
    tool_calls: tuple[CallOutcome, ...] = ()
    reasoning: str = ""
    grace_call: bool = False
    error: str = ""
    #: summed token counts reported by the endpoint
    usage: Mapping[str, int] = field(default_factory=dict)
    #: transcript repairs made before model calls (placeholders + dropped results)
    transcript_repairs: int = 0


def _initial(prompt: str | Sequence[Mapping[str, Any]],
             system: str | None) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        msgs: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    else:
        msgs = [dict(m) for m in prompt]
    if system and not (msgs and msgs[0].get("role") == "system"):
        msgs.insert(0, {"role": "system", "content": system})
    return msgs


def _add_usage(total: dict[str, int], usage: Mapping[str, Any]) -> None:
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value


def run_conversation(
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    registry: ToolRegistry,
    model: ChatModel | None = None,
    toolsets: Iterable[str] | None = None,
    system_prompt: str | None = None,
    max_iterations: int | None = None,
    task_id: str | None = None,
    context: CallContext | None = None,
    pipeline: ToolCallPipeline | None = None,
    on_turn: Callable[[TurnOutcome], None] | None = None,
) -> ConversationResult:
    """Run a conversation to its final answer; see the module docstring.

    ``prompt`` is the user's message or a whole starting history (OpenAI format).
    ``model`` defaults to :meth:`ChatCompletionsClient.from_config`; ``toolsets`` selects
    the tools offered (default: the config's); ``on_turn`` sees every processed tool turn.
    """
    cfg = registry.config.agent
    budget = max_iterations if max_iterations is not None else cfg.max_iterations
    if budget < 1:
        raise ValueError("max_iterations must be at least 1")
    llm = model if model is not None else ChatCompletionsClient.from_config(registry.config)
    tools = registry.get_tool_definitions(toolsets)
    pipe = pipeline or ToolCallPipeline(registry, tools=tools, task_id=task_id,
                                        context=context)
    messages = _initial(prompt, system_prompt)
    calls: list[CallOutcome] = []
    usage: dict[str, int] = {}
    state = {"iterations": 0, "repairs": 0}
    empty_left = cfg.empty_retries

    def ask(offer: Sequence[Mapping[str, Any]] | None) -> AssistantTurn:
        nonlocal messages
        fixed = repair_transcript(messages)
        state["repairs"] += len(fixed.placeholders) + len(fixed.dropped)
        messages = fixed.messages
        resp = llm.complete(messages, offer)
        state["iterations"] += 1
        _add_usage(usage, resp.usage)
        return pipe.normalize(resp.message, finish_reason=resp.finish_reason,
                              history=messages, turn=state["iterations"])

    def result(answer: str, stop: StopReason, turn: AssistantTurn | None = None,
               **kw: Any) -> ConversationResult:
        return ConversationResult(
            messages, answer, stop, state["iterations"], tuple(calls),
            reasoning=turn.reasoning if turn else "", usage=usage,
            transcript_repairs=state["repairs"], **kw)

    turn: AssistantTurn | None = None
    try:
        while state["iterations"] < budget:
            turn = ask(tools)
            if turn.tool_calls:
                outcome = pipe.process(turn)
                messages.extend(outcome.messages)
                calls.extend(outcome.calls)
                if on_turn is not None:
                    on_turn(outcome)
                continue
            if turn.content.strip():
                messages.append(turn.to_openai())
                return result(turn.content, "answer", turn)
            if empty_left <= 0:
                return result("", "empty", turn)
            empty_left -= 1
            messages.append({"role": "user", "content": EMPTY_NUDGE})
        if turn is not None and not turn.tool_calls:
            return result("", "empty", turn)  # the budget ran out on empty replies
        messages.append({"role": "user", "content": GRACE_PROMPT.format(n=budget)})
        turn = ask(None)
        messages.append(turn.to_openai(calls=()))
        return result(turn.content, "budget", turn, grace_call=True)
    except ModelError as exc:
        return result("", "error", turn, error=str(exc))
