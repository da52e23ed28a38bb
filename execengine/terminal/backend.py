"""The terminal backend seam: where shell commands run.

A :class:`TerminalBackend` runs a foreground command to completion, starts background
processes and manages them, and reports each command's final working directory so that
``cd`` sticks. The local backend (:mod:`execengine.terminal.local`) runs ``bash`` on this
machine; :class:`execengine.terminal.fake.FakeBackend` answers from a script for tests of
the layers above; remote backends (SSH, containers) can implement the same few methods.

Outcomes are values: a command that fails or times out is a :class:`CommandResult`, not an
exception. Only a backend that cannot start anything at all raises
:class:`execengine.errors.TerminalError`.
"""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

#: exit code reported for a command killed at its timeout (as coreutils ``timeout`` does)
TIMEOUT_EXIT_CODE = 124
#: a command stopped because its caller was interrupted (its execution ended, say)
INTERRUPTED_EXIT_CODE = 130
INTERRUPTED_TEXT = "Command interrupted (its caller stopped) and was killed."


@dataclass(frozen=True)
class CommandResult:
    """What a foreground command did."""

    output: str
    exit_code: int
    duration: float
    #: the working directory when the command ended (``None``: unknown, keep the old one)
    cwd: str | None = None
    timed_out: bool = False
    truncated: bool = False
    #: characters the command printed in total (``len(output)`` unless truncated)
    total_chars: int = 0


@dataclass(frozen=True)
class ProcessInfo:
    """A snapshot of one background process."""

    id: str
    command: str
    pid: int
    cwd: str
    started: float
    running: bool
    exit_code: int | None
    pty: bool
    #: characters of output produced so far (absolute offset of the end of the log)
    output_chars: int = 0


@dataclass(frozen=True)
class LogChunk:
    """Output of a background process after some offset."""

    text: str
    #: pass this back as ``since`` to get only what follows
    offset: int
    #: characters between ``since`` and the oldest kept one that the ring buffer dropped
    dropped: int = 0


class TerminalBackend(abc.ABC):
    """Runs commands for one registry; background processes are keyed by ``task``."""

    @abc.abstractmethod
    def run(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        timeout: float,
        max_output_chars: int,
        pty: bool = False,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        """Run ``command`` in ``cwd`` until it ends, ``timeout`` seconds pass or ``cancel``
        is set (then it is stopped as on a timeout, and the result says interrupted)."""

    @abc.abstractmethod
    def start(
        self, command: str, *, task: str, cwd: str, env: Mapping[str, str], pty: bool = False
    ) -> ProcessInfo:
        """Start ``command`` in the background; returns at once."""

    @abc.abstractmethod
    def processes(self, task: str | None = None) -> list[ProcessInfo]:
        """Background processes of ``task`` (all tasks when ``None``), oldest first."""

    @abc.abstractmethod
    def poll(self, proc_id: str, *, task: str) -> ProcessInfo:
        """Current status; ``KeyError`` for an unknown id."""

    @abc.abstractmethod
    def read(self, proc_id: str, *, task: str, since: int | None = None) -> LogChunk:
        """Output after ``since`` (default: what this caller has not read yet)."""

    @abc.abstractmethod
    def wait(self, proc_id: str, *, task: str, timeout: float) -> ProcessInfo:
        """Wait up to ``timeout`` seconds for the process to end; its status either way."""

    @abc.abstractmethod
    def kill(self, proc_id: str, *, task: str) -> ProcessInfo:
        """Stop the process and everything it started; its final status."""

    @abc.abstractmethod
    def close_task(self, task: str) -> None:
        """Kill every background process of ``task``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Kill every background process. Idempotent."""

    # -- where paths live (a remote backend's are on the remote) -----------------------

    def default_cwd(self) -> str | None:
        """The working directory of a new task, when the backend decides it (else None)."""
        return None

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory where commands run."""
        return os.path.isdir(path)

    def expanduser(self, path: str) -> str:
        return os.path.expanduser(path)

    def __enter__(self) -> TerminalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
