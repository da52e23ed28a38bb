"""execengine: a sandboxed code-execution engine for programmatic tool calling.

Where things live:

- ``config`` (+ ``_configload``): the typed configuration and the YAML loader.
- ``registry`` (tools and dispatching a call), ``toolsets``, ``schema``, ``discovery``: the
  tool runtime; ``policy`` (what a tool may be used for) and ``context`` (what a call
  carries).
- ``tools/``: built-in tool modules (listed in ``discovery.BUILTIN_TOOL_MODULES``), helpers in
  ``fileops/``, ``terminal/``, ``approval/`` and ``web/``.
- ``engine/`` (execute_code), ``rpc/`` (the host end of the ZMTP RPC), ``launch/`` (the
  launcher seam, level ``none``) and ``isolation/`` (levels ``restricted`` and ``isolated``).
- ``agent/``: the agent-side tool-call pipeline and a reference agent loop.
- ``batch/``: batch runs from a JSONL file, on local threads or a Ray cluster.
- ``bench/``: the token-savings and speed benchmark harness.
- ``cli/``: the ``execengine`` command.

The child-side runtime is the top-level ``sandbox/`` folder and the Jinja templates are in
``stubs/``; both ship inside the wheel (see ``_resources``).

Public names load on first use (PEP 562): ``import execengine`` stays cheap and does no I/O.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from execengine.agent import (
        ChatCompletionsClient,
        ConversationResult,
        ToolCallPipeline,
        install_agent_handlers,
        repair_transcript,
        run_conversation,
    )
    from execengine.approval import (
        ApprovalRequest,
        Approver,
        CallbackApprover,
        PolicyApprover,
        PromptApprover,
        SmartApprover,
        check_command,
    )
    from execengine.config import Config, load_config
    from execengine.context import CallContext, ToolContext
    from execengine.discovery import ToolSpecs
    from execengine.engine import Engine, ExecutionResult, aexecute_code, execute_code
    from execengine.errors import (
        ConfigError,
        ExecEngineError,
        FileOpError,
        HandshakeError,
        IsolationError,
        ModelError,
        PluginError,
        SandboxError,
        SchemaError,
        TerminalError,
        ToolConflictError,
        ToolError,
        TransportError,
        UnknownToolError,
        UnknownToolsetError,
        WebError,
    )
    from execengine.launch import Child, Launcher, LaunchLimits, LaunchSpec
    from execengine.launch.factory import make_launcher
    from execengine.policy import ToolPolicy
    from execengine.registry import (
        Availability,
        Refuse,
        ToolEntry,
        ToolRegistry,
        default_registry,
        get_tool_definitions,
        handle_function_call,
    )
    from execengine.toolsets import Toolset

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "ApprovalRequest": "execengine.approval",
    "Approver": "execengine.approval",
    "Availability": "execengine.registry",
    "CallContext": "execengine.context",
    "CallbackApprover": "execengine.approval",
    "ChatCompletionsClient": "execengine.agent",
    "Child": "execengine.launch",
    "Config": "execengine.config",
    "ConfigError": "execengine.errors",
    "ConversationResult": "execengine.agent",
    "Engine": "execengine.engine",
    "ExecEngineError": "execengine.errors",
    "ExecutionResult": "execengine.engine",
    "FileOpError": "execengine.errors",
    "HandshakeError": "execengine.errors",
    "IsolationError": "execengine.errors",
    "LaunchLimits": "execengine.launch",
    "LaunchSpec": "execengine.launch",
    "Launcher": "execengine.launch",
    "ModelError": "execengine.errors",
    "PluginError": "execengine.errors",
    "PolicyApprover": "execengine.approval",
    "PromptApprover": "execengine.approval",
    "Refuse": "execengine.registry",
    "SandboxError": "execengine.errors",
    "SchemaError": "execengine.errors",
    "SmartApprover": "execengine.approval",
    "TerminalError": "execengine.errors",
    "ToolCallPipeline": "execengine.agent",
    "ToolConflictError": "execengine.errors",
    "ToolContext": "execengine.context",
    "ToolEntry": "execengine.registry",
    "ToolError": "execengine.errors",
    "ToolPolicy": "execengine.policy",
    "ToolRegistry": "execengine.registry",
    "ToolSpecs": "execengine.discovery",
    "Toolset": "execengine.toolsets",
    "TransportError": "execengine.errors",
    "UnknownToolError": "execengine.errors",
    "UnknownToolsetError": "execengine.errors",
    "WebError": "execengine.errors",
    "aexecute_code": "execengine.engine",
    "check_command": "execengine.approval",
    "default_registry": "execengine.registry",
    "execute_code": "execengine.engine",
    "get_tool_definitions": "execengine.registry",
    "handle_function_call": "execengine.registry",
    "install_agent_handlers": "execengine.agent",
    "load_config": "execengine.config",
    "make_launcher": "execengine.launch.factory",
    "repair_transcript": "execengine.agent",
    "run_conversation": "execengine.agent",
}

__all__ = [
    "ApprovalRequest",
    "Approver",
    "Availability",
    "CallContext",
    "CallbackApprover",
    "ChatCompletionsClient",
    "Child",
    "Config",
    "ConfigError",
    "ConversationResult",
    "Engine",
    "ExecEngineError",
    "ExecutionResult",
    "FileOpError",
    "HandshakeError",
    "IsolationError",
    "LaunchLimits",
    "LaunchSpec",
    "Launcher",
    "ModelError",
    "PluginError",
    "PolicyApprover",
    "PromptApprover",
    "Refuse",
    "SandboxError",
    "SchemaError",
    "SmartApprover",
    "TerminalError",
    "ToolCallPipeline",
    "ToolConflictError",
    "ToolContext",
    "ToolEntry",
    "ToolError",
    "ToolPolicy",
    "ToolRegistry",
    "ToolSpecs",
    "Toolset",
    "TransportError",
    "UnknownToolError",
    "UnknownToolsetError",
    "WebError",
    "__version__",
    "aexecute_code",
    "check_command",
    "default_registry",
    "execute_code",
    "get_tool_definitions",
    "handle_function_call",
    "install_agent_handlers",
    "load_config",
    "make_launcher",
    "repair_transcript",
    "run_conversation",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'execengine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
