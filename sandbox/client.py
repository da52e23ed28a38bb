"""The child's RPC client: tool calls from a script to the execengine host.

One connection per process (a forked child opens its own), set up from the environment
(``EXECENGINE_RPC_ENDPOINT``, ``EXECENGINE_RPC_TOKEN``, ``EXECENGINE_EXEC_ID``; never argv).
Every request carries an id and whoever reads the socket hands each reply to whoever waits
for that id, so calls from many threads and many asyncio tasks are in flight at the same
time. Asyncio waiters are woken with ``loop.call_soon_threadsafe``: no thread per call.

Reading is leader/follower: one thread at a time holds the *read role*. A synchronous caller
that finds it free takes it and reads until its own reply has come (handing on the replies
of others), so a lone caller gets its reply without a thread switch; it polls for a fast
reply briefly before it sleeps (:meth:`RpcClient._lead`). The background reader
thread takes the role when someone else waits (asyncio callers, followers) and whenever
nobody has read for :data:`IDLE_READ` seconds, so heartbeats (PING) are answered while the
script does not call; it gives the role up again as soon as nobody waits. A signal handler
may call a tool while its own thread holds the role (see :meth:`RpcClient._lead_nested`).

A tool's own failure is a result (usually ``{"error": ...}``) for the script to inspect; a
failure of the RPC itself (no host, denied, connection lost, protocol error) raises
:class:`ToolCallError`. Timeouts are the host's business: it kills the script.
See ``docs/protocol.md``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import threading
import time

from . import zmtp

TYPE_CHECKING = False  # no typing import at run time: the child starts fast
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["RpcClient", "ToolCallError", "acall_tool", "call_tool", "decode_result",
           "get_client"]

PROTOCOL_VERSION = 1
ENV_ENDPOINT = "EXECENGINE_RPC_ENDPOINT"
ENV_TOKEN = "EXECENGINE_RPC_TOKEN"
ENV_EXEC_ID = "EXECENGINE_EXEC_ID"
#: seconds without a reader after which the background thread reads (heartbeats)
IDLE_READ = 0.02
#: seconds a caller polls for its reply before it sleeps in ``recv`` (see
#: :meth:`RpcClient._lead`), and the most calls that skip the poll after one that missed.
#: A reply polled for ends the poll at once, so the bound matters only in a slow phase of
#: a virtual machine, where a no-op call's reply takes 150-300 µs: a client asleep by then
#: has the host's send wake it, which costs the host about as much again (no-op round trip
#: here, in one run: 267 µs median polling 100 µs, 156-172 µs polling 300-700 µs)
SPIN = 0.0005
SPIN_BACKOFF = 16
#: the threads of a script that runs none of its own: the caller and the background reader
#: (a caller polls only then; see :meth:`RpcClient._lead`)
OWN_THREADS = 2
#: the threads started through ``threading`` (and the main thread), counted without a lock:
#: ``threading.active_count()`` takes one in Python code, which a signal handler that
#: raises there would leave held (no thread could start or end again). None: not this
#: Python's layout, and a caller never polls
_THREADS = getattr(threading, "_active", None)


#: the start of a call message, up to its id (see :meth:`RpcClient._submit`)
_CALL_HEAD = f'{{"v": {PROTOCOL_VERSION}, "type": "call", "id": "'
_quote = json.encoder.encode_basestring_ascii
#: decodes one JSON value at the start of a string, in C; see :func:`_loads`
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
#: the request id near the start of a reply that cannot be decoded (ours are digits; the
#: host writes the id ahead of the result), see :meth:`RpcClient._unreadable`
_REPLY_ID = re.compile(rb'"id"\s*:\s*"(\d{1,20})"')
_REPLY_HEAD = 256


def _loads(text: str) -> Any:
    """``json.loads(text)``, without its Python layers when ``text`` is one JSON value
    with nothing around it (what the host sends); anything else takes the full path,
    which raises the same errors."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


class ToolCallError(RuntimeError):
    """A tool call could not be made or answered (not a tool's own error result)."""


def decode_result(result: Any) -> Any:
    """The script-facing value of a result text: JSON decoded once, and once more when
    that gives a string that is itself JSON; text that is not JSON stays a string."""
    if not isinstance(result, str):
        return result
    try:
        value = _loads(result)
    except ValueError:
        return result
    if isinstance(value, str):
        try:
            return _loads(value)
        except ValueError:
            return value
    return value


class _Waiter:
    """A thread blocked on one request. A held lock is its event: cheaper to make and to
    fire than a :class:`threading.Event`, and it is fired exactly once (whoever takes the
    request out of ``_pending`` resolves or fails it)."""

    __slots__ = ("_lock", "error", "reply")
    blocking = True  # its thread may lead the reading itself

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.reply: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def resolve(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self._fire()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._fire()

    def _fire(self) -> None:
        # never twice, but never raise either (no contextlib.suppress: this is per call)
        try:  # noqa: SIM105
            self._lock.release()
        except RuntimeError:
            pass

    @property
    def done(self) -> bool:
        return self.reply is not None or self.error is not None

    def wait(self) -> dict[str, Any]:
        if not self.done:
            self._lock.acquire()
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply


class _AsyncWaiter:
    """An asyncio future waiting for one request, woken from the reader thread."""

    __slots__ = ("future", "loop")
    blocking = False  # an event loop thread never blocks reading

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        self.loop = loop
        self.future = future

    def resolve(self, reply: dict[str, Any]) -> None:
        self._deliver(_set_result, reply)

    def fail(self, error: BaseException) -> None:
        self._deliver(_set_exception, error)

    def _deliver(self, fn: Callable[[asyncio.Future[Any], Any], None], value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self.loop.call_soon_threadsafe(fn, self.future, value)


def _host_reported(msg: dict[str, Any]) -> str:
    """The failure of a connection whose host refused it."""
    return "protocol error: the host reported {}".format(msg.get("error", msg))


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_results(items: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for future, value in items:
        if not future.done():
            future.set_result(value)


def _set_exception(future: asyncio.Future[Any], error: Any) -> None:
    if not future.done():
        future.set_exception(error)


class RpcClient:
    """A connection to the host; see the module docstring.

    ``connect()`` is called lazily by the first call (or eagerly by :meth:`start`);
    :meth:`close` is idempotent. ``connector(path) -> ZmtpConnection`` is the transport seam.
    """

    def __init__(self, endpoint: str | None, token: str | None, exec_id: str | None, *,
                 handshake_timeout: float = 30.0,
                 connector: Callable[[str], zmtp.ZmtpConnection] | None = None) -> None:
        self.endpoint = endpoint
        self._token = token
        self.exec_id = exec_id
        self._handshake_timeout = handshake_timeout
        self._connector = connector or self._zmtp_connect
        self.pid = os.getpid()
        self.max_tool_calls: int | None = None
        self.max_message_bytes: int | None = None
        self._conn: zmtp.ZmtpConnection | None = None
        self._connect_lock = threading.Lock()
        # reentrant (as is the role's lock): a signal handler may make a call while its
        # thread is inside one of these (see _lead_nested)
        self._pending_lock = threading.RLock()
        self._pending: dict[str, _Waiter | _AsyncWaiter] = {}
        self._ids = itertools.count(1)
        self._failure: str | None = None
        #: replies that could not be decoded or were errors naming no call (each failed
        #: the call it named, or the calls in flight; never the connection)
        self.bad_replies = 0
        self._closed = False
        self._reader: threading.Thread | None = None
        # the read role (see the module docstring): its holder, and when it was last given up
        # taken as the lock itself, never through the Condition: its __enter__ and
        # __exit__ are Python code, where a handler that raises leaves the lock held
        self._role_lock = threading.RLock()
        self._role = threading.Condition(self._role_lock)
        self._reading: threading.Thread | None = None
        self._released_at = 0.0
        #: the last call came from asyncio: the background reader keeps the read role
        self._async_mode = False
        #: replies for asyncio waiters read but not yet handed to their loops (the read
        #: role's holder hands them on at once when nothing more is buffered: one wake-up
        #: of an event loop for a burst of replies)
        self._batch: list[tuple[_AsyncWaiter, dict[str, Any]]] = []
        #: calls that sleep at once before the next one polls, and the next such pause
        #: (see :meth:`_lead`)
        self._spin_skip = 0
        self._spin_backoff = 1

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RpcClient:
        env = os.environ if environ is None else environ
        return cls(env.get(ENV_ENDPOINT), env.get(ENV_TOKEN), env.get(ENV_EXEC_ID))

    # -- connection -----------------------------------------------------------------------

    def _zmtp_connect(self, path: str) -> zmtp.ZmtpConnection:
        return zmtp.connect(path, timeout=self._handshake_timeout)

    def connect(self) -> None:
        """Connect and say hello unless done; raise :class:`ToolCallError` on failure.

        Threads arriving while another connects wait for its outcome. A failure is final:
        every later call reports it.
        """
        if self._conn is not None and self._failure is None:
            return
        with self._connect_lock:
            if self._failure is not None:
                raise ToolCallError(self._failure)
            if self._conn is not None:
                return
            try:
                self._conn = self._open()
            except ToolCallError as exc:
                self._failure = str(exc)
                raise
            # the connecting call reads its own reply; the reader waits its turn
            self._released_at = time.monotonic()
            self._reader = threading.Thread(target=self._read_loop, name="execengine-rpc",
                                            daemon=True)
            self._reader.start()

    def _open(self) -> zmtp.ZmtpConnection:
        if self._closed:
            raise ToolCallError("the RPC connection to the execengine host is closed")
        missing = [name for name, value in ((ENV_ENDPOINT, self.endpoint),
                                             (ENV_TOKEN, self._token),
                                             (ENV_EXEC_ID, self.exec_id)) if not value]
        if missing:
            raise ToolCallError(f"not running under execengine: {', '.join(missing)} not set")
        try:
            conn = self._connector(str(self.endpoint))
        except zmtp.ZmtpError as exc:
            raise ToolCallError(
                f"cannot reach the execengine host at {self.endpoint}: {exc}") from None
        try:
            hello = {"v": PROTOCOL_VERSION, "type": "hello", "exec": self.exec_id,
                     "token": self._token, "pid": os.getpid()}
            conn.send(json.dumps(hello).encode("utf-8"))
            reply = self._parse(conn.recv())
            kind = reply.get("type")
            if kind == "denied":
                reason = reply.get("error", "(no reason given)")
                raise ToolCallError(f"the execengine host refused the connection: {reason}")
            if kind != "welcome":
                raise ToolCallError(f"protocol error: expected welcome, host sent {kind!r}")
            limit = reply.get("max_tool_calls")
            self.max_tool_calls = limit if isinstance(limit, int) else None
            size = reply.get("max_message_bytes")  # optional: lets us refuse before sending
            self.max_message_bytes = size if isinstance(size, int) and size > 0 else None
            if self._closed:  # closed while we were connecting
                raise ToolCallError("the RPC connection to the execengine host is closed")
            return conn
        except zmtp.ZmtpError as exc:
            conn.close()
            raise ToolCallError(f"RPC handshake with the execengine host failed: {exc}") from None
        except BaseException:
            conn.close()
            raise

    @classmethod
    def _parse(cls, frames: list[bytes]) -> dict[str, Any]:
        msg = cls._decode(frames)
        if isinstance(msg, str):
            raise ToolCallError(msg)
        return msg

    @staticmethod
    def _decode(frames: list[bytes]) -> dict[str, Any] | str:
        """A message from the host, or what is wrong with it."""
        if len(frames) != 1:
            return f"protocol error: host sent a {len(frames)}-frame message"
        try:
            msg = _loads(frames[0].decode("utf-8"))
        except (ValueError, RecursionError):
            return "protocol error: host sent a message that is not JSON"
        if not isinstance(msg, dict):
            return "protocol error: host sent JSON that is not an object"
        if msg.get("v") != PROTOCOL_VERSION:
            return (f"protocol error: host speaks protocol version {msg.get('v')!r},"
                    f" expected {PROTOCOL_VERSION}")
        return msg

    def start(self) -> threading.Thread:
        """Connect in a background daemon thread (errors are kept for the first call)."""
        thread = threading.Thread(target=self._connect_quietly, name="execengine-hello",
                                  daemon=True)
        thread.start()
        return thread

    def _connect_quietly(self) -> None:
        with contextlib.suppress(ToolCallError):
            self.connect()

    # -- reading (leader/follower) ------------------------------------------------------

    def _read_one(self, conn: zmtp.ZmtpConnection, idle: bool = False) -> bool:
        """Read one message (None after a heartbeat, with ``idle``) and hand it on. False
        when the connection is over: every waiter has been failed and it is closed."""
        try:
            # the message stays buffered until handed on: a signal handler that raises in
            # between leaves it for the next reader, which hands it on again (a no-op for
            # whatever got it already)
            found = conn.peek(idle)
            if found is None:
                return True
            msg = self._decode(found[0])
            ok = self._unreadable(found[0], msg) if isinstance(msg, str) else self._dispatch(msg)
            conn.consume(found[1])
            if ok:
                if self._batch and not conn.has_frame():
                    self._flush()
                return True
            reason = msg if isinstance(msg, str) else _host_reported(msg)
        except (zmtp.ZmtpError, ToolCallError) as exc:
            reason = self._why_broken(exc)
        self._fail_all(reason)
        conn.close()
        return False

    def _why_broken(self, exc: zmtp.ZmtpError | ToolCallError) -> str:
        """Why the connection cannot go on, from what reading it raised."""
        if isinstance(exc, zmtp.PeerClosed):
            return ("the RPC connection to the execengine host was closed" if self._closed
                    else f"lost the connection to the execengine host ({exc})")
        if isinstance(exc, zmtp.ZmtpError):
            return f"RPC transport error: {exc}"
        return str(exc)

    def _take_role(self, waiter: _Waiter | _AsyncWaiter) -> bool | None:
        """Take the read role for ``waiter``'s thread if it is free (True); else wake the
        background reader when the holder may not read for ``waiter``. None: this thread
        holds the role already (a signal handler's call, interrupting its own read)."""
        with self._role_lock:
            if waiter.blocking and self._reading is threading.current_thread():
                return None
            if self._reading is None and waiter.blocking:
                self._reading = threading.current_thread()
                return True
            if self._reading is None:
                self._role.notify()
            return False

    def _flush(self) -> None:
        """Hand the batched replies to their event loops, one wake-up per loop. They leave
        the batch only once handed on (interrupted, the next flush hands them on again:
        a future already done is left alone)."""
        with self._pending_lock:
            batch = self._batch[:]
        by_loop: dict[Any, list[tuple[asyncio.Future[Any], Any]]] = {}
        for waiter, reply in batch:
            by_loop.setdefault(waiter.loop, []).append((waiter.future, reply))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_set_results, items)
        with self._pending_lock:
            del self._batch[:len(batch)]

    def _give_role(self) -> None:
        try:
            if self._batch:
                self._flush()
        finally:  # a handler raising in the flush must not leave the role held
            with self._role_lock:
                self._reading = None
                self._released_at = time.monotonic()
                if self._pending:  # someone else still waits: the background reader reads
                    self._role.notify()

    def _lead(self, waiter: _Waiter) -> None:
        """Read (holding the role) until ``waiter`` is answered.

        A reply that comes within :data:`SPIN` is polled for rather than slept for: waking
        a thread from ``recv`` costs more than a fast tool's whole round trip here. After a
        poll that found nothing the next 1, 2, 4 ... :data:`SPIN_BACKOFF` calls sleep at
        once (until a poll finds its reply again), so slow tools and a busy host cost
        little more than one poll in a while. Only while the script runs no thread of its
        own besides this one: a polling thread takes the interpreter lock back after every
        poll, so another would wait for the 5 ms forced switch while calls go back to back
        (measured: a 1 ms ticker thread's p99 lateness 0.2 -> 5.7 ms)."""
        conn = self._conn
        assert conn is not None  # a caller reads only once connected
        try:
            if not conn.has_frame() and _THREADS is not None and len(_THREADS) <= OWN_THREADS:
                if self._spin_skip:
                    self._spin_skip -= 1
                elif conn.spin(SPIN):
                    self._spin_backoff = 1
                else:
                    self._spin_skip = self._spin_backoff
                    self._spin_backoff = min(2 * self._spin_backoff, SPIN_BACKOFF)
            while not waiter.done and self._read_one(conn):
                pass
        finally:
            self._give_role()

    def _lead_nested(self, waiter: _Waiter) -> None:
        """Read for ``waiter``, a call made by a signal handler whose thread was reading
        (holding the role) when the signal came: that read is suspended under us and
        nobody else may read. So read the way it can survive: hand on every message from
        the start of the buffer, remove nothing, only append (see
        :meth:`zmtp.ZmtpConnection.peek_at`); the interrupted read hands the same
        messages on again (a no-op) and removes them. A PING at the end gets a PONG to a
        read that went back to waiting on the socket, for replies already buffered."""
        conn = self._conn
        assert conn is not None
        pos = 0
        try:
            while not waiter.done:
                found = conn.peek_at(pos)
                if isinstance(found, int):
                    conn.pull(found)
                    continue
                frames, pos = found
                msg = self._decode(frames)
                if isinstance(msg, str):
                    self._unreadable(frames, msg)
                elif not self._dispatch(msg):
                    raise ToolCallError(_host_reported(msg))
            conn.ping()
        except (zmtp.ZmtpError, ToolCallError) as exc:
            # every waiter fails; the socket is shut down, not closed: the interrupted
            # read is about to use the descriptor again (it gets EOF)
            reason = self._why_broken(exc)
            self._fail_all(reason)
            conn.shutdown(reason)

    def _read_loop(self) -> None:
        """The background reader: reads while others wait or nobody has read for a while."""
        conn = self._conn
        assert conn is not None
        role = self._role
        try:
            while True:
                with self._role_lock:
                    while True:
                        if self._closed or self._failure is not None:
                            return
                        if self._reading is None:
                            quiet = time.monotonic() - self._released_at
                            if self._pending or quiet >= IDLE_READ:
                                break
                            role.wait(IDLE_READ - quiet)
                        else:
                            role.wait(IDLE_READ)
                    self._reading = threading.current_thread()
                try:
                    # read until nobody waits (asyncio callers: until a synchronous call
                    # comes, so their calls find a reader); at least one step
                    while self._read_one(conn, idle=True) and (self._pending
                                                               or self._async_mode):
                        pass
                finally:
                    self._give_role()
        except BaseException as exc:  # never leave waiters hanging
            self._fail_all(f"RPC reader failed: {exc!r}")
            conn.close()

    def _dispatch(self, msg: dict[str, Any]) -> bool:
        """Hand a reply to its waiter; False when the connection cannot go on (the host
        denied it). An error that names no call fails the calls in flight, not the
        connection (see :meth:`_bad_reply`); other messages without an id are ignored."""
        req_id = msg.get("id")
        if req_id is None:
            if msg.get("type") == "denied":
                return False
            if msg.get("type") == "error":
                self._bad_reply(_host_reported(msg))
            return True
        # the waiter leaves the table only once it has the reply, so the same message
        # handed on again (see _read_one) still finds it, or finds nothing to do
        with self._pending_lock:
            waiter = self._pending.get(req_id)
            if isinstance(waiter, _AsyncWaiter):
                self._batch.append((waiter, msg))
                self._pending.pop(req_id, None)
                return True
        if waiter is not None:  # else: a reply nobody waits for any more (cancelled task)
            waiter.resolve(msg)
            self._pending.pop(req_id, None)
        return True

    def _unreadable(self, frames: list[bytes], problem: str) -> bool:
        """A reply that cannot be decoded: the call it names fails with ``problem``, and the
        connection goes on. Handed on again after an interruption, it finds nobody
        waiting: a no-op."""
        found = _REPLY_ID.search(frames[0], 0, _REPLY_HEAD) if frames else None
        if found is None:
            self._bad_reply(problem)
            return True
        self.bad_replies += 1
        req_id = found.group(1).decode("ascii")
        with self._pending_lock:
            waiter = self._pending.get(req_id)
        if waiter is not None:
            waiter.fail(ToolCallError(problem))
            self._pending.pop(req_id, None)
        return True

    def _bad_reply(self, problem: str) -> None:
        """A bad reply that names no call: whichever call it answered will never get
        another, so every call in flight fails with ``problem`` (a reply of theirs that
        comes after all finds nobody waiting). The connection goes on: later calls work."""
        self.bad_replies += 1
        self._fail_all(problem, final=False)

    def _fail_all(self, reason: str, final: bool = True) -> None:
        """Fail every call in flight; ``final``: and every later one (the connection is
        over)."""
        if self._batch:  # what was read is delivered first
            self._flush()
        with self._pending_lock:
            if final and self._failure is None:
                self._failure = reason
            waiters = list(self._pending.values())
            self._pending.clear()
        for waiter in waiters:
            waiter.fail(ToolCallError(reason))

    # -- calls ----------------------------------------------------------------------------

    def _submit(self, name: str, args: dict[str, Any] | None,
                waiter: _Waiter | _AsyncWaiter) -> str:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a tool name must be a non-empty str, not {name!r}")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise TypeError(f"tool arguments must be a dict, not {type(args).__name__}")
        req_id = str(next(self._ids))
        credential = call_credential() if call_credential is not None else None
        try:
            # the envelope from a template (the id is digits), the arguments by json
            payload = (_CALL_HEAD + req_id + '", '
                       + ('"cell": ' + _quote(credential) + ", " if credential else "")
                       + '"tool": ' + _quote(name) + ', "args": '
                       + (json.dumps(args) if args else "{}") + "}").encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"arguments for tool {name!r} are not JSON-serialisable: {exc}") from None
        except RecursionError:  # the host would refuse far less deep (64 levels)
            raise ToolCallError(f"the arguments of the call to {name!r} nest too deeply "
                                "to encode; nothing was sent") from None
        limit = self.max_message_bytes
        if limit is not None and len(payload) > limit:
            # the host would drop the whole connection; refuse this call only
            raise ToolCallError(f"the call to {name!r} is {len(payload)} bytes, more than the "
                                f"host accepts ({limit} bytes); nothing was sent")
        with self._pending_lock:
            if self._failure is not None:
                raise ToolCallError(self._failure)
            self._pending[req_id] = waiter
        try:
            assert self._conn is not None
            self._conn.send(payload)
        except zmtp.ZmtpError as exc:
            with self._pending_lock:
                self._pending.pop(req_id, None)
                if self._failure is None:  # final, as a failure the reader sees
                    self._failure = f"could not send the call to {name!r}: {exc}"
                failure = self._failure  # the reader's reason first, e.g. the host went away
            raise ToolCallError(failure) from None
        except BaseException:
            # interrupted (a signal handler raised): the rest of the call goes out ahead of
            # the next message, and its reply finds nobody waiting
            with self._pending_lock:
                self._pending.pop(req_id, None)
            raise
        return req_id

    @staticmethod
    def _unwrap(name: str, reply: dict[str, Any]) -> Any:
        kind = reply.get("type")
        if kind == "result":
            return decode_result(reply.get("result"))
        if kind == "error":
            reason = reply.get("error", "(no reason given)")
            raise ToolCallError(f"the execengine host rejected the call to {name!r}: {reason}")
        raise ToolCallError(f"protocol error: unexpected reply type {kind!r} to a call")

    def call(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """Call tool ``name`` with ``args`` and return its decoded result."""
        self.connect()
        self._async_mode = False
        waiter = _Waiter()
        req_id = self._submit(name, args, waiter)
        me = threading.current_thread()
        nested = self._reading is me  # a signal handler's call, its thread reading
        try:
            lead = self._take_role(waiter)
            if lead is None:
                self._lead_nested(waiter)
            elif lead:
                self._lead(waiter)
        except BaseException:  # interrupted (a signal handler raised): nobody waits
            with self._pending_lock:
                self._pending.pop(req_id, None)
            if not nested and self._reading is me:  # taken, and not given up yet
                self._give_role()
            raise
        return self._unwrap(name, waiter.wait())

    async def acall(self, name: str, args: dict[str, Any] | None = None) -> Any:
        """The asyncio form of :meth:`call`; many may be awaited concurrently."""
        import asyncio

        loop = asyncio.get_running_loop()
        if self._conn is None or self._failure is not None:
            # only the first call of a process can get here; the handshake blocks
            await loop.run_in_executor(None, self.connect)
        self._async_mode = True
        future = loop.create_future()
        waiter = _AsyncWaiter(loop, future)
        req_id = self._submit(name, args, waiter)
        self._take_role(waiter)
        try:
            reply = await future
        except asyncio.CancelledError:
            with self._pending_lock:
                self._pending.pop(req_id, None)
            raise
        return self._unwrap(name, reply)

    # -- closing --------------------------------------------------------------------------

    @property
    def lost(self) -> bool:
        """The connection broke (the host went away, or dropped it): not closed here."""
        return self._failure is not None and not self._closed

    def close(self) -> None:
        """Close the connection; pending calls fail with :class:`ToolCallError`. Idempotent."""
        self._closed = True
        conn = self._conn
        if conn is not None:
            conn.close()
        with self._role_lock:
            self._role.notify_all()
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(5.0)
        self._fail_all("the RPC connection to the execengine host was closed")

    def _abandon(self) -> None:
        """After fork, in the child: let go of the parent's connection untouched."""
        self._closed = True
        self._failure = "connection belongs to the parent process"
        conn = self._conn
        if conn is not None:
            conn.abandon()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_client = None  # type: RpcClient | None
_client_lock = threading.Lock()

#: Set by a runtime that runs many cells in one process (the session kernel): called before
#: every call of :func:`call_tool` / :func:`acall_tool`, it raises :class:`ToolCallError` to
#: refuse a call from a thread whose cell has ended.
call_gate = None  # type: Callable[[], None] | None
#: Set by the same runtime: the calling thread's cell credential, sent with each call (the
#: host refuses a call without the running cell's own: a leftover thread holds an ended
#: cell's, whatever it does to ``call_gate``); None sends none.
call_credential = None  # type: Callable[[], str | None] | None


def get_client() -> RpcClient:
    """This process's client, created from the environment on first use (and anew in a
    forked child)."""
    global _client
    client = _client
    # after a fork the hook below has already dropped the parent's client
    if client is not None and (_FORK_HOOK or client.pid == os.getpid()):
        return client
    with _client_lock:
        client = _client
        if client is None or client.pid != os.getpid():
            client = _client = RpcClient.from_environ()
        return client


def _after_fork_in_child() -> None:
    global _client, _client_lock
    _client_lock = threading.Lock()
    old, _client = _client, None
    if old is not None:
        old._abandon()


_FORK_HOOK = hasattr(os, "register_at_fork")
if _FORK_HOOK:
    os.register_at_fork(after_in_child=_after_fork_in_child)


def call_tool(name: str, args: dict[str, Any] | None = None) -> Any:
    """Call tool ``name`` on the host; see :meth:`RpcClient.call`."""
    if call_gate is not None:
        call_gate()
    return get_client().call(name, args)


async def acall_tool(name: str, args: dict[str, Any] | None = None) -> Any:
    """Call tool ``name`` on the host from asyncio; see :meth:`RpcClient.acall`."""
    if call_gate is not None:
        call_gate()
    return await get_client().acall(name, args)
