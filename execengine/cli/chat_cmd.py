"""``execengine chat "prompt"``: run the reference agent loop once and print the answer."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from execengine._text import plural
from execengine.agent import ChatCompletionsClient, install_agent_handlers, run_conversation
from execengine.agent.pipeline import TurnOutcome
from execengine.approval import PromptApprover
from execengine.cli._common import config_from, print_json, registry_from
from execengine.context import CallContext
from execengine.engine import Engine

if TYPE_CHECKING:
    from execengine.context import CallContext


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "chat", help="ask a model, letting it call tools, and print its answer",
        description="Run the reference agent loop against an OpenAI-compatible "
        "chat-completions endpoint. The endpoint, model and key come from the options, then "
        "the config's agent section, then $OPENAI_BASE_URL, $EXECENGINE_MODEL and the "
        "variable named by agent.api_key_env.")
    p.add_argument("prompt", help="the user's message")
    p.add_argument("--base-url", metavar="URL", help="endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", metavar="NAME", help="model name")
    p.add_argument("--toolsets", metavar="A,B", action="append",
                   help="toolsets offered (comma-separated, repeatable; default: config)")
    p.add_argument("--max-iterations", type=int, metavar="N",
                   help="model calls allowed (default: agent.max_iterations)")
    p.add_argument("--system", metavar="TEXT", help="a system prompt")
    p.add_argument("--json", action="store_true",
                   help="print the whole result (answer, tool calls, messages) as JSON")
    p.set_defaults(func=run_chat)


def _terminal_approver(config: Any) -> CallContext | None:
    """On a terminal, dangerous commands and unconfined scripts are asked about there (the
    question on stderr, the answer from stdin); otherwise the approval policy decides."""
    if not sys.stdin.isatty():
        return None

    return CallContext(approver=PromptApprover(sys.stdin, sys.stderr,
                                               timeout=config.approvals.timeout))


def run_chat(args: argparse.Namespace) -> int:

    if args.max_iterations is not None and args.max_iterations < 1:
        print("execengine: error: --max-iterations must be at least 1", file=sys.stderr)
        return 2
    config = config_from(args)
    toolsets = None
    if args.toolsets:
        toolsets = [t.strip() for group in args.toolsets for t in group.split(",") if t.strip()]
    client = ChatCompletionsClient.from_config(config, base_url=args.base_url, model=args.model)

    def progress(outcome: TurnOutcome) -> None:
        if args.json:
            return
        for c in outcome.calls:
            fixed = f" (repaired from {c.requested_name!r})" if c.repair else ""
            print(f"  [tool] {c.name or c.requested_name}{fixed}: {c.status}", file=sys.stderr)

    with registry_from(args, config) as registry:
        if toolsets is not None:
            registry.resolve_toolsets(toolsets)  # unknown names fail before any model call
        install_agent_handlers(registry)
        with Engine(config, registry):  # runs the registry's execute_code calls
            result = run_conversation(
                args.prompt, registry=registry, model=client, toolsets=toolsets,
                system_prompt=args.system, max_iterations=args.max_iterations,
                on_turn=progress, context=_terminal_approver(config),
            )
    ok = result.stop_reason in ("answer", "budget")
    if args.json:
        print_json({
            "final_answer": result.final_answer,
            "stop_reason": result.stop_reason,
            "iterations": result.iterations,
            "grace_call": result.grace_call,
            "error": result.error or None,
            "usage": dict(result.usage),
            "tool_calls": [
                {"id": c.id, "name": c.name, "requested_name": c.requested_name,
                 "status": c.status, "repair": c.repair or None, "executed": c.executed}
                for c in result.tool_calls
            ],
            "messages": result.messages,
        })
        return 0 if ok else 1
    if result.stop_reason == "error":
        print(f"execengine: error: {result.error}", file=sys.stderr)
        return 1
    if result.stop_reason == "empty":
        print("execengine: the model gave no answer", file=sys.stderr)
        return 1
    if result.grace_call:
        print(f"  [budget] {plural(result.iterations - 1, 'model call')} used; answer forced",
              file=sys.stderr)
    print(result.final_answer)
    return 0
