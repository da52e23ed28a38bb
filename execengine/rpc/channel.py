"""One execution's end of the RPC: its socket directory, secret, allowed tools and budget.

A :class:`Channel` is opened by :meth:`execengine.rpc.RpcServer.open` and closed by the
engine when the execution ends (the socket is unbound and its private directory removed).
The budget is checked and incremented under a lock, so concurrent calls from threads,
tasks and subprocesses of one script never overrun it.
"""

from __future__ import annotations

import hmac
import os
import shutil
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from execengine.errors import TransportError
from execengine.hostdirs import SOCKET_DIR_PREFIX as SOCKET_DIR_PREFIX
from execengine.hostdirs import make_dir, owner_tag

#: ``handler(tool, args) -> result text``; must not raise (errors are JSON text)
CallHandler = Callable[[str, dict[str, Any]], str]

#: sun_path limit of AF_UNIX addresses, including the terminating NUL
SUN_PATH_MAX = 108 if sys.platform.startswith("linux") else 104
SOCKET_NAME = "rpc.sock"


def unavailable_message(tool: str, allowed: Iterable[str]) -> str:
    return (f"Tool '{tool}' is not available in execute_code. "
            f"Available: {', '.join(sorted(allowed))}")


def limit_message(limit: int) -> str:
    return f"Tool call limit reached ({limit}). No more tool calls allowed in this execution."


def late_message() -> str:
    return ("Tool call refused: the execute_code cell that made it has ended (a thread the "
            "cell left running called after it returned).")


def socket_roots(base: str | None = None) -> list[str]:
    """Where socket directories are made: ``base``, or the temp dir then ``/tmp``."""
    return list(dict.fromkeys([base] if base else [tempfile.gettempdir(), "/tmp"]))


def make_socket_dir(base: str | None = None) -> str:
    """A new private (0700) directory whose ``rpc.sock`` path fits ``sun_path``.

    ``base`` defaults to the temp dir, falling back to ``/tmp`` when that is too long. The
    name carries the owner tag of :mod:`execengine.hostdirs`.
    """
    last = ""
    for root in socket_roots(base):
        # the name mkdtemp makes: prefix, owner tag, "-", 8 random characters
        path = os.path.join(root, f"{SOCKET_DIR_PREFIX}{owner_tag()}-XXXXXXXX", SOCKET_NAME)
        if len(os.fsencode(path)) < SUN_PATH_MAX:
            return make_dir(SOCKET_DIR_PREFIX, root)
        last = path
    raise TransportError(
        f"socket path {last!r} is longer than the platform limit of {SUN_PATH_MAX - 1} "
        "bytes; set TMPDIR to a shorter directory"
    )


class Transport(Protocol):
    """What serves a channel: the socket server, or its in-memory twin."""

    def release(self, channel: Channel) -> None:
        """Stop serving ``channel`` (called once by :meth:`Channel.close`)."""

    def expect_peer(self, channel: Channel, uids: Iterable[int]) -> None:
        """Only peers of these uids may talk on ``channel`` (checked before parsing)."""


class Channel:
    """The RPC state of one execution (thread-safe)."""

    def __init__(
        self,
        server: Transport,
        *,
        exec_id: str,
        token: str,
        allowed: Iterable[str],
        handler: CallHandler,
        max_tool_calls: int,
        socket_dir: str,
        max_parallel: int = 16,
    ) -> None:
        self.server = server
        self.exec_id = exec_id
        self._token = token.encode("ascii")
        self.allowed = frozenset(allowed)
        self.handler = handler
        self.max_tool_calls = max_tool_calls
        self.socket_dir = socket_dir
        self.socket_path = os.path.join(socket_dir, SOCKET_NAME)
        self.hello = threading.Event()
        self._lock = threading.Lock()
        self._calls = 0
        self._in_flight = 0
        self.max_parallel = max(1, max_parallel)
        self._running = 0  # calls of this execution on a host worker
        self._waiting: deque[Callable[[], None]] = deque()  # admitted, waiting for a slot
        self.closed = False
        #: messages wait for :meth:`expect_peer` (the child's uid) before being parsed
        self.check_peer = False
        # cells (session kernels): see open_cell
        self._cells = False
        self._cell_open = True
        self._cell_credential: bytes | None = None
        self.generation = 0
        #: times a client had to wait because the execution held its maximum of connections
        self.refused_connections = 0
        #: connections of this execution open now (they share its reply bound)
        self.peers = 0

    @property
    def endpoint(self) -> str:
        return f"ipc://{self.socket_path}"

    @property
    def tool_calls_made(self) -> int:
        with self._lock:
            return self._calls

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def expect_peer(self, uids: Iterable[int]) -> None:
        """Only processes of these uids may talk on this channel (see
        :meth:`RpcServer.expect_peer`)."""
        self.server.expect_peer(self, uids)

    def authenticate(self, exec_id: str, token: str) -> bool:
        """Constant-time check of a hello's credentials."""
        good_token = hmac.compare_digest(token.encode("utf-8", "replace"), self._token)
        good_exec = hmac.compare_digest(exec_id.encode("utf-8", "replace"),
                                        self.exec_id.encode("ascii"))
        return good_token and good_exec

    def admit(self, tool: str, credential: str | None = None) -> str | None:
        """Reserve one call of the budget; the refusal text when the call may not run.
        ``credential``: the cell's call credential the call carried (see
        :meth:`open_cell`)."""
        if tool not in self.allowed:
            return unavailable_message(tool, self.allowed)
        given = (credential or "").encode("utf-8", "replace")
        with self._lock:
            if not self._cell_open:
                return late_message()
            expected = self._cell_credential
            if expected is not None and not hmac.compare_digest(given, expected):
                return late_message()
            if self._calls >= self.max_tool_calls:
                return limit_message(self.max_tool_calls)
            self._calls += 1
            self._in_flight += 1
        return None

    def refund(self) -> None:
        """Give back the budget of an admitted call that never ran."""
        with self._lock:
            self._calls -= 1
            self._in_flight -= 1

    def finished(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # -- cells ----------------------------------------------------------------------------
    # A session kernel keeps one channel for its life. Each cell opens it with its own
    # handler and budget and closes it when it ends; between cells every call is refused,
    # and a call admitted during a cell that has ended is refused instead of run
    # (:meth:`current`), so a thread a cell left running has no authority after it. With a
    # ``credential`` (fresh random per cell, given to the kernel with the cell's code and
    # held by the cell's threads only) a call must carry it: a thread an earlier cell left
    # running holds that cell's, and is refused here whatever it did to the kernel's own
    # gate.

    def open_cell(self, handler: CallHandler, max_tool_calls: int,
                  credential: str | None = None) -> None:
        with self._lock:
            self._cells = True
            self.generation += 1
            self.handler = handler
            self.max_tool_calls = max_tool_calls
            self._calls = 0
            self._cell_open = True
            self._cell_credential = (credential.encode("utf-8")
                                     if credential is not None else None)

    def close_cell(self) -> None:
        with self._lock:
            self._cells = True
            self.generation += 1
            self._cell_open = False
            self._cell_credential = None

    def current(self, generation: int) -> bool:
        """May a call admitted at ``generation`` still run?"""
        with self._lock:
            return not self.closed and (not self._cells or (
                self._cell_open and generation == self.generation))

    # -- per-execution concurrency ------------------------------------------------------
    # At most ``max_parallel`` calls of one execution occupy host workers; the rest wait
    # here, not in the shared pool, so one execution's hung calls cannot starve another's.

    def enqueue(self, job: Callable[[], None]) -> bool:
        """True: ``job`` got a slot and the caller starts it now; False: it waits."""
        with self._lock:
            if self.closed:
                return False
            if self._running < self.max_parallel:
                self._running += 1
                return True
            self._waiting.append(job)
            return False

    def next_job(self) -> Callable[[], None] | None:
        """A finished job's slot: handed to the next waiting job (returned, the caller
        starts it) or freed. Nothing once the channel is closed."""
        with self._lock:
            if self._waiting and not self.closed:
                return self._waiting.popleft()
            self._running -= 1
            return None

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    def close(self) -> None:
        """Unbind the socket and remove its directory. Idempotent."""
        if self.closed:
            return
        with self._lock:
            self.closed = True
            # admitted calls that never started: abandoned (what they held given back)
            dropped = list(self._waiting)
            self._waiting.clear()
        for job in dropped:
            release = getattr(job, "release", None)
            if release is not None:
                release()
        try:
            self.server.release(self)
        finally:
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
