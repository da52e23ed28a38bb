"""The host-side RPC server: one loop thread, many executions, a bounded worker pool.

Every execution gets its own pyzmq ``ROUTER`` socket bound at ``ipc://<private dir>/rpc.sock``
(:class:`~execengine.rpc.channel.Channel`). All sockets are owned by a single loop thread;
other threads talk to it through a command queue and a wake-up pipe, so no zmq socket is
ever touched by two threads. Tool calls run in a :class:`~execengine.rpc.pool.WorkerPool`;
their replies go back through the same queue.

Hung tool calls: a thread cannot be killed, so a call that never returns holds its worker.
Two rules keep that from spreading. (1) At most ``max_parallel_calls`` calls of one
execution occupy workers; its further calls wait in the channel's own queue, so one
execution's hung calls cannot take the workers another execution needs (the pool's hard
cap, ``max_workers``, is set well above the per-execution cap). (2) When an execution ends
its waiting calls are dropped unstarted and its running ones are abandoned: their late
results are discarded, never sent to the dead peer. If hung calls ever fill the whole pool,
a new call is not queued behind them: it is answered at once with an error result (and its
budget given back). Nothing a child sends can raise out of the
loop: frames are parsed by :mod:`execengine.rpc.protocol` (JSON only) and bad ones are
answered or dropped.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import warnings
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

import zmq

from execengine.errors import TransportError
from execengine.rpc import protocol
from execengine.rpc.channel import CallHandler, Channel, make_socket_dir
from execengine.rpc.pool import WorkerPool

log = logging.getLogger(__name__)

#: messages read from one socket before the loop looks at the others (fairness)
BATCH = 64
#: peers remembered per channel; more connections than this are ignored
MAX_PEERS = 256
#: messages held while the channel does not yet know which uid its child runs as
MAX_PENDING = 64


class _Bound:
    """Loop-thread state of one channel: its socket and what each peer is."""

    def __init__(self, channel: Channel, sock: zmq.Socket[bytes]) -> None:
        self.channel = channel
        self.sock = sock
        self.peers: dict[bytes, bool] = {}  # identity -> authenticated
        #: uids allowed to connect (SO_PEERCRED); None: not known yet (with the channel's
        #: ``check_peer`` messages wait for :meth:`RpcServer.expect_peer`, else no check)
        self.uids: frozenset[int] | None = None
        self.pending: list[tuple[list[bytes], int | None]] = []


class RpcServer:
    """Serves tool calls of many concurrent executions. A context manager."""

    def __init__(self, *, max_workers: int = 64, max_message_bytes: int = 16 * 1024 * 1024,
                 socket_base: str | None = None, max_parallel_calls: int = 16) -> None:
        self.max_message_bytes = max_message_bytes
        self.max_parallel_calls = max_parallel_calls
        self.socket_base = socket_base
        self._pool = WorkerPool(max_workers)
        self._ctx: zmq.Context[zmq.Socket[bytes]] | None = None
        self._lock = threading.Lock()
        self._commands: deque[tuple[str, Any, Future[Any] | None]] = deque()
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- public API (any thread) -------------------------------------------------------

    def open(self, *, exec_id: str, token: str, allowed: Iterable[str],
             handler: CallHandler, max_tool_calls: int, check_peer: bool = False) -> Channel:
        """Bind a new channel; :class:`TransportError` when it cannot. ``check_peer``: no
        message is parsed until :meth:`expect_peer` names the uid the child runs as."""
        socket_dir = make_socket_dir(self.socket_base)
        channel = Channel(self, exec_id=exec_id, token=token, allowed=allowed, handler=handler,
                          max_tool_calls=max_tool_calls, socket_dir=socket_dir,
                          max_parallel=self.max_parallel_calls)
        channel.check_peer = check_peer
        try:
            self._call("open", channel)
        except BaseException:
            channel.closed = True

            shutil.rmtree(socket_dir, ignore_errors=True)
            raise
        return channel

    def expect_peer(self, channel: Channel, uids: Iterable[int]) -> None:
        """Only processes of these uids may talk on ``channel`` (checked on the peer's
        credentials, ``SO_PEERCRED``, before anything it sent is parsed). Messages that
        arrived before this call are judged now."""
        self._call("expect", (channel, frozenset(uids)))

    def release(self, channel: Channel) -> None:
        """Unbind ``channel``'s socket (called by :meth:`Channel.close`)."""
        with self._lock:
            if self._closed or self._thread is None:
                return
        self._call("close", channel)

    def close(self) -> None:
        """Stop the loop, close every socket and the pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._post("stop", None, None)
            thread.join(5.0)
            os.close(self._wake_r)
            os.close(self._wake_w)
        if self._ctx is not None:
            self._ctx.term()
        self._pool.close()

    def __enter__(self) -> RpcServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and self._thread is not None:

            warnings.warn("RpcServer was not closed", ResourceWarning, stacklevel=1)

    # -- plumbing --------------------------------------------------------------------

    def _start(self) -> None:
        # under self._lock
        self._ctx = zmq.Context()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread = threading.Thread(target=self._loop, name="execengine-rpc", daemon=True)
        self._thread.start()

    def _post(self, kind: str, arg: Any, fut: Future[Any] | None) -> None:
        self._commands.append((kind, arg, fut))
        try:
            os.write(self._wake_w, b"\0")
        except BlockingIOError:  # the pipe is full: the loop is awake anyway
            pass
        except OSError:
            pass

    def _call(self, kind: str, arg: Any) -> Any:
        with self._lock:
            if self._closed:
                raise TransportError("the RPC server is closed")
            if self._thread is None:
                self._start()
        fut: Future[Any] = Future()
        self._post(kind, arg, fut)
        try:
            return fut.result(10.0)
        except TimeoutError as exc:
            raise TransportError(f"the RPC loop did not answer {kind!r} in time") from exc

    def _reply(self, channel: Channel, ident: bytes, payload: bytes) -> None:
        """Queue a reply from a worker thread."""
        self._post("send", (channel, ident, payload), None)

    # -- the loop thread ---------------------------------------------------------------

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._wake_r, zmq.POLLIN)
        bound: dict[Channel, _Bound] = {}
        by_sock: dict[zmq.Socket[bytes], _Bound] = {}
        try:
            while True:
                for sock_or_fd, _ in poller.poll():
                    if sock_or_fd == self._wake_r:
                        continue
                    b = by_sock.get(sock_or_fd)
                    if b is not None:
                        self._drain(b)
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                while self._commands:
                    kind, arg, fut = self._commands.popleft()
                    if kind == "stop":
                        return
                    try:
                        value = self._command(kind, arg, poller, bound, by_sock)
                    except BaseException as exc:
                        if fut is not None:
                            fut.set_exception(exc)
                        else:
                            log.debug("RPC loop command %s failed", kind, exc_info=True)
                    else:
                        if fut is not None:
                            fut.set_result(value)
        except Exception:  # pragma: no cover - a bug; keep the host alive and say so
            log.exception("RPC loop crashed")
        finally:
            for b in bound.values():
                b.sock.close(linger=0)

    def _command(self, kind: str, arg: Any, poller: zmq.Poller,
                 bound: dict[Channel, _Bound], by_sock: dict[Any, _Bound]) -> Any:
        if kind == "send":
            channel, ident, payload = arg
            b = bound.get(channel)
            if b is not None:
                self._send(b, ident, payload)
            return None
        if kind == "open":
            channel = arg
            assert self._ctx is not None
            sock = self._ctx.socket(zmq.ROUTER)
            try:
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
                sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
                sock.bind(channel.endpoint)
            except zmq.ZMQError as exc:
                sock.close(linger=0)
                raise TransportError(f"cannot bind {channel.endpoint}: {exc}") from exc
            b = _Bound(channel, sock)
            bound[channel] = b
            by_sock[sock] = b
            poller.register(sock, zmq.POLLIN)
            return None
        if kind == "expect":
            channel, uids = arg
            b = bound.get(channel)
            if b is not None:
                b.uids = uids
                pending, b.pending = b.pending, []
                for frames, uid in pending:
                    self._handle(b, frames, uid)
            return None
        if kind == "close":
            b = bound.pop(arg, None)
            if b is not None:
                by_sock.pop(b.sock, None)
                poller.unregister(b.sock)
                b.sock.close(linger=0)
            return None
        raise AssertionError(kind)

    def _send(self, b: _Bound, ident: bytes, payload: bytes) -> None:
        try:
            b.sock.send_multipart([ident, payload], zmq.NOBLOCK)
        except zmq.ZMQError as exc:  # peer gone (EHOSTUNREACH) or not reading (EAGAIN)
            log.debug("reply to a peer of %s dropped: %s", b.channel.exec_id, exc)

    def _drain(self, b: _Bound) -> None:
        for _ in range(BATCH):
            try:
                raw = b.sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            except zmq.ZMQError as exc:  # pragma: no cover - defensive
                log.debug("recv on %s failed: %s", b.channel.exec_id, exc)
                return
            frames = [f.bytes for f in raw]
            uid = None if b.peers.get(frames[0]) else _peer_uid(raw[-1])
            self._handle(b, frames, uid)

    def _handle(self, b: _Bound, frames: list[bytes], uid: int | None = None) -> None:
        ident = frames[0]
        authed = b.peers.get(ident)
        if authed is False:
            return  # denied earlier: ignored for good
        if authed is None:
            # the peer's credentials first, before anything it sent is parsed
            if b.channel.check_peer and b.uids is None:
                if len(b.pending) < MAX_PENDING:
                    b.pending.append((frames, uid))
                return
            if b.uids is not None and (uid is None or uid not in b.uids):
                b.peers[ident] = False
                b.channel.denied_peers += 1
                log.warning("execution %s: a process of uid %s connected to its socket; "
                            "ignored", b.channel.exec_id, uid)
                return
            self._greet(b, ident, frames)
            return
        if len(frames) != 2:
            self._send(b, ident, protocol.error(None, "a message must be a single frame"))
            return
        msg = protocol.parse(frames[1])
        if isinstance(msg, protocol.Invalid):
            self._send(b, ident, protocol.error(msg.id, msg.error))
        elif isinstance(msg, protocol.Hello):
            self._send(b, ident, protocol.error(None, "already authenticated"))
        else:
            self._dispatch(b, ident, msg)

    def _greet(self, b: _Bound, ident: bytes, frames: list[bytes]) -> None:
        channel = b.channel
        if len(b.peers) >= MAX_PEERS:
            return
        msg = protocol.parse(frames[1]) if len(frames) == 2 else None
        if isinstance(msg, protocol.Hello) and channel.authenticate(msg.exec_id, msg.token):
            b.peers[ident] = True
            channel.hello.set()  # before the welcome: whoever sees the welcome sees this
            self._send(b, ident, protocol.welcome(channel.exec_id, channel.max_tool_calls,
                                                 self.max_message_bytes))
            return
        b.peers[ident] = False
        why = ("bad credentials" if isinstance(msg, protocol.Hello)
               else "the first message must be a hello")
        self._send(b, ident, protocol.denied(why))

    def _dispatch(self, b: _Bound, ident: bytes, call: protocol.Call) -> None:
        channel = b.channel
        refusal = channel.admit(call.tool)
        if refusal is not None:
            text = json.dumps({"error": refusal}, ensure_ascii=False)
            self._send(b, ident, protocol.result(call.id, text))
            return
        job = _CallJob(self, channel, ident, call)
        if channel.enqueue(job):
            self._run_calls(channel, job)

    def _run_calls(self, channel: Channel, job: _CallJob | None) -> None:
        """Run ``job`` (which holds one of ``channel``'s slots) on a pool worker; when it is
        done, that worker and slot go on to the channel's next waiting call. A call the
        exhausted pool cannot take is answered with an error result, its budget given back,
        and the slot passed to the next waiting call (which tries the pool again)."""
        while job is not None:
            try:
                if self._pool.try_submit(job):
                    return
            except RuntimeError:  # the pool is closed: the server is shutting down
                pass
            job.refuse(busy_message(self._pool.max_workers))
            job = channel.next_job()  # type: ignore[assignment]


class _CallJob:
    """One admitted tool call, run by a pool worker."""

    def __init__(self, server: RpcServer, channel: Channel, ident: bytes,
                 call: protocol.Call) -> None:
        self.server, self.channel, self.ident, self.call = server, channel, ident, call

    def __call__(self) -> None:
        """Run this call, then (same worker, same slot) the execution's next waiting ones."""
        job: _CallJob | None = self
        while job is not None:
            job.run_one()
            job = self.channel.next_job()  # type: ignore[assignment]

    def run_one(self) -> None:
        channel, call = self.channel, self.call
        try:
            if channel.closed:
                return  # the execution ended while the call waited
            try:
                text = channel.handler(call.tool, call.args)
            except Exception as exc:  # the handler should not raise; be safe anyway
                log.exception("tool handler for %s raised", call.tool)
                text = json.dumps({"error": f"Tool execution failed: {exc}"})
            if not isinstance(text, str):
                text = json.dumps(text, ensure_ascii=False, default=str)
            if not channel.closed:  # else abandoned: the late result is dropped
                self.server._reply(channel, self.ident, protocol.result(call.id, text))
        except Exception:  # pragma: no cover - a bug; the next call must still run
            log.exception("tool call %s failed", call.tool)
        finally:
            channel.finished()

    def refuse(self, reason: str) -> None:
        self.channel.refund()
        if not self.channel.closed:
            self.server._reply(self.channel, self.ident, protocol.result(
                self.call.id, json.dumps({"error": reason}, ensure_ascii=False)))


def busy_message(workers: int) -> str:
    return (f"Tool call refused: all {workers} host worker threads for tool calls are busy "
            "(calls that never returned hold them; see code_execution.max_tool_threads). "
            "Try again later.")


def _peer_uid(frame: zmq.Frame) -> int | None:
    """The uid of the process that sent ``frame``: libzmq reads the connection's
    ``SO_PEERCRED`` when it accepts an ipc connection and reports it in the frame's
    ``Peer-Address`` as ``<host>:<uid>:<gid>:<pid>``. None when unknown."""
    try:
        address = frame.get("Peer-Address")
    except (zmq.ZMQError, AttributeError):
        return None
    parts = str(address).rsplit(":", 3)
    try:
        return int(parts[1]) if len(parts) == 4 else None
    except ValueError:
        return None

