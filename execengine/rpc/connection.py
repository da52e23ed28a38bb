"""One accepted peer connection: its socket, decoder, output queue and backpressure.

Only the loop thread reads; any thread may :meth:`Connection.send` (a worker sends its
call's reply itself, straight into the socket when nothing is queued: no hop through the
loop). What the socket does not take at once is queued, in order, and written by the loop
when the socket becomes writable. A reply is never dropped while the peer is connected.

Backpressure instead of loss: when more than :data:`OUT_HIGH` bytes wait for a peer that
does not read (each queued reply counted with its :data:`ENTRY_COST`), the loop stops
reading *from that peer* (its further calls stay in its own socket buffer) until the queue
is below :data:`OUT_LOW`. Other peers are not affected. The bounds are an execution's, shared
by its open connections: with ``n`` of them each may queue ``OUT_HIGH / n``, so a script
that opens its maximum of connections and reads none holds no more host memory than one.

All changes of the epoll interest mask and the close happen under the connection's lock,
so a worker never writes to a closed (possibly reused) file descriptor.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections import deque
from typing import TYPE_CHECKING

from execengine.rpc import zmtp

if TYPE_CHECKING:
    from execengine.rpc.channel import Channel

#: stop reading from a peer with this many reply bytes queued (it does not read)
OUT_HIGH = 64 * 1024 * 1024
#: ... and read again once the queue is below this
OUT_LOW = 16 * 1024 * 1024
#: what one queued reply costs beyond its bytes (the object, its view, the deque slot):
#: counted with them, so a flood of tiny replies (a PONG per PING from a peer that does
#: not read) meets the bound at its real memory, not at 50x it
ENTRY_COST = 256
#: bytes read per readiness event (then the loop looks at other peers: fairness)
READ_CHUNK = 256 * 1024

IN = select.EPOLLIN
OUT = select.EPOLLOUT


class Connection:
    def __init__(self, sock: socket.socket, channel: Channel, epoll: select.epoll,
                 max_frame: int) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.channel = channel
        self.decoder = zmtp.Decoder(max_frame)
        self.authed: bool | None = None  # None: no hello yet; False: denied
        self.uid: int | None = None  # the peer's, from SO_PEERCRED at accept
        self._epoll = epoll
        self._lock = threading.Lock()
        self._out: deque[memoryview] = deque()
        self._out_bytes = 0
        self._reading = True
        self.closed = False

    # -- any thread --------------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Queue one frame-encoded message; False when the connection is closed."""
        with self._lock:
            if self.closed:
                return False
            if not self._out:
                try:
                    sent = self.sock.send(data)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:  # the peer is gone; the loop sees the hang-up and closes
                    return False
                if sent == len(data):
                    return True
                view = memoryview(data)[sent:]
            else:
                view = memoryview(data)
            was_empty = not self._out
            self._out.append(view)
            self._out_bytes += len(view) + ENTRY_COST
            if self._reading and self._out_bytes > OUT_HIGH // self._sharers():
                self._reading = False
            if was_empty or not self._reading:
                self._rearm()
            return True

    def reply(self, payload: bytes) -> bool:
        """Send one single-frame application message."""
        return self.send(zmtp.frame(payload))

    @property
    def reading(self) -> bool:
        return self._reading

    @property
    def queued_bytes(self) -> int:
        with self._lock:
            return self._out_bytes

    # -- loop thread -------------------------------------------------------------------

    def recv_into(self, buf: memoryview) -> int | None:
        """Read what the socket has into ``buf`` (the loop's, reused for every read: a
        fresh 256 KiB ``bytes`` per read can be a mapping made and unmapped each time,
        by the allocator's state: 20 µs per read in a fresh process here); the count, 0 at
        EOF or once closed, None when nothing is ready. Under the lock, so a close from
        another thread never races a read."""
        with self._lock:
            if self.closed:
                return 0
            try:
                return self.sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError:
                return 0

    def flush(self) -> None:
        """Write what is queued (the socket is writable)."""
        with self._lock:
            while self._out and not self.closed:
                head = self._out[0]
                try:
                    sent = self.sock.send(head)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    self._out.clear()
                    self._out_bytes = 0
                    break
                self._out_bytes -= sent
                if sent == len(head):
                    self._out.popleft()
                    self._out_bytes -= ENTRY_COST
                else:
                    self._out[0] = head[sent:]
                    break
            if not self._reading and (not self._out
                                      or self._out_bytes < OUT_LOW // self._sharers()):
                self._reading = True
            self._rearm()

    def close(self) -> None:
        """Unregister and close the socket (idempotent); queued output is discarded."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._out.clear()
            self._out_bytes = 0
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(self.fd)
            self.sock.close()

    def _sharers(self) -> int:
        """How many connections share the execution's reply bound now (at least 1)."""
        return max(1, self.channel.peers)

    def _rearm(self) -> None:
        # under self._lock
        if self.closed:
            return
        mask = (IN if self._reading else 0) | (OUT if self._out else 0)
        with contextlib.suppress(OSError, ValueError):
            self._epoll.modify(self.fd, mask)
