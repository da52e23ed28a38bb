"""Bounded output collection: head + tail for foreground commands, a ring for background ones.

Bytes from a pipe or PTY are decoded incrementally as UTF-8 (invalid sequences become U+FFFD,
a character split across two reads is kept whole) and stripped of ANSI escape sequences
(with :mod:`execengine.ansi`, as the engine strips a script's output), so limits count
characters exactly and memory stays bounded however much a command prints.
"""

from __future__ import annotations

import codecs
import threading
from collections import deque

from execengine.ansi import AnsiStripper
from execengine.truncation import marker


class Utf8Stream:
    """Incremental UTF-8 decoding with replacement of invalid bytes; ANSI escape sequences
    (colours, cursor moves, titles) are removed too, also when a read splits one, unless
    ``strip_ansi`` is False."""

    def __init__(self, *, strip_ansi: bool = True) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._ansi = AnsiStripper() if strip_ansi else None

    def feed(self, data: bytes) -> str:
        text = self._dec.decode(data)
        return self._ansi.feed(text) if self._ansi is not None else text

    def flush(self) -> str:
        text = self._dec.decode(b"", final=True)
        if self._ansi is not None:
            text = self._ansi.feed(text) + self._ansi.flush()
        return text


class HeadTail:
    """Keeps the first ``head`` and the last ``tail`` characters of everything fed.

    ``limit`` is split 40 % head / 60 % tail (the end of a command's output usually holds the
    error); :meth:`text` joins them with a marker saying how much was left out.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self._head_cap = limit * 2 // 5
        self._tail_cap = limit - self._head_cap
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total = 0

    def feed(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        room = self._head_cap - self._head_len
        if room > 0:
            part = text[:room]
            self._head.append(part)
            self._head_len += len(part)
            text = text[room:]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len - len(self._tail[0]) >= self._tail_cap:
            self._tail_len -= len(self._tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self.truncated:
            return head + tail
        tail = tail[-self._tail_cap:]
        return head + marker(self.total - len(head) - len(tail), self.total) + tail


class Ring:
    """A thread-safe character ring buffer with absolute offsets.

    ``read(since)`` returns the text after offset ``since`` that is still held, the new
    offset, and how many characters between ``since`` and the oldest held one were dropped.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._buf = ""
        self._start = 0  # absolute offset of _buf[0]
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._buf += text
            over = len(self._buf) - self.capacity
            if over > 0:
                self._buf = self._buf[over:]
                self._start += over

    @property
    def end(self) -> int:
        with self._lock:
            return self._start + len(self._buf)

    def read(self, since: int = 0) -> tuple[str, int, int]:
        with self._lock:
            since = max(0, since)
            dropped = max(0, self._start - since)
            begin = max(since, self._start) - self._start
            return self._buf[begin:], self._start + len(self._buf), dropped

    def tail(self, chars: int) -> str:
        with self._lock:
            return self._buf[-chars:] if chars > 0 else ""
