"""The host-side RPC server: one epoll loop, many executions, a bounded worker pool.

Every execution gets its own listening Unix socket at ``<private dir>/rpc.sock``
(:class:`~execengine.rpc.channel.Channel`); the host speaks ZMTP 3.x as a ``ROUTER``
(:mod:`.connection`) on every connection it accepts. One loop thread accepts and reads; tool calls
run in a :class:`~execengine.rpc.pool.WorkerPool`, and a worker writes its call's reply
itself (:class:`~execengine.rpc.connection.Connection`): one thread hop per call.

**Fast calls skip the hop.** Waking a worker costs more than a short call itself (on a
small VM about half of a no-op round trip's host CPU). So a call of a tool whose last call
was fast (under :data:`INLINE_FAST`) runs on the loop thread, once the loop's turn is done;
a burst of them (a script's gathered calls) runs there too, up to :data:`INLINE_TURN`
seconds of it per turn, and the rest of the burst goes to the pool.
A *standby* thread watches it: should such a call run longer than :data:`HANDOVER`, the
standby takes the loop over at once, and that tool's calls go to the pool for good (so one
tool can hold at most one thread this way). The thread that ran the call becomes the
standby, or ends if there is one already. The standby only polls while calls run inline,
and sleeps once none has for :data:`STANDBY_COOL`.

**After a message the loop polls for the next one** for ``spin`` seconds (default
:data:`SPIN`) before it sleeps in ``epoll``: a script calling fast tools sends its next
call within tens of microseconds, and waking a sleeping thread costs more than that on a
small VM (a no-op round trip went from 117 to 61 µs). Two costs bound when it does so:

* CPU: it polls only while fewer executions are open than the host has CPUs, so that it
  never takes a CPU a script could use (with 4 scripts calling on 2 CPUs, polling made the
  whole 7 % slower).
* the interpreter lock: a polling Python thread takes the lock back after every poll, so
  another thread of the host, the embedding application's too, may wait for the
  interpreter's forced switch (5 ms) while a script calls fast tools back to back (another
  thread's 1 ms sleep woke late by 0.25 ms at p99 without polling, 0.6-2.2 ms with it).
  ``spin=0`` (``code_execution.rpc_spin: 0``) keeps the loop asleep between messages.

A call under the handover bound cannot stall others for long, but a tool whose calls
alternate fast and slow (a script picks the arguments) would get every slow one run on the
loop. So an inline call that takes ``inline_fast`` or longer is charged, whole, to its tool:
a tool may spend at most ``handover`` seconds of the loop so, refilled at
:data:`OVERRUN_SHARE` of the time that passes; while it is overdrawn its calls go to the pool.

What one script cannot do to the host or to other executions:

* **break the loop**: every message is handled in its own ``try`` (a failure closes only
  that connection); sizes are checked before bodies are buffered and nesting before JSON is
  decoded (:mod:`.connection`); replies are encoded so that no string can fail. Should the
  loop itself fail it is restarted at once (with a short back-off when it keeps failing),
  and :meth:`RpcServer.open` starts a fresh loop thread if none runs: no call ever waits on
  a dead loop.
* **exhaust file descriptors**: each execution may hold ``max_connections`` connections
  (further clients wait in the listen backlog until one closes; past the backlog their
  connect fails with EAGAIN) and all executions together at most half the process's soft
  ``RLIMIT_NOFILE`` (beyond that a connection is closed at once), which the server raises
  to the hard limit when it starts. If ``accept`` still fails for lack of
  descriptors the listener pauses briefly; nothing aborts.
* **lose replies**: replies are queued per connection, never dropped while the peer is
  connected; a peer that does not read stops being read (see :mod:`.connection`).
* **starve other executions**: at most ``max_parallel_calls`` calls of one execution are
  on workers or in the pool's FIFO backlog, where they wait at most ``max_wait`` seconds;
  only when calls of ended executions (hung, abandoned) hold every worker is a call refused
  at once (with an error result; its budget is given back).
* **fill the host's memory**: the calls in flight of all executions hold at most
  ``max_inflight_bytes`` of messages (:mod:`.budget`); past it a call gets an error result
  at once, and memory is given back to the system once the last big call has ended.

When an execution ends (:meth:`Channel.close`) its listener and connections are closed from
the calling thread, its waiting calls are dropped and its running ones abandoned: their late
results are discarded.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import resource
import select
import shutil
import socket
import struct
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable

from execengine._resources import usable_cpus
from execengine.errors import ProtocolViolation, TransportError
from execengine.rpc import connection
from execengine.rpc.budget import COUNTED, ByteBudget
from execengine.rpc.channel import CallHandler, Channel, late_message, make_socket_dir
from execengine.rpc.connection import GREETING, READ_CHUNK, Connection, Message, command, ready
from execengine.rpc.pool import WorkerPool, busy_message, waited_message

log = logging.getLogger(__name__)

#: connections accepted per readiness event of one listener (then the others get a turn)
ACCEPT_BATCH = 64
#: messages handled from one connection per loop turn (then the others get a turn)
MESSAGE_BATCH = 32
#: listen() backlog of one execution's socket
BACKLOG = 128
#: how long a listener rests after accept() failed for lack of file descriptors
EMFILE_PAUSE = 0.05
#: the loop looks at queued calls' deadlines and paused listeners this often (seconds)
TICK = 0.1
#: seconds the loop polls for the next message after one, before it sleeps (see above)
SPIN = 0.0005
#: messages held while the channel does not yet know which uid its child runs as
MAX_PENDING = 64
#: a tool whose last call took less than this (seconds) has its calls run on the loop thread
INLINE_FAST = 0.001
#: the loop runs at most this many seconds of held calls in one turn (the rest of a burst
#: goes to the pool): a burst of fast calls costs other connections at most this long a wait
INLINE_TURN = 0.002
#: a call on the loop thread running longer than this hands the loop to the standby thread
HANDOVER = 0.01
#: how often the standby looks while calls run on the loop thread
STANDBY_POLL = 0.005
#: the standby sleeps (until the next inline call wakes it) once none ran for this long
STANDBY_COOL = 0.1
#: a tool's calls on the loop thread that took over INLINE_FAST may use at most HANDOVER
#: seconds of the loop in a burst, refilled at this share of the time that passes
OVERRUN_SHARE = 0.01
_FD_SHORTAGE = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_HUP = select.EPOLLHUP | select.EPOLLERR


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (where allowed); the soft limit
    in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if want > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
    return soft


class _Listener:
    """One execution's listening socket and its connections."""

    def __init__(self, channel: Channel, sock: socket.socket) -> None:
        self.channel = channel
        self.sock = sock
        self.fd = sock.fileno()
        self.conns: set[Connection] = set()
        self.lock = threading.Lock()
        self.closed = False
        self.resume_at = 0.0  # paused (not polled) until then, after an fd shortage
        self.full = False  # paused while the execution holds its maximum of connections
        #: uids allowed to connect (SO_PEERCRED); None: not known yet (with the channel's
        #: ``check_peer`` a peer's messages wait for :meth:`RpcServer.expect_peer`)
        self.uids: frozenset[int] | None = None
        self.pending: list[tuple[Connection, tuple[bytes, ...]]] = []


class RpcServer:
    """Serves tool calls of many concurrent executions. A context manager."""

    def __init__(self, *, max_workers: int = 256, max_message_bytes: int = 16 * 1024 * 1024,
                 socket_base: str | None = None, max_parallel_calls: int = 128,
                 max_connections: int = 128, max_wait: float = 30.0,
                 inline_calls: bool = True, spin: float = SPIN,
                 max_inflight_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_message_bytes = max_message_bytes
        #: what the calls in flight hold of the host's memory (see :mod:`.budget`)
        self.budget = ByteBudget(max_inflight_bytes)
        #: seconds the loop polls for the next message after one (see the module docstring)
        self.spin = spin
        #: it polls only while fewer executions than this are open
        self._cpus = usable_cpus()
        #: fast tools' calls run on the loop thread (see the module docstring), with these
        #: thresholds (seconds)
        self.inline_calls = inline_calls
        self.inline_fast = INLINE_FAST
        self.inline_turn = INLINE_TURN
        self.handover = HANDOVER
        #: the share of the loop's time a tool's slow inline calls may take (see above)
        self.overrun_share = OVERRUN_SHARE
        self.max_parallel_calls = max_parallel_calls
        self.max_connections = max_connections
        self.socket_base = socket_base
        self._pool = WorkerPool(max_workers, max_wait=max_wait)
        self._lock = threading.Lock()
        self._epoll: select.epoll | None = None
        self._handlers: dict[int, _Listener | Connection] = {}
        self._listeners: dict[Channel, _Listener] = {}
        self._paused: list[_Listener] = []
        #: connections with decoded-but-unhandled input (over a turn's MESSAGE_BATCH)
        self._unfinished: dict[Connection, None] = {}
        #: what the loop reads every connection into (the decoders copy it out)
        self._scratch = memoryview(bytearray(READ_CHUNK))
        #: (channel, uids) from :meth:`expect_peer`, applied by the loop
        self._commands: deque[tuple[Channel, frozenset[int]]] = deque()
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._max_total = 0
        #: loop failures survived (each one restarted the loop)
        self.restarts = 0
        #: times the loop polled for a next message instead of sleeping (see ``spin``)
        self.polls = 0
        # -- calls on the loop thread (see the module docstring) --
        #: tool name -> its last call was fast
        self._fast: dict[str, bool] = {}
        #: tools whose call outran HANDOVER on the loop thread: never run there again
        self._never: set[str] = set()
        #: tool name -> (seconds it may still overrun on the loop, as of then): tools whose
        #: inline calls overran ``inline_fast`` (see the module docstring)
        self._credit: dict[str, tuple[float, float]] = {}
        #: the calls the loop runs itself once this turn is done (before it polls again)
        self._held: deque[_CallJob] = deque()
        #: guards the roles: ``_thread`` (the loop's owner), ``_standby`` and the fields below
        self._role = threading.Lock()
        self._standby: threading.Thread | None = None
        self._standby_asleep = False
        self._standby_wake = threading.Event()
        self._inline_since: float | None = None  # the loop runs a call, since then
        self._inline_tool = ""
        self._last_inline = 0.0
        #: calls that outran HANDOVER on the loop thread (each handed the loop over)
        self.handovers = 0
        #: what a finished call tells the server: (submit the next job, note the call's
        #: time, give back the bytes it held)
        self._job_hooks = (self._next, self._note_speed, self.budget.give)

    # -- public API (any thread) -------------------------------------------------------

    @property
    def connections(self) -> int:
        """Connections open right now, over all executions."""
        return sum(len(lst.conns) for lst in list(self._listeners.values()))

    def open(self, *, exec_id: str, token: str, allowed: Iterable[str],
             handler: CallHandler, max_tool_calls: int, check_peer: bool = False) -> Channel:
        """Bind a new channel; :class:`TransportError` when it cannot. ``check_peer``: no
        message is parsed until :meth:`expect_peer` names the uid the child runs as."""
        epoll = self._ensure_running()
        socket_dir = make_socket_dir(self.socket_base)
        channel = Channel(self, exec_id=exec_id, token=token, allowed=allowed, handler=handler,
                          max_tool_calls=max_tool_calls, socket_dir=socket_dir,
                          max_parallel=self.max_parallel_calls)
        channel.check_peer = check_peer
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.bind(channel.socket_path)
            sock.listen(BACKLOG)
            listener = _Listener(channel, sock)
            with self._lock:
                if self._closed:
                    raise TransportError("the RPC server is closed")
                self._listeners[channel] = listener
                self._handlers[listener.fd] = listener
            epoll.register(listener.fd, select.EPOLLIN)
        except BaseException as exc:
            channel.closed = True
            with self._lock:
                if self._listeners.get(channel) is not None:
                    lst = self._listeners.pop(channel)
                    if self._handlers.get(lst.fd) is lst:
                        del self._handlers[lst.fd]
            sock.close()
            shutil.rmtree(socket_dir, ignore_errors=True)
            if isinstance(exc, OSError):
                raise TransportError(f"cannot bind {channel.endpoint}: {exc}") from exc
            raise
        return channel

    def expect_peer(self, channel: Channel, uids: Iterable[int]) -> None:
        """Only processes of these uids may talk on ``channel`` (checked on the peer's
        credentials, ``SO_PEERCRED``, before anything it sent is parsed). Messages that
        waited for this are handled now, on the loop thread."""
        self._ensure_running()
        self._commands.append((channel, frozenset(uids)))
        self._wake()

    def release(self, channel: Channel) -> None:
        """Close ``channel``'s listener and connections (called by :meth:`Channel.close`)."""
        with self._lock:
            listener = self._listeners.pop(channel, None)
            if listener is None:
                return
            if self._handlers.get(listener.fd) is listener:
                del self._handlers[listener.fd]
        self._close_listener(listener)

    def close(self) -> None:
        """Stop the loop, close every socket, every channel still open (their folders
        removed) and the pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stopping = True
            listeners = list(self._listeners.values())
            self._listeners.clear()
        self._wake()
        self._standby_wake.set()
        deadline = time.monotonic() + 5.0
        while True:
            with self._role:
                # a thread running a call (hung, maybe) is not waited for: it stops after it
                thread = self._thread if self._inline_since is None else None
            if thread is None or thread is threading.current_thread():
                break
            thread.join(max(0.0, deadline - time.monotonic()))
            with self._role:
                if self._thread is thread or time.monotonic() >= deadline:
                    break  # else the standby took the loop over meanwhile: wait for it
        for listener in listeners:
            self._close_listener(listener)
            listener.channel.close()  # still open: its socket's folder goes too
        self._handlers.clear()
        if self._epoll is not None:
            self._epoll.close()
            os.close(self._wake_r)
            os.close(self._wake_w)
        self._pool.close()

    def __enter__(self) -> RpcServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and self._thread is not None:
            warnings.warn("RpcServer was not closed", ResourceWarning, stacklevel=1)

    # -- plumbing --------------------------------------------------------------------

    def _ensure_running(self) -> select.epoll:
        """The epoll object, with a live loop thread serving it (a new one if it died)."""
        with self._lock:
            if self._closed:
                raise TransportError("the RPC server is closed")
            if self._epoll is None:
                soft = raise_fd_limit()
                self._max_total = max(self.max_connections, soft // 2)
                self._epoll = select.epoll()
                self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
                self._epoll.register(self._wake_r, select.EPOLLIN)
            with self._role:
                if self._thread is None or not self._thread.is_alive():
                    if self._thread is not None:
                        self.restarts += 1
                        log.error("the RPC loop thread was gone; started a new one")
                    self._thread = threading.Thread(target=self._run, name="execengine-rpc",
                                                    daemon=True)
                    self._thread.start()
            return self._epoll

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")

    def _close_listener(self, listener: _Listener) -> None:
        with listener.lock:
            if listener.closed:
                return
            listener.closed = True
            conns = list(listener.conns)
            listener.conns.clear()
            with contextlib.suppress(OSError, ValueError):
                if self._epoll is not None:
                    self._epoll.unregister(listener.fd)
            listener.sock.close()
        for conn in conns:
            self._forget(conn.fd, conn)
            conn.close()

    # -- the loop thread ---------------------------------------------------------------

    def _run(self) -> None:
        """The loop, restarted whenever it fails (supervision); or the standby, which may
        become the loop. A thread that handed the loop over stands by, or ends."""
        me = threading.current_thread()
        failures = 0
        while not self._stopping:
            if self._thread is not me:
                if not self._stand_by(me):
                    return
                continue
            try:
                self._loop(me)
                if self._thread is me:
                    return  # stopping
            except BaseException:
                if self._stopping:
                    return
                self.restarts += 1
                failures += 1
                log.exception("the RPC loop failed; restarting it")
                time.sleep(min(0.5, 0.001 * 2 ** min(failures, 9)))

    def _stand_by(self, me: threading.Thread) -> bool:
        """Watch the loop while it runs calls itself; True once this thread has taken the
        loop over, False when it is not needed (another one stands by, or stopping)."""
        while True:
            with self._role:
                if self._stopping or self._standby is not me:
                    return False
                now = time.monotonic()
                since = self._inline_since
                if since is not None and now - since >= self.handover:
                    # the call is slow: its tool's calls go to the pool from now on
                    self._never.add(self._inline_tool)
                    self._fast[self._inline_tool] = False
                    self._thread, self._standby = me, None
                    # the new owner runs no call: the old one's record must not outlive it
                    # (its end would otherwise clear the record of a later inline call)
                    self._inline_since = None
                    self.handovers += 1
                    return True
                hot = now - self._last_inline < STANDBY_COOL
                if not hot:
                    self._standby_asleep = True
                    self._standby_wake.clear()
            if hot:
                time.sleep(STANDBY_POLL)
            else:
                self._standby_wake.wait()

    def _run_held(self, me: threading.Thread, job: _CallJob) -> bool:
        """Run ``job`` on this, the loop's, thread; False when the standby took the loop
        over meanwhile (this thread then stands by in its place, or ends)."""
        tool = job.call.tool
        start = time.monotonic()
        watched = True
        with self._role:
            if self._standby is None:
                standby = threading.Thread(target=self._run, daemon=True,
                                           name="execengine-rpc-standby")
                try:
                    standby.start()  # it waits for this lock before it looks at anything
                    self._standby = standby
                except RuntimeError:  # no thread left in this process (its limit)
                    watched = False
            elif self._standby_asleep:
                self._standby_asleep = False
                self._standby_wake.set()
            if watched:
                self._inline_since = self._last_inline = start
                self._inline_tool = tool
        if not watched:  # nobody could take the loop over from it: a worker runs it
            log.warning("cannot start the RPC standby thread; a call of %s goes to a "
                        "worker", tool)
            self._submit(job)
            return True
        try:
            job()
        finally:
            now = time.monotonic()
            if now - start >= self.inline_fast:
                self._credit[tool] = (self._credit_of(tool, now) - (now - start), now)
            with self._role:
                owner = self._thread is me
                if owner:  # else the record belongs to the new owner's calls now
                    self._inline_since = None
                if not owner and self._standby is None:
                    self._standby = me
            if not owner and self._held:
                # calls held while this one ran (its execution's next ones): the new owner
                # may be waiting in epoll already
                self._wake()
        return owner

    def _credit_of(self, tool: str, now: float) -> float:
        """The seconds ``tool``'s inline calls may still overrun ``inline_fast`` by."""
        credit, then = self._credit.get(tool, (self.handover, now))
        return min(self.handover, credit + (now - then) * self.overrun_share)

    def _note_speed(self, tool: str, seconds: float) -> None:
        """A call of ``tool`` took ``seconds`` (any thread)."""
        self._fast[tool] = seconds < self.inline_fast and tool not in self._never

    def _loop(self, me: threading.Thread) -> None:
        """Serve until stopping, or until the loop was handed to the standby."""
        epoll = self._epoll
        assert epoll is not None
        next_tick = time.monotonic() + TICK
        held = self._held
        polling_until = 0.0
        while not self._stopping:
            if held:  # kept back by the last turn (see _dispatch)
                until = time.monotonic() + self.inline_turn
                while held:
                    job = held.popleft()
                    if not self._may_inline(job.call.tool):  # slow since it was held
                        self._submit(job)
                    elif not self._run_held(me, job):
                        return  # the standby has the loop, and runs the rest
                    elif time.monotonic() >= until:
                        while held:  # the turn's share is spent: the rest to the pool
                            self._submit(held.popleft())
            if self._unfinished:
                events = epoll.poll(0)
            elif polling_until and time.monotonic() < polling_until:
                self.polls += 1
                events = epoll.poll(0)
            else:
                events = epoll.poll(TICK)
            if events and self.spin and len(self._listeners) < self._cpus:
                polling_until = time.monotonic() + self.spin
            for conn in list(self._unfinished):
                self._guarded(conn, 0)
            for fd, mask in events:
                handler = self._handlers.get(fd)
                if handler is None:
                    if fd == self._wake_r:
                        with contextlib.suppress(OSError):
                            while os.read(self._wake_r, 4096):
                                pass
                    continue
                if isinstance(handler, _Listener):
                    self._accept(handler)
                else:
                    self._guarded(handler, mask)
            while self._commands:
                self._expect(*self._commands.popleft())
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + TICK
                self._housekeeping(now)

    def _housekeeping(self, now: float) -> None:
        # (an idle tick takes no lock: nothing waits for a worker)
        for job in self._pool.expired(now) if self._pool.backlog else ():
            if isinstance(job, _CallJob):
                job.refuse(waited_message(self._pool.max_wait))
                self._submit(job.channel.next_job())  # type: ignore[arg-type]
        if self._paused:
            ready = [lst for lst in self._paused if lst.resume_at <= now]
            self._paused = [lst for lst in self._paused if lst.resume_at > now]
            for lst in ready:
                with lst.lock, contextlib.suppress(OSError, ValueError):
                    if not lst.closed and self._epoll is not None:
                        self._epoll.modify(lst.fd, select.EPOLLIN)

    def _expect(self, channel: Channel, uids: frozenset[int]) -> None:
        listener = self._listeners.get(channel)
        if listener is None:
            return
        listener.uids = uids
        pending, listener.pending = listener.pending, []
        for conn, parts in pending:
            if not conn.closed:
                self._guarded_message(conn, parts)

    def _guarded_message(self, conn: Connection, parts: tuple[bytes, ...]) -> None:
        try:
            self._message(conn, Message(parts=parts))
        except Exception:
            log.exception("serving a peer of %s failed; dropped it", conn.channel.exec_id)
            self._drop(conn)

    def _accept(self, listener: _Listener) -> None:
        channel = listener.channel
        for _ in range(ACCEPT_BATCH):
            with listener.lock:
                if listener.closed:
                    return
                if len(listener.conns) >= self.max_connections:
                    # the execution holds its maximum: further clients wait in the backlog
                    # (then get EAGAIN) until one of its connections closes
                    listener.full = True
                    channel.refused_connections += 1
                    with contextlib.suppress(OSError, ValueError):
                        self._epoll.modify(listener.fd, 0)  # type: ignore[union-attr]
                    return
                try:
                    sock, _ = listener.sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:
                    if exc.errno in _FD_SHORTAGE:
                        self._pause(listener, exc)
                        return
                    continue  # ECONNABORTED and the like: that client is gone
                if self.connections >= self._max_total:
                    sock.close()  # the whole host is at its budget: refuse at once
                    channel.refused_connections += 1
                    continue
                try:
                    sock.setblocking(False)
                    conn = Connection(sock, channel, self._epoll,  # type: ignore[arg-type]
                                      self.max_message_bytes)
                    conn.uid = _peer_uid(sock)
                    listener.conns.add(conn)
                    channel.peers = len(listener.conns)
                    with self._lock:
                        self._handlers[conn.fd] = conn
                    self._epoll.register(conn.fd, select.EPOLLIN)  # type: ignore[union-attr]
                except OSError:
                    sock.close()
                    continue
            conn.send(GREETING + ready())

    def _pause(self, listener: _Listener, exc: OSError) -> None:
        # under listener.lock
        log.warning("accept() on %s failed (%s); pausing it", listener.channel.exec_id, exc)
        listener.resume_at = time.monotonic() + EMFILE_PAUSE
        with contextlib.suppress(OSError, ValueError):
            self._epoll.modify(listener.fd, 0)  # type: ignore[union-attr]
        self._paused.append(listener)

    def _forget(self, fd: int, obj: _Listener | Connection) -> None:
        """Stop routing ``fd``'s events to ``obj`` (not to a newer owner of the number)."""
        with self._lock:
            if self._handlers.get(fd) is obj:
                del self._handlers[fd]

    def _drop(self, conn: Connection) -> None:
        self._unfinished.pop(conn, None)
        self._forget(conn.fd, conn)
        listener = self._listeners.get(conn.channel)
        if listener is not None:
            with listener.lock:
                listener.conns.discard(conn)
                conn.channel.peers = len(listener.conns)
                if listener.full and not listener.closed:
                    listener.full = False  # room again: take the next waiting client
                    with contextlib.suppress(OSError, ValueError):
                        self._epoll.modify(listener.fd, select.EPOLLIN)  # type: ignore[union-attr]
        conn.close()

    def _guarded(self, conn: Connection, mask: int) -> None:
        """Serve one connection; whatever goes wrong with it stays with it."""
        try:
            self._serve(conn, mask)
        except ProtocolViolation as exc:
            log.debug("peer of %s dropped: %s", conn.channel.exec_id, exc)
            self._drop(conn)
        except Exception:
            log.exception("serving a peer of %s failed; dropped it", conn.channel.exec_id)
            self._drop(conn)

    def _serve(self, conn: Connection, mask: int) -> None:
        """A readiness event of one connection (``mask`` 0: only its unfinished input)."""
        if conn.closed:  # closed from another thread (its execution ended)
            self._unfinished.pop(conn, None)
            return
        if mask & select.EPOLLOUT:
            conn.flush()
            if conn.reading and conn.decoder.buffered() and conn not in self._unfinished:
                self._unfinished[conn] = None  # its input held back while it was not read
        if mask:
            if conn in self._unfinished or not mask & (select.EPOLLIN | _HUP):
                return  # buffered input goes first; it has its own turn
            if not conn.reading:
                if mask & _HUP:
                    self._drop(conn)
                return
            got = conn.recv_into(self._scratch)
            if got is None:
                return
            if not got:
                self._drop(conn)
                return
            conn.decoder.feed(self._scratch[:got])
        messages = conn.decoder.messages()
        try:
            for n, msg in enumerate(messages, 1):
                if conn.closed:
                    return
                self._message(conn, msg)
                if not conn.reading:
                    # its replies wait for it to read them: the rest of its input waits
                    # too (each message would queue another reply), until it reads again
                    self._unfinished.pop(conn, None)
                    return
                if n >= MESSAGE_BATCH:
                    self._unfinished[conn] = None  # the rest next turn, after the others
                    return
            self._unfinished.pop(conn, None)
        finally:
            messages.close()

    def _message(self, conn: Connection, msg: Message) -> None:
        if msg.command:
            if msg.command == b"PING":
                conn.send(command(b"PONG", msg.data[2:18]))
            elif msg.command == b"ERROR":
                self._drop(conn)
            return  # other commands are ignored (RFC 37)
        if conn.authed is False:
            return  # denied earlier: ignored for good
        if conn.authed is None:
            # the peer's credentials first, before anything it sent is parsed
            listener = self._listeners.get(conn.channel)
            if listener is not None and conn.channel.check_peer and listener.uids is None:
                if len(listener.pending) < MAX_PENDING:
                    listener.pending.append((conn, msg.parts))
                return
            if listener is not None and listener.uids is not None and (
                    conn.uid is None or conn.uid not in listener.uids):
                conn.authed = False
                log.warning("execution %s: a process of uid %s connected to its socket; "
                            "ignored", conn.channel.exec_id, conn.uid)
                return
            self._greet(conn, msg.parts)
            return
        if len(msg.parts) != 1:
            conn.reply(connection.error(connection.request_id(msg.parts[0]),
                                        "a message must be a single frame"))
            return
        parsed = connection.parse(msg.parts[0])
        if isinstance(parsed, connection.Invalid):
            conn.reply(connection.error(parsed.id, parsed.error))
        elif isinstance(parsed, connection.Hello):
            conn.reply(connection.error(None, "already authenticated"))
        else:
            self._dispatch(conn, parsed, len(msg.parts[0]))

    def _greet(self, conn: Connection, parts: tuple[bytes, ...]) -> None:
        channel = conn.channel
        msg = connection.parse(parts[0]) if len(parts) == 1 else None
        if isinstance(msg, connection.Hello) and channel.authenticate(msg.exec_id, msg.token):
            conn.authed = True
            channel.hello.set()  # before the welcome: whoever sees the welcome sees this
            conn.reply(connection.welcome(channel.exec_id, channel.max_tool_calls,
                                          self.max_message_bytes))
            return
        conn.authed = False
        why = ("bad credentials" if isinstance(msg, connection.Hello)
               else "the first message must be a hello")
        log.warning("execution %s: a connection was refused: %s", channel.exec_id, why)
        conn.reply(connection.denied(why))

    def _dispatch(self, conn: Connection, call: connection.Call, size: int = 0) -> None:
        channel = conn.channel
        generation = channel.generation  # read first: a call never runs in a later cell
        counted = size if size >= COUNTED else 0  # small calls skip the budget's lock
        refusal = self.budget.take(counted) if counted else None
        if refusal is None:
            refusal = channel.admit(call.tool, call.cell)
            if refusal is not None and counted:
                self.budget.give(counted)
        if refusal is not None:
            conn.reply(connection.result(call.id, json.dumps({"error": refusal},
                                                             ensure_ascii=False)))
            return
        job = _CallJob(self._job_hooks, conn, call, generation, counted)
        if channel.enqueue(job):
            if self.inline_calls and self._may_inline(call.tool):
                self._held.append(job)  # run by the loop itself once this turn is done
            else:
                self._submit(job)

    def _may_inline(self, tool: str) -> bool:
        """``tool``'s calls run on the loop thread (see the module docstring)."""
        return bool(self._fast.get(tool)) and tool not in self._never and (
            tool not in self._credit or self._credit_of(tool, time.monotonic()) > 0)

    def _next(self, job: _CallJob | None) -> None:
        """Start ``job``, the next waiting call of an execution whose call just ended: on
        the loop thread, held like a new call when its tool may run there (an execution's
        burst past its ``max_parallel_calls``); else in the pool."""
        if (job is not None and self.inline_calls and threading.current_thread() is self._thread
                and self._may_inline(job.call.tool)):
            self._held.append(job)
        else:
            self._submit(job)

    def _submit(self, job: _CallJob | None) -> None:
        """Hand ``job`` (holding one of its execution's slots) to the pool. A job the pool
        refuses (abandoned calls hold it) is answered with an error, its budget given
        back, and the slot passed to the execution's next waiting call."""
        while job is not None:
            try:
                if self._pool.submit(job):
                    return
            except RuntimeError:  # the pool is closed: the server is shutting down
                pass
            job.refuse(busy_message(self._pool.max_workers))
            job = job.channel.next_job()  # type: ignore[assignment]


class _CallJob:
    """One admitted tool call, run by a pool worker. ``size``: the bytes it holds of the
    server's budget (0: not counted), given back once it ends, whichever way."""

    __slots__ = ("call", "channel", "conn", "generation", "give", "handler", "note_speed",
                 "size", "submit")

    def __init__(self, hooks: tuple[Callable[[_CallJob | None], None],
                                    Callable[[str, float], None], Callable[[int], None]],
                 conn: Connection, call: connection.Call, generation: int = 0,
                 size: int = 0) -> None:
        self.submit, self.note_speed, self.give = hooks
        self.size = size
        self.conn, self.call = conn, call
        self.channel = conn.channel
        # the cell (session kernel) it was admitted in, and that cell's handler
        self.generation, self.handler = generation, conn.channel.handler

    @property
    def abandoned(self) -> bool:
        return self.channel.closed

    def __call__(self) -> None:
        """Run this call; the execution's next waiting call goes to the back of the pool's
        queue (fair to other executions)."""
        self.run_one()
        self.release()
        self.submit(self.channel.next_job())  # type: ignore[arg-type]

    def release(self) -> None:
        """Give back the bytes this call held (once): its arguments are let go first, so
        that memory given back then includes theirs."""
        size, self.size = self.size, 0
        if size:
            self.call = self.call._replace(args={})
            self.give(size)

    def run_one(self) -> None:
        channel, call = self.channel, self.call
        try:
            if channel.closed:
                return  # the execution ended while the call waited
            if not channel.current(self.generation):  # its cell ended while it waited
                self.conn.reply(connection.result(
                    call.id, json.dumps({"error": late_message()})))
                return
            start = time.monotonic()
            try:
                text = self.handler(call.tool, call.args)
            except BaseException as exc:  # should not raise; SystemExit from a tool even
                log.exception("tool handler for %s raised", call.tool)
                text = json.dumps({"error": f"Tool execution failed: {_describe(exc)}"})
            self.note_speed(call.tool, time.monotonic() - start)
            if not isinstance(text, str):
                text = json.dumps(text, ensure_ascii=False, default=str)
            if not channel.closed:  # else abandoned: the late result is dropped
                self.conn.reply(connection.result(call.id, text))
        except BaseException:  # a bug (or a result whose str() raises SystemExit): the call
            # still gets exactly one reply, and the thread (the loop's, maybe) goes on
            log.exception("tool call %s failed", call.tool)
            self.conn.reply(connection.result(call.id, json.dumps(
                {"error": "Tool execution failed: the host could not send the result"})))
        finally:
            channel.finished()

    def refuse(self, reason: str) -> None:
        self.channel.refund()
        if not self.channel.closed:
            self.conn.reply(connection.result(
                self.call.id, json.dumps({"error": reason}, ensure_ascii=False)))
        self.release()


def _describe(exc: BaseException) -> str:
    """``Type: message`` of a tool's exception; just the type when its ``str()`` fails."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except BaseException:  # a hostile __str__ (raising SystemExit, say)
        return type(exc).__name__


def _peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of an accepted Unix socket (``SO_PEERCRED``:
    the credentials it had when it connected); None when unknown."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)
