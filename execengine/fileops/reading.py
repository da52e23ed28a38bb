"""read_file: a window of numbered lines from a text file, with paging hints.

Lines are numbered from 1 as ``"{n:>6}|{text}"``. A line longer than :data:`MAX_LINE_CHARS`
is cut with a marker saying how long it was; the whole window is capped at ``max_chars``
(the rest is one ``offset=`` away). A file up to 1 MB is read whole (one read; only the
lines shown are decoded); a larger one is streamed, so a huge file costs memory only for
the window returned. Binary files are reported, not dumped (:func:`looks_binary`, which
the editing tools use too).

The operation runs wherever the files are, as the others of :mod:`.ops` do.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate, count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine.confine.files import open_binary
from execengine.errors import FileOpError
from execengine.fileops.paths import Scope, string_arg
from execengine.fileops.scan import SCAN_BYTES, SCAN_SECONDS, Scanner
from execengine.fileops.suggest import suggest_paths

if TYPE_CHECKING:
    from execengine.fileops.ops import FileSettings

ToolResult = dict[str, Any]


def read_file(scope: Scope, args: dict[str, Any], settings: FileSettings) -> ToolResult:
    try:
        raw = string_arg(args, "path")
        offset, limit = check_window(args.get("offset", 1), args.get("limit", 500))
        path, shown = scope.path(raw, "reading")
        if not path.exists():
            raise not_found(path, shown, scope)
        return read_window(path, shown, offset, limit, settings.max_read_chars,
                           cancelled=settings.cancelled).to_dict()
    except FileOpError as exc:
        return exc.to_dict()


def not_found(path: Any, shown: str, scope: Scope) -> FileOpError:
    # an anchored path (a confined write) is mapped back to the name the caller gave
    suggestions = suggest_paths(Path(scope.lexical(path)), scope.cwd)
    hint = f"; did you mean: {', '.join(suggestions)}" if suggestions else ""
    return FileOpError(f"File not found: {shown!r}{hint}", suggestions=suggestions)


def open_failed(exc: OSError, what: str, shown: str) -> FileOpError:
    """What a file tool says when opening or reading ``shown`` failed with ``exc``."""
    if isinstance(exc, IsADirectoryError):
        return FileOpError(f"Cannot {what} {shown!r}: it is a directory")
    if isinstance(exc, FileNotFoundError):
        return FileOpError(f"File not found: {shown!r}")
    if isinstance(exc, PermissionError):
        return FileOpError(f"Permission denied: {shown!r}")
    return FileOpError(f"Cannot {what} {shown!r}: {exc.strerror or exc}")


# -- binary or text -----------------------------------------------------------------------

#: how much of a file :func:`looks_binary` inspects
SNIFF_BYTES = 8192
_TEXT_CONTROL = {7, 8, 9, 10, 12, 13, 27}
#: every byte but the control bytes that are not text; and every byte but those and the
#: bytes of 0x80 and above: what ``bytes.translate`` deletes to count the rest, in C
_KEEP_CONTROL = bytes(b for b in range(256) if b >= 32 or b in _TEXT_CONTROL)
_KEEP_CONTROL_OR_HIGH = bytes(b for b in range(32, 128)) + bytes(sorted(_TEXT_CONTROL))


def looks_binary(sample: bytes) -> bool:
    """True for data that is not text: a NUL byte, or mostly control bytes / invalid UTF-8."""
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the end of the sample is still text
        if exc.start < len(sample) - 4:
            odd = len(sample.translate(None, _KEEP_CONTROL_OR_HIGH))  # >= 0x80, or control
            return odd / len(sample) > 0.30
    odd = len(sample.translate(None, _KEEP_CONTROL))
    return odd / len(sample) > 0.10


# -- reading a window of lines -------------------------------------------------------------

MAX_LINE_CHARS = 2000
MAX_LIMIT = 5000
#: how much of one line is read at a time (the rest of a longer line is skipped)
_LINE_BYTES = 4 * (MAX_LINE_CHARS + 8)
#: a file up to this size is read whole (one read, one decode per line shown); a larger
#: one is streamed line by line, so its memory stays that of the window
_WHOLE_BYTES = 1 << 20
#: ... and has at most this many lines (each becomes an object: a megabyte of short lines
#: would be a spike of tens of megabytes per call)
_WHOLE_LINES = 20_000


@dataclass
class ReadResult:
    path: str
    content: str
    total_lines: int
    offset: int
    lines_returned: int
    file_size: int
    truncated: bool = False
    next_offset: int | None = None
    long_lines: list[int] = field(default_factory=list)
    #: false when counting the lines stopped at the scan's budget: ``total_lines`` is
    #: then a lower bound
    total_known: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "content": self.content,
            "total_lines": self.total_lines,
            "offset": self.offset,
            "lines_returned": self.lines_returned,
            "file_size": self.file_size,
            "truncated": self.truncated,
        }
        if self.long_lines:
            out["long_lines"] = self.long_lines
        hints = []
        if not self.total_known:
            out["total_lines_is_lower_bound"] = True
            hints.append(f"the file is large: its lines were counted to {self.total_lines} "
                         f"(at most {SCAN_BYTES // (1024 * 1024)} MB or {SCAN_SECONDS:g} s "
                         "of reading per call), there are more")
        if self.long_lines:
            hints.append(f"{len(self.long_lines)} line(s) longer than {MAX_LINE_CHARS} "
                         "characters were cut")
        if self.next_offset is not None:
            out["next_offset"] = self.next_offset
            of = f"at least {self.total_lines}" if not self.total_known else self.total_lines
            hints.append(f"showing lines {self.offset}-{self.next_offset - 1} of {of}; use "
                         f"offset={self.next_offset} to continue")
        if hints:
            out["hint"] = "; ".join(hints)
        return out


def check_window(offset: Any, limit: Any) -> tuple[int, int]:
    for name, value in (("offset", offset), ("limit", limit)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise FileOpError(f"{name} must be an integer, got {value!r}")
    if offset < 1:
        raise FileOpError(f"offset is 1-based (the first line is 1), got {offset}")
    if limit < 1:
        raise FileOpError(f"limit must be at least 1, got {limit}")
    return offset, min(limit, MAX_LIMIT)


def read_window(path: Path, shown: str, offset: int, limit: int, max_chars: int, *,
                cancelled: Callable[[], bool] | None = None) -> ReadResult:
    """Read lines ``offset .. offset+limit-1`` of ``path`` (already resolved and allowed).
    ``cancelled()`` true stops the reading (see :mod:`.scan`)."""
    if path.is_dir():
        raise FileOpError(f"Cannot read {shown!r}: it is a directory; use search_files with "
                          "target='files' to list it", is_directory=True)
    try:
        fh = open_binary(path)  # verified under a confining policy; closed below
    except OSError as exc:
        raise open_failed(exc, "read", shown) from exc
    with fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(SNIFF_BYTES)
        if looks_binary(head):
            raise FileOpError(
                f"Cannot read {shown!r}: it is a binary file ({size} bytes), not text",
                binary=True, file_size=size,
            )
        fh.seek(0)
        return _collect(fh, shown, offset, limit, max_chars, size, cancelled)


def _collect(fh: Any, shown: str, offset: int, limit: int, max_chars: int,
             size: int, cancelled: Callable[[], bool] | None) -> ReadResult:
    whole = _whole_lines(fh, size)
    total_known = True
    if whole is not None:
        total = len(whole)
        end = min(total, offset + limit - 1)
        rows = _window_rows(whole, offset, end, max_chars)
        parts, returned, stopped_at, long_lines = rows or _rows(
            ((n, whole[n - 1], 0) for n in range(offset, end + 1)), max_chars)
    else:
        # a line is read at most _LINE_BYTES at a time: one endless line costs no more; a
        # hole is jumped; the reading stops at the scan's budget or when cancelled
        scan = Scanner(fh.fileno(), size, cancelled=cancelled)
        counted = [0]

        def window() -> Iterator[tuple[int, bytes, int]]:
            for number, (raw, skipped) in enumerate(scan.lines(_LINE_BYTES), start=1):
                counted[0] = number
                if number >= offset + limit:
                    return
                if number >= offset:
                    yield number, raw, skipped

        parts, returned, stopped_at, long_lines = _rows(window(), max_chars)
        total = counted[0]
        if scan.stopped is None and total >= offset:
            total += scan.count_rest()
        total_known = scan.stopped is None
        if scan.stopped == "cancelled" or (scan.stopped and total < offset):
            raise _stopped(scan, shown, offset)
    if total and offset > total:
        raise FileOpError(
            f"offset {offset} is past the end of {shown!r}, which has {total} lines",
            total_lines=total,
        )
    if total == 0 and offset > 1:
        raise FileOpError(f"offset {offset} is past the end of {shown!r}, which is empty",
                          total_lines=0)
    last_shown = offset + returned - 1
    next_offset = last_shown + 1 if last_shown < total or not total_known else None
    return ReadResult(
        path=shown,
        content="\n".join(parts),
        total_lines=total,
        offset=offset,
        lines_returned=returned,
        file_size=size,
        truncated=stopped_at is not None,
        next_offset=next_offset,
        long_lines=long_lines,
        total_known=total_known,
    )


def _stopped(scan: Scanner, shown: str, offset: int) -> FileOpError:
    if scan.stopped == "cancelled":
        return FileOpError(f"read_file of {shown!r} stopped: the execution that made this "
                           "call has ended")
    return FileOpError(
        f"read_file of {shown!r} stopped after reading {scan.read_bytes // (1024 * 1024)} MB "
        f"in {scan.seconds:.1f} s without reaching line {offset} (each call reads at most "
        f"{SCAN_BYTES // (1024 * 1024)} MB and {SCAN_SECONDS:g} s of a file); use "
        "search_files to find the lines you want, or a smaller offset")


def _whole_lines(fh: Any, size: int) -> list[bytes] | None:
    """The lines of a file up to :data:`_WHOLE_BYTES` and :data:`_WHOLE_LINES` (newlines
    dropped), read at once; None (``fh`` rewound) when it is larger, has more lines, or a
    line is as long as :data:`_LINE_BYTES`, which the streaming path reads in pieces. Both
    give the same rows: ``\\n`` is never part of a UTF-8 sequence, so decoding line by line
    is decoding the whole."""
    if size > _WHOLE_BYTES:
        return None
    data: bytes = fh.read(size + 1)  # one byte more tells a file that grew since its stat
    if len(data) > size or data.count(b"\n") > _WHOLE_LINES:
        fh.seek(0)
        return None
    lines = data.split(b"\n")
    if lines[-1] == b"":  # a newline at the end ends the last line; an empty file: none
        lines.pop()
    if lines and max(map(len, lines)) >= _LINE_BYTES:
        fh.seek(0)
        return None
    return lines


def _window_rows(lines: list[bytes], offset: int, end: int, max_chars: int
                 ) -> tuple[list[str], int, int | None, list[int]] | None:
    """:func:`_rows` of lines ``offset`` to ``end`` of a file read whole, a window at a
    time instead of line by line; None when a line must be cut (:func:`_rows` does it)."""
    if end < offset:
        return [], 0, None, []
    window = b"\n".join(lines[offset - 1:end]).decode("utf-8", errors="replace")
    texts = window.split("\n")
    if "\r" in window:
        texts = [t.rstrip("\r") for t in texts]
    if offset == 1 and texts[0].startswith("\ufeff"):
        texts[0] = texts[0][1:]
    if max(map(len, texts)) > MAX_LINE_CHARS:
        return None
    rows = [f"{number:>6}|{text}" for number, text in zip(count(offset), texts)]
    # the first row always; each next one while the rows so far, newlines included, fit
    fit = max(1, bisect_right(list(accumulate(len(row) + 1 for row in rows)), max_chars))
    if fit < len(rows):
        return rows[:fit], fit, offset + fit, []
    return rows, fit, None, []


def _rows(lines: Iterator[tuple[int, bytes, int]], max_chars: int
          ) -> tuple[list[str], int, int | None, list[int]]:
    """Numbered rows of the window's ``(number, raw line, characters skipped)``, up to
    ``max_chars``: the rows, how many, the first line left out (or None), the cut lines."""
    parts: list[str] = []
    used = 0
    returned = 0
    long_lines: list[int] = []
    for number, raw, skipped in lines:
        text = raw.decode("utf-8", errors="replace").rstrip("\n").rstrip("\r")
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if len(text) + skipped > MAX_LINE_CHARS:
            long_lines.append(number)
            text = (text[:MAX_LINE_CHARS] + f" … [line cut: {len(text) + skipped} "
                    f"characters, {MAX_LINE_CHARS} shown]")
        row = f"{number:>6}|{text}"
        if returned and used + len(row) + 1 > max_chars:
            return parts, returned, number, long_lines
        parts.append(row)
        used += len(row) + 1
        returned += 1
    return parts, returned, None, long_lines
