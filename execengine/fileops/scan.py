"""Reading a file's lines within a budget: holes jumped, bytes and time bounded, cancellable.

A script can make a sparse file of a gigabyte in an instant, and the host paid to read it:
50 ``read_file`` calls of one 1000 MB sparse file kept the host busy for a minute after the
script ended. A :class:`Scanner` therefore

- jumps a *hole* (a range of a sparse file with no data, ``SEEK_DATA``/``SEEK_HOLE``) in one
  step: it reads as NUL bytes, so it holds no newline and adds its length in characters to
  the line it is in — the same answer as reading it, for nothing;
- charges every byte it does read against :data:`SCAN_BYTES` and stops at
  :data:`SCAN_SECONDS`, so a call's work is bounded by what it reads and by time, not by the
  file's apparent size;
- checks ``cancelled()`` (the call's interrupt: set when the execution that made the call
  ends) between reads.

A scanner that stops ends its lines as if the file ended there and says why in
:attr:`Scanner.stopped` (``"cancelled"`` or ``"budget"``); the caller must look.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterator

#: data bytes one call may read (holes are free)
SCAN_BYTES = 64 * 1024 * 1024
#: and seconds it may spend reading
SCAN_SECONDS = 5.0
_CHUNK = 1024 * 1024
_SEEK_DATA = getattr(os, "SEEK_DATA", None)
_SEEK_HOLE = getattr(os, "SEEK_HOLE", None)


class Scanner:
    """Lines of an open file, from its start, within a budget (see the module)."""

    def __init__(self, fd: int, size: int, *, cancelled: Callable[[], bool] | None = None,
                 budget: int = SCAN_BYTES, seconds: float = SCAN_SECONDS) -> None:
        self.fd, self.size, self.pos = fd, size, 0
        self.read_bytes = 0
        self._cancelled = cancelled
        self._budget = budget
        self._started = time.monotonic()
        self._deadline = self._started + seconds
        self._sparse = _SEEK_DATA is not None
        #: read ahead of the lines given so far (from index ``_at``)
        self._buf, self._at = b"", 0
        #: lines :meth:`count_rest` has counted so far (a lower bound when it stopped)
        self.rest_lines = 0
        #: why the reading stopped early: "cancelled", "budget", or None
        self.stopped: str | None = None

    # -- primitives ----------------------------------------------------------------------

    @property
    def seconds(self) -> float:
        return time.monotonic() - self._started

    def _charge(self, n: int) -> bool:
        """May ``n`` more bytes be read? False (and :attr:`stopped` set) when not."""
        if self.stopped is None:
            if self._cancelled is not None and self._cancelled():
                self.stopped = "cancelled"
            elif self.read_bytes + n > self._budget or time.monotonic() > self._deadline:
                self.stopped = "budget"
        if self.stopped is not None:
            return False
        self.read_bytes += n
        return True

    def _hole(self) -> int:
        """Length of the hole at ``pos`` (0 on data, or where holes cannot be seen)."""
        if not self._sparse or self.pos >= self.size:
            return 0
        try:
            data = os.lseek(self.fd, self.pos, _SEEK_DATA)  # type: ignore[arg-type]
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                return self.size - self.pos
            self._sparse = False  # EINVAL: this file system does not tell
            return 0
        return max(0, min(data, self.size) - self.pos)

    def _data_end(self) -> int:
        """Where the data at ``pos`` ends (the next hole, or the end of the file)."""
        if not self._sparse:
            return self.size
        try:
            return min(os.lseek(self.fd, self.pos, _SEEK_HOLE), self.size)  # type: ignore[arg-type]
        except OSError:
            return self.size

    def _more(self, limit: int) -> bytes:
        """The next bytes at ``pos``: data (up to a chunk, never past a hole), or NULs for
        at most ``limit`` bytes of a hole (free)."""
        hole = self._hole()
        if hole:
            if not self._charge(0):
                return b""
            n = min(hole, limit)
            self.pos += n
            return b"\0" * n
        n = min(_CHUNK, self._data_end() - self.pos) or min(_CHUNK, self.size - self.pos)
        if not self._charge(n):
            return b""
        chunk = os.pread(self.fd, n, self.pos)
        if not chunk:  # the file shrank
            self.size = self.pos
        self.pos += len(chunk)
        return chunk

    # -- lines ---------------------------------------------------------------------------

    def lines(self, limit: int) -> Iterator[tuple[bytes, int]]:
        """``(head, skipped)`` per line, as :func:`execengine.fileops.textio.bounded_lines`:
        ``head`` at most ``limit`` bytes (newline kept), ``skipped`` the characters of the
        rest of a longer line (its newline not counted), which is not kept."""
        while True:
            buf, at = self._buf, self._at
            end = buf.find(b"\n", at, at + limit)
            if end < 0 and len(buf) - at < limit and self.pos < self.size:
                more = self._more(limit)
                if self.stopped:
                    return
                self._buf, self._at = buf[at:] + more, 0
                continue
            if at >= len(buf):
                return
            if end >= 0:
                self._at = end + 1
                yield buf[at:end + 1], 0
                continue
            if len(buf) - at < limit:  # the last line, without a newline
                self._at = len(buf)
                yield buf[at:], 0
                continue
            head, rest_at = buf[at:at + limit], at + limit
            end = buf.find(b"\n", rest_at)
            if end >= 0:
                skipped = _chars(buf[rest_at:end])
                self._at = end + 1
            else:
                self._buf, self._at = b"", 0
                skipped = _chars(buf[rest_at:]) + self._skip_line()
                if self.stopped:
                    return
            yield head, skipped

    def _skip_line(self) -> int:
        """Move past the rest of the current line in the file; the characters it had."""
        skipped = 0
        while self.pos < self.size:
            hole = self._hole()
            if hole:
                if not self._charge(0):
                    break
                skipped += hole  # NUL bytes: one character each
                self.pos += hole
                continue
            chunk = self._more(_CHUNK)
            if self.stopped:
                break
            cut = chunk.find(b"\n")
            if cut < 0:
                skipped += _chars(chunk)
                continue
            skipped += _chars(chunk[:cut])
            self._buf, self._at = chunk, cut + 1  # the next lines start here
            break
        return skipped

    def count_rest(self) -> int:
        """The lines after the last one :meth:`lines` gave (a last line without a newline
        counts); when :attr:`stopped`, those counted until then."""
        pending = self._buf[self._at:]
        self._buf, self._at = b"", 0
        self.rest_lines = pending.count(b"\n")
        last = pending[-1:]
        while self.pos < self.size:
            hole = self._hole()
            if hole:
                if not self._charge(0):
                    break
                self.pos += hole
                last = b"\0"
                continue
            chunk = self._more(_CHUNK)
            if self.stopped:
                break
            self.rest_lines += chunk.count(b"\n")
            last = chunk[-1:] or last
        return self.rest_lines + (1 if last and last != b"\n" else 0)


#: UTF-8 continuation bytes: every other byte starts a character
_CONTINUATION = bytes(range(0x80, 0xC0))


def _chars(data: bytes) -> int:
    """About the characters ``data`` decodes to (exact for valid UTF-8), counted in C
    without decoding: a skipped line can be tens of megabytes."""
    return len(data.rstrip(b"\r").translate(None, _CONTINUATION))
