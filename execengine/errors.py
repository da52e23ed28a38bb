"""Every exception execengine raises, under one root.

Expected outcomes of running a script (it raised, timed out, hit a limit) are *values*
(:class:`execengine.ExecutionResult`), never exceptions. These classes are for the engine's
own breakage, for user mistakes that must stop the program (a bad config file, a malformed
tool schema), and for failures inside tools that the dispatcher turns into results.

    ExecEngineError
    ├── ConfigError                 bad configuration: file, key path and what was expected
    ├── InvalidArgumentError        an API call's argument is wrong (code that is not text,
    │                               a cwd that is not a folder)
    ├── ToolError                   a tool definition or lookup is wrong
    │   ├── SchemaError             a tool schema is not a valid OpenAI function schema
    │   ├── ToolConflictError       a tool name is already held by another toolset
    │   ├── UnknownToolError        no tool of that name (with suggestions)
    │   └── UnknownToolsetError     no toolset of that name (with suggestions)
    ├── TerminalError               the terminal backend cannot run anything
    ├── FileOpError                 a file tool cannot do what was asked
    │   ├── PathEscapeError         a path leads out of the folder it must stay beneath
    │   ├── PatternUnsupported      ripgrep cannot compile a pattern (the Python search takes over)
    │   └── SearchTooSlowError      a search pattern or glob matched for longer than its budget
    ├── WebError                    a page or a search provider could not be used
    │   ├── InvalidURLError         not an http(s) URL, credentials in it, bad host or port
    │   ├── BlockedAddressError     the host resolves to an address the SSRF guard refuses
    │   │   └── DomainRefusedError  the network allow-list refuses the host
    │   ├── FetchTimeoutError       no complete answer within ``web.timeout``
    │   ├── ConnectionFailedError   DNS, TCP or TLS failure, or the server broke the reply
    │   ├── RedirectError           too many redirects, a loop, or one we will not follow
    │   └── ProviderError           a search provider is misconfigured or answered badly
    ├── PluginError                 a plugin could not be loaded or misbehaved
    ├── IntegrationError            a framework integration was given what it cannot take
    │   └── MissingExtraError       its framework is not installed (also an ImportError)
    ├── McpError                    an MCP server cannot be used: it did not start, crashed,
    │                               or the SDK extra is not installed
    ├── ModelError                  the agent loop's model endpoint failed
    ├── MemoryFileError             the reference memory tool's file is unusable
    ├── BenchError                  the benchmark harness cannot run
    │   └── WorkflowError           a workflow is malformed, or its two runs disagree
    ├── BatchError                  a batch cannot run: output unusable, Ray missing or
    │                               unreachable (bad task lines are results, not this)
    └── SandboxError                the execution engine itself failed (not the script)
        ├── TransportError          the RPC channel failed (bind, frame, protocol)
        │   └── ProtocolViolation   one peer broke ZMTP: only its connection is closed
        ├── HandshakeError          a helper process did not say it was ready, or said it wrongly
        ├── IsolationError          a required isolation layer is not available here
        └── RemoteError             the ssh backend's remote is unreachable or refused

Errors inside tools (FileOpError, WebError, TerminalError) never leave the dispatcher: they
become ``{"error": ...}`` results the model or the script reads; their messages are written
for the model and never contain secrets. A script's child that never says hello is a value
too (an ``error`` result), not a HandshakeError.

Lower-layer errors (``OSError``, ``yaml.YAMLError``) are translated where they enter the
library, with ``raise ... from exc``. ``tests/test_errors.py`` checks that this drawing and
the classes agree.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

#: HTTP statuses after which a model call may succeed when repeated
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class ExecEngineError(Exception):
    """Root of every exception execengine raises on purpose."""


class ConfigError(ExecEngineError):
    """The configuration is invalid.

    ``path`` is the file (or ``None`` for values passed in code), ``key`` the dotted key path
    (``code_execution.timeout``), ``line``/``column`` are 1-based when known. A file with
    several problems raises one error listing them all (:meth:`several`); ``problems`` holds
    each (the error itself when it is the only one).
    """

    problems: tuple[ConfigError, ...]

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
        self.problems = (self,)

    @classmethod
    def several(cls, problems: Iterable[ConfigError], path: str | None = None) -> ConfigError:
        """One error for every problem of a file, each on its own line with its
        ``file:line:column: key:``; the problem itself when there is one."""
        found = tuple(problems)
        if len(found) == 1:
            return found[0]
        lines = "".join(f"\n  {p}" for p in found)
        error = cls(f"{len(found)} problems:{lines}", path=path)
        error.problems = found
        return error


class InvalidArgumentError(ExecEngineError, ValueError):
    """An argument of an API call is wrong: what was given and what is expected."""


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


class TerminalError(ExecEngineError):
    """The terminal backend cannot run anything (no bash, bad working directory, closed)."""


class FileOpError(ExecEngineError):
    """A file operation cannot be done; ``fields`` are extra keys for the result dict.

    It never leaves a tool: the handlers catch it and return :meth:`to_dict`
    (``{"error": ..., **fields}``), which is what a model or a script sees.
    """

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.message, **self.fields}



class PathEscapeError(FileOpError):
    """A path leads out of the folder it must stay beneath: an absolute or outside symlink,
    ``..`` above it, a ``/proc/<pid>/fd``-style magic link (execengine.confine.beneath)."""

class PatternUnsupported(FileOpError):
    """ripgrep cannot compile a pattern Python accepts; the Python backend takes over."""


class SearchTooSlowError(FileOpError):
    """A script's search pattern or glob matched for longer than its time budget (it
    backtracks catastrophically); execengine.fileops.search."""


class WebError(ExecEngineError):
    """A web request or search failed (an expected outcome the tools report as a value)."""


class InvalidURLError(WebError):
    """The URL cannot be fetched: scheme, host, port or credentials."""


class BlockedAddressError(WebError):
    """The host resolves to a loopback, private, link-local or otherwise internal address."""


class DomainRefusedError(BlockedAddressError):
    """The execution's network allow-list refuses the host (see execengine.confine)."""


class FetchTimeoutError(WebError):
    """The server did not answer completely within the time limit."""


class ConnectionFailedError(WebError):
    """Name resolution, connection, TLS or the HTTP exchange failed."""


class RedirectError(WebError):
    """A redirect chain was too long, looped, or led somewhere it may not go."""


class ProviderError(WebError):
    """A search provider is misconfigured or its answer could not be used."""


class PluginError(ExecEngineError):
    """A plugin could not be loaded."""


class IntegrationError(ExecEngineError):
    """A framework integration (``execengine.integrations``) was given what it cannot take."""


class MissingExtraError(IntegrationError, ImportError):
    """A framework integration's framework is not installed; the message names the extra
    (an ImportError too, so ``except ImportError`` around an optional import catches it)."""


class McpError(ExecEngineError):
    """An MCP server cannot be used: not installed (the ``mcp`` extra), did not start or
    finish its handshake in time, crashed, or its connection failed."""


class ModelError(ExecEngineError):
    """The model endpoint failed: unreachable, an HTTP error, or a malformed response."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "",
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        #: a later attempt may succeed (rate limit, server error, connection failure)
        self.retryable = retryable or status in RETRY_STATUSES


class MemoryFileError(ExecEngineError):
    """The memory file is unusable; the message is shown to the model."""


class BenchError(ExecEngineError):
    """The benchmark harness cannot do what was asked (with the reason and the fix)."""


class WorkflowError(BenchError):
    """A workflow definition is malformed (which file, which key, what was expected)."""


class BatchError(ExecEngineError):
    """A batch run cannot start or continue (not a task's own failure)."""


class SandboxError(ExecEngineError):
    """The execution engine itself failed (not the script)."""


class TransportError(SandboxError):
    """The RPC transport between host and child failed."""


class ProtocolViolation(TransportError):
    """A peer broke ZMTP (bad greeting, framing or size); the server closes only that
    connection. Raised by :mod:`execengine.rpc.connection`, caught by the server's loop."""


class HandshakeError(SandboxError):
    """A helper process (the sandbox spawner) did not say it was ready, or said it wrongly."""


class IsolationError(SandboxError):
    """A required isolation layer is unavailable on this host."""


class RemoteError(SandboxError):
    """The remote of ``terminal.backend: ssh`` cannot be reached or refused what was asked
    (host key, authentication, forwarding: the message says which)."""


def did_you_mean(word: str, candidates: Iterable[str], *, cutoff: float = 0.6) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest candidate, or ``""``."""
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return f" (did you mean {matches[0]!r}?)" if matches else ""
