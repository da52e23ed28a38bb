"""The terminal: shell commands behind a small backend interface.

``backend`` (the interface and result values), ``local`` (bash on this machine), ``fake``
(scripted, for tests), ``session`` (per-registry state: working directories, processes),
``confined`` (a command in an execution's or the agent's sandbox),
``procs`` / ``_pump`` / ``output`` (spawning, killing, reading, bounding output).
"""

from __future__ import annotations

from execengine.errors import TerminalError
from execengine.terminal.backend import (
    CommandResult,
    LogChunk,
    ProcessInfo,
    TerminalBackend,
)
from execengine.terminal.session import TerminalService

__all__ = [
    "CommandResult",
    "LogChunk",
    "ProcessInfo",
    "TerminalBackend",
    "TerminalError",
    "TerminalService",
]
