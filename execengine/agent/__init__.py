"""The agent side: from a model's tool calls to results in the history, and a reference loop.

Where things live:

* :mod:`.messages`   normalise an assistant message (ids, reasoning, OpenAI/Anthropic);
* :mod:`.names`      repair misspelled tool names;
* :mod:`.arguments`  parse, detect truncation, validate against the schema;
* :mod:`.guards`     duplicate calls run once; delegate_task cap;
* :mod:`.batch`      parallel only when safe, bounded pool, batch deadline;
* :mod:`.pipeline`   all of the above for one assistant message (:class:`ToolCallPipeline`);
* :mod:`.transcript` repair a history before a model call;
* :mod:`.handlers`   agent-level tools (todo, memory) routed to host handlers;
* :mod:`.client`     the model seam: HTTP chat-completions client and a scripted fake;
* :mod:`.loop`       :func:`run_conversation`.
"""

from __future__ import annotations

from execengine.agent.arguments import ParsedArguments, check_arguments, parse_arguments
from execengine.agent.batch import BatchPlan, ParallelPolicy, plan_batch
from execengine.agent.client import (
    ChatCompletionsClient,
    ChatModel,
    ChatResponse,
    ScriptedModel,
)
from execengine.agent.handlers import MemoryStore, TodoStore, install_agent_handlers
from execengine.agent.loop import ConversationResult, run_conversation
from execengine.agent.messages import AssistantTurn, ToolCall, normalize_assistant
from execengine.agent.names import NameResolution, resolve_tool_name
from execengine.agent.pipeline import CallOutcome, ToolCallPipeline, TurnOutcome
from execengine.agent.transcript import TranscriptRepair, repair_transcript
from execengine.errors import ModelError

__all__ = [
    "AssistantTurn",
    "BatchPlan",
    "CallOutcome",
    "ChatCompletionsClient",
    "ChatModel",
    "ChatResponse",
    "ConversationResult",
    "MemoryStore",
    "ModelError",
    "NameResolution",
    "ParallelPolicy",
    "ParsedArguments",
    "ScriptedModel",
    "TodoStore",
    "ToolCall",
    "ToolCallPipeline",
    "TranscriptRepair",
    "TurnOutcome",
    "check_arguments",
    "install_agent_handlers",
    "normalize_assistant",
    "parse_arguments",
    "plan_batch",
    "repair_transcript",
    "resolve_tool_name",
    "run_conversation",
]
