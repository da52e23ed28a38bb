"""The in-memory twin of :class:`~execengine.rpc.RpcServer`: the same channels, budget,
per-execution queue and bounded worker pool, with frames handed over as Python calls.

It serves the engine exactly as the socket server does (``Engine(..., server=
MemoryServer())``): :meth:`MemoryServer.open` returns a real
:class:`~execengine.rpc.channel.Channel` (its private directory is made, nothing is bound),
and a peer connects by the channel's endpoint path with :meth:`MemoryServer.connect`. Peers
send the protocol's JSON frames (:mod:`execengine.rpc.connection`) and read the replies, so
the hello, refusal, budget, queueing and result mapping of an execution are exercised in
milliseconds without a socket or a child process. A thin layer of tests keeps the real
server honest with real children.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from typing import Any

from execengine.errors import TransportError
from execengine.rpc import connection
from execengine.rpc.channel import CallHandler, Channel, late_message, make_socket_dir
from execengine.rpc.pool import WorkerPool, busy_message, waited_message


class MemoryPeer:
    """One connection to a channel: send frames, read replies (thread-safe)."""

    def __init__(self, server: MemoryServer, channel: Channel) -> None:
        self.server = server
        self.channel = channel
        #: None before the hello, then True (welcomed) or False (denied: ignored for good)
        self.authenticated: bool | None = None
        self._cond = threading.Condition()
        self._replies: list[dict[str, Any]] = []

    # -- the wire ------------------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        """Hand one frame to the server (as a socket would)."""
        self.server.receive(self, frame)

    def deliver(self, payload: bytes) -> None:
        """The server's reply to this peer."""
        with self._cond:
            self._replies.append(json.loads(payload))
            self._cond.notify_all()

    def recv(self, *, id: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
        """The next reply (or the one naming request ``id``); TimeoutError after ``timeout``."""
        with self._cond:
            found = self._cond.wait_for(lambda: self._match(id) is not None, timeout)
            if not found:
                raise TimeoutError(f"no reply{f' to {id!r}' if id else ''} in {timeout}s")
            reply = self._match(id)
            assert reply is not None
            self._replies.remove(reply)
            return reply

    def pending(self) -> int:
        with self._cond:
            return len(self._replies)

    def _match(self, id: str | None) -> dict[str, Any] | None:
        for reply in self._replies:
            if id is None or reply.get("id") == id:
                return reply
        return None

    # -- conveniences ------------------------------------------------------------------------

    def hello(self, exec_id: str, token: str) -> dict[str, Any]:
        self.send(_frame({"v": connection.VERSION, "type": "hello", "exec": exec_id,
                          "token": token}))
        return self.recv()

    def start_call(self, id: str, tool: str, args: dict[str, Any] | None = None) -> None:
        self.send(_frame({"v": connection.VERSION, "type": "call", "id": id, "tool": tool,
                          "args": args or {}}))

    def call(self, tool: str, args: dict[str, Any] | None = None, *, id: str = "c",
             timeout: float = 5.0) -> Any:
        """One call and its result, decoded (the text a tool returned, as JSON when it is)."""
        self.start_call(id, tool, args)
        reply = self.recv(id=id, timeout=timeout)
        if reply.get("type") != "result":
            raise TransportError(f"call {id!r} failed: {reply.get('error')}")
        text = reply.get("result")
        try:
            return json.loads(text) if isinstance(text, str) else text
        except ValueError:
            return text


def _frame(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


class MemoryServer:
    """Serves channels to in-process peers. A context manager; :meth:`close` is idempotent."""

    def __init__(self, *, max_workers: int = 64, max_parallel_calls: int = 16,
                 max_message_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_parallel_calls = max_parallel_calls
        self.max_message_bytes = max_message_bytes
        self._pool = WorkerPool(max_workers, name="execengine-memtool")
        self._lock = threading.Lock()
        self._channels: dict[str, Channel] = {}
        self._closed = False

    @property
    def pool(self) -> WorkerPool:
        return self._pool

    def open(self, *, exec_id: str, token: str, allowed: Iterable[str],
             handler: CallHandler, max_tool_calls: int, check_peer: bool = False) -> Channel:
        """A channel like the socket server's; in memory there is no peer process whose
        credentials could be checked, so ``check_peer`` and :meth:`expect_peer` are
        accepted for the same calls and change nothing."""
        channel = Channel(self, exec_id=exec_id, token=token, allowed=allowed,
                          handler=handler, max_tool_calls=max_tool_calls,
                          socket_dir=make_socket_dir(), max_parallel=self.max_parallel_calls)
        with self._lock:
            if self._closed:
                channel.closed = True
                raise TransportError("the server is closed")
            self._channels[channel.socket_path] = channel
        return channel

    def expect_peer(self, channel: Channel, uids: Iterable[int]) -> None:
        """Nothing to check in memory (see :meth:`open`)."""

    def release(self, channel: Channel) -> None:
        with self._lock:
            self._channels.pop(channel.socket_path, None)

    def connect(self, endpoint: str) -> MemoryPeer:
        """A peer of the open channel at ``endpoint`` (its socket path)."""
        with self._lock:
            channel = self._channels.get(endpoint)
        if channel is None:
            raise TransportError(f"nothing listens at {endpoint}")
        return MemoryPeer(self, channel)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._channels.clear()
        self._pool.close()

    def __enter__(self) -> MemoryServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving (the same rules as the socket server) ---------------------------------------

    def receive(self, peer: MemoryPeer, frame: bytes) -> None:
        channel = peer.channel
        if channel.closed or peer.authenticated is False:
            return  # an unbound socket, or a peer denied earlier: nothing answers
        if len(frame) > self.max_message_bytes:
            peer.deliver(connection.error(None, "message too large"))
            return
        msg = connection.parse(frame)
        if peer.authenticated is None:
            if isinstance(msg, connection.Hello) and channel.authenticate(msg.exec_id, msg.token):
                peer.authenticated = True
                channel.hello.set()
                peer.deliver(connection.welcome(channel.exec_id, channel.max_tool_calls,
                                                self.max_message_bytes))
            else:
                peer.authenticated = False
                why = ("bad credentials" if isinstance(msg, connection.Hello)
                       else "the first message must be a hello")
                peer.deliver(connection.denied(why))
            return
        if isinstance(msg, connection.Invalid):
            peer.deliver(connection.error(msg.id, msg.error))
        elif isinstance(msg, connection.Hello):
            peer.deliver(connection.error(None, "already authenticated"))
        else:
            self._dispatch(peer, msg)

    def _dispatch(self, peer: MemoryPeer, call: connection.Call) -> None:
        channel = peer.channel
        generation = channel.generation  # read first: a call never runs in a later cell
        refusal = channel.admit(call.tool, call.cell)
        if refusal is not None:
            peer.deliver(connection.result(call.id, json.dumps({"error": refusal})))
            return
        # queued calls past the pool's bounded wait are answered (the socket server's loop
        # does this on its tick; here every incoming call is the tick)
        for late in self._pool.expired():
            if isinstance(late, _Job):
                late.refuse(waited_message(self._pool.max_wait))
                self.submit(late.peer.channel.next_job())  # type: ignore[arg-type]
        job = _Job(self, peer, call, generation)
        if channel.enqueue(job):
            self.submit(job)
        # else it waits for a slot of this execution

    def submit(self, job: _Job | None) -> None:
        """To the pool (which queues while all workers are busy); refused only when calls
        of ended executions hold every worker."""
        while job is not None:
            try:
                if self._pool.submit(job):
                    return
            except RuntimeError:  # the pool is closed
                pass
            job.refuse(busy_message(self._pool.max_workers))
            job = job.peer.channel.next_job()  # type: ignore[assignment]


class _Job:
    """One admitted call; run by a pool worker. The execution's next waiting call then goes
    to the back of the pool's queue (fair to other executions)."""

    def __init__(self, server: MemoryServer, peer: MemoryPeer, call: connection.Call,
                 generation: int = 0) -> None:
        self.server, self.peer, self.call = server, peer, call
        # the cell (session kernel) it was admitted in, and that cell's handler
        self.generation, self.handler = generation, peer.channel.handler

    @property
    def abandoned(self) -> bool:
        return self.peer.channel.closed

    def __call__(self) -> None:
        self.run_one()
        self.server.submit(self.peer.channel.next_job())  # type: ignore[arg-type]

    def run_one(self) -> None:
        channel = self.peer.channel
        try:
            if channel.closed:
                return
            if not channel.current(self.generation):  # its cell ended while it waited
                self.peer.deliver(connection.result(self.call.id,
                                                    json.dumps({"error": late_message()})))
                return
            try:
                text = self.handler(self.call.tool, self.call.args)
            except Exception as exc:  # handlers should not raise; be safe anyway
                text = json.dumps({"error": f"Tool execution failed: {exc}"})
            if not channel.closed:  # else abandoned: the late result is dropped
                self.peer.deliver(connection.result(self.call.id, text))
        finally:
            channel.finished()

    def refuse(self, reason: str) -> None:
        self.peer.channel.refund()
        self.peer.deliver(connection.result(self.call.id, json.dumps({"error": reason})))
