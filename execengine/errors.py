"""Exceptions raised by execengine itself.

Expected outcomes of running a script (it raised, timed out, hit a limit) are *values*
(:class:`execengine.ExecutionResult`), never exceptions. These classes are for the engine's
own breakage and for user mistakes that must stop the program (a bad config file, a malformed
tool schema).

    ExecEngineError
    ├── ConfigError                 bad config.yaml: file, key path and what was expected
    ├── ToolError
    │   ├── SchemaError             a tool schema is not a valid OpenAI function schema
    │   ├── ToolConflictError       a tool name is already held by another toolset
    │   ├── UnknownToolError        no tool of that name (with suggestions)
    │   ├── UnknownToolsetError     no toolset of that name (with suggestions)
    │   └── TerminalError           the terminal backend failed (execengine.terminal)
    ├── FileOpError                 a file tool cannot do what was asked (execengine.fileops)
    ├── WebError                    a page or search provider unusable (execengine.web.errors
    │                               draws its subtree: blocked address, timeout, redirect...)
    ├── PluginError                 a plugin could not be loaded or misbehaved
    ├── ModelError                  the agent loop's model endpoint failed (execengine.agent)
    ├── MemoryFileError             the reference memory tool's file is unusable
    ├── BenchError                  the benchmark harness cannot run (execengine.bench)
    │   └── WorkflowError           a workflow is malformed, or its two runs disagree
    └── SandboxError
        ├── TransportError          the RPC channel failed (bind, frame, protocol)
        ├── HandshakeError          the child did not say hello in time, or said it wrongly
        └── IsolationError          a required isolation layer is not available here

Errors inside tools (FileOpError, WebError, TerminalError) never leave the dispatcher: they
become ``{"error": ...}`` results the model or the script reads.

Lower-layer errors (``OSError``, ``yaml.YAMLError``) are translated where
they enter the library, with ``raise ... from exc``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ExecEngineError(Exception):
    """Root of every exception execengine raises on purpose."""


class ConfigError(ExecEngineError):
    """The configuration is invalid.

    ``path`` is the file (or ``None`` for values passed in code), ``key`` the dotted key path
    (``code_execution.timeout``), ``line``/``column`` are 1-based when known.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        key: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.path = path
        self.key = key
        self.line = line
        self.column = column
        self.reason = message
        where = path or "<config>"
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        prefix = f"{where}: " + (f"{key}: " if key else "")
        super().__init__(prefix + message)


class ToolError(ExecEngineError):
    """A problem with a tool definition or lookup."""


class SchemaError(ToolError):
    """A tool schema is malformed."""


class ToolConflictError(ToolError):
    """A tool name is already registered by another toolset."""


class UnknownToolError(ToolError, KeyError):
    """No tool of that name is registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownToolsetError(ToolError, KeyError):
    """No toolset of that name exists."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PluginError(ExecEngineError):
    """A plugin could not be loaded."""


class SandboxError(ExecEngineError):
    """The execution engine itself failed (not the script)."""


class TransportError(SandboxError):
    """The RPC transport between host and child failed."""


class HandshakeError(SandboxError):
    """The child did not complete the hello handshake."""


class IsolationError(SandboxError):
    """A required isolation layer is unavailable on this host."""


def did_you_mean(word: str, candidates: Iterable[str], *, cutoff: float = 0.6) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest candidate, or ``""``."""
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return f" (did you mean {matches[0]!r}?)" if matches else ""
