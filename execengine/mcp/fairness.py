"""Sharing one ``execengine mcp`` server fairly between its clients.

A *client* is the credential it authenticated with: over HTTP each bearer token is one
client (``--token-env`` may be given once per client; the token made at start is the
starting user's), named after it; over stdio the process serves one client. A client's
MCP session ids are its own (each gets its own session kernel, as before), but the limits
below are the client's, however many session ids it opens:

- **concurrent calls**: at most ``calls_per_client`` of a client's calls run at once; the
  next ones wait their turn on the client's own gate (at most ``waiting_per_client`` of
  them; past that a call is refused), never in the shared pool;
- **session kernels**: a client holds at most ``sessions_per_client`` live kernels. A call
  on a new session id past that closes the client's own least recently used idle kernel;
  a client never closes another's. When the kernels of all clients together reach
  ``code_execution.max_sessions`` and the caller has no idle kernel of its own to give
  up, its call is refused with a clear error (the engine would otherwise close another
  client's kernel to make room);
- **threads**: tool calls run on the server's own bounded executor (``threads``), not on
  asyncio's default one (a handful of threads shared with everything else).

Defaults come from ``code_execution.max_sessions`` (see :meth:`ClientLimits.from_config`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.engine.sessions import SessionManager

#: the only tool whose calls keep a session kernel per session id
KERNEL_TOOL = "execute_code"


@dataclass(frozen=True)
class ClientLimits:
    threads: int
    calls_per_client: int
    sessions_per_client: int
    max_sessions: int
    waiting_per_client: int = 64

    @classmethod
    def from_config(cls, config: Config, *, threads: int | None = None,
                    calls_per_client: int | None = None,
                    sessions_per_client: int | None = None) -> ClientLimits:
        """Per client a quarter of the engine's kernels (at least one) and as many calls
        at once; threads for every kernel plus four for other tools."""
        total = config.code_execution.max_sessions
        sessions = sessions_per_client or max(1, total // 4)
        calls = calls_per_client or sessions
        return cls(threads=threads or total + 4, calls_per_client=calls,
                   sessions_per_client=min(sessions, total), max_sessions=total)


class Clients:
    """Admission of the calls of one server's clients. Its coroutines run on the server's
    event loop; :meth:`close` is idempotent."""

    def __init__(self, limits: ClientLimits,
                 sessions: Callable[[], SessionManager | None]) -> None:
        self.limits = limits
        self._sessions = sessions
        self.executor = concurrent.futures.ThreadPoolExecutor(
            limits.threads, thread_name_prefix="execengine-mcp")
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._waiting: dict[str, int] = {}
        #: client -> its session names (task ids), least recently used first
        self._tasks: dict[str, OrderedDict[str, None]] = {}
        #: session name -> calls of it running now
        self._busy: dict[str, int] = {}
        self._admit = asyncio.Lock()

    async def run(self, client: str, tool: str, task: str, call: Callable[[], str]) -> str:
        """``call()`` on the executor within ``client``'s limits; an error text when it
        may not run."""
        gate = self._gates.setdefault(client, asyncio.Semaphore(self.limits.calls_per_client))
        if self._waiting.get(client, 0) >= self.limits.waiting_per_client:
            return _error(f"too many calls waiting for this client (more than "
                          f"{self.limits.waiting_per_client}); try again when some finished")
        self._waiting[client] = self._waiting.get(client, 0) + 1
        try:
            await gate.acquire()
        finally:
            self._waiting[client] -= 1
        try:
            if tool == KERNEL_TOOL:
                refusal = await self._take_session(client, task)
                if refusal:
                    return _error(refusal)
            self._busy[task] = self._busy.get(task, 0) + 1
            try:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(self.executor, call)
            finally:
                self._busy[task] -= 1
                if not self._busy[task]:
                    del self._busy[task]
        finally:
            gate.release()

    async def _take_session(self, client: str, task: str) -> str | None:
        """Count ``task`` as one of ``client``'s kernels, giving up the client's own least
        recently used idle kernel when needed; the refusal text when it cannot."""
        async with self._admit:
            manager = self._sessions()
            live = {s.name for s in manager.list_sessions()} if manager is not None else set()
            held = {c: [t for t in tasks if t in live or t in self._busy]
                    for c, tasks in self._tasks.items()}
            mine = self._tasks.setdefault(client, OrderedDict())
            if task in mine and (task in live or task in self._busy):
                mine.move_to_end(task)
                return None
            for c, tasks in self._tasks.items():  # forget sessions that are gone
                for t in [t for t in tasks if t not in held[c]]:
                    del tasks[t]
            own = [t for t in mine if t not in self._busy]  # idle, LRU first
            total = sum(len(v) for v in held.values())
            need = max(len(mine) + 1 - self.limits.sessions_per_client,
                       total + 1 - self.limits.max_sessions, 0)
            if need > len(own):
                if total + 1 > self.limits.max_sessions:
                    return (f"all {self.limits.max_sessions} session kernels of this server "
                            "(code_execution.max_sessions) are held by other clients or "
                            "running this client's cells; try again later")
                return (f"this client's {self.limits.sessions_per_client} session kernels "
                        "are all running cells; try again when one has finished")
            victims = own[:need]
            for t in victims:
                del mine[t]
            mine[task] = None
            self._busy[task] = self._busy.get(task, 0) + 1  # held while its old ones close
        try:
            if victims and manager is not None:
                loop = asyncio.get_running_loop()
                for t in victims:
                    await loop.run_in_executor(self.executor, manager.close_session, t)
        finally:
            self._busy[task] -= 1
            if not self._busy[task]:
                del self._busy[task]
        return None

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def _error(text: str) -> str:
    return json.dumps({"error": text})
