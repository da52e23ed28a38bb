"""Pure-Python search backend: the walk of :mod:`.walk` and ``re`` line by line."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import IO

try:  # the regex engine releases the GIL and takes a timeout; the file tools shipped to an
    import regex  # ssh remote (standard library only) fall back to re there
except ImportError:  # pragma: no cover - exercised on the remote
    regex = None

from execengine.confine.files import open_binary
from execengine.errors import FileOpError, SearchTooSlowError
from execengine.fileops.search.query import Hit, Query
from execengine.fileops.search.walk import walk_files
from execengine.fileops.textio import MAX_EDIT_BYTES, bounded_lines

_CHUNK = 1 << 20
#: files up to this size are read whole; bigger ones a line at a time
_WHOLE = MAX_EDIT_BYTES
#: how much of one line a streamed search looks at
_LINE = 1 << 20
#: how long one search may spend matching (a script's pattern may backtrack for ever)
SEARCH_SECONDS = 10.0


class PythonBackend:
    name = "python"

    def files(self, query: Query, max_hits: int) -> list[str]:
        out: list[str] = []
        for path in walk_files(query.root):
            out.append(path)
            if len(out) >= max_hits:
                break
        return out

    def grep(self, query: Query, max_hits: int) -> list[Hit]:
        assert query.regex is not None
        search = _bounded_search(query.pattern)
        literal = query.pattern if _is_literal(query.pattern) else None
        hits: list[Hit] = []
        for path in walk_files(query.root):
            glob = query.file_glob
            if glob is not None and not glob.on_path and not glob.matches(path):
                continue  # a cheap pre-filter; results.py applies every glob again
            try:
                with open_binary(path) as fh:  # verified under a confining policy
                    data = fh.read(_WHOLE + 1)
                    if len(data) > _WHOLE:  # a big file is searched a line at a time
                        hits += _grep_stream(fh, path, data, search, max_hits - len(hits))
                        if len(hits) >= max_hits:
                            return hits
                        continue
            except SearchTooSlowError:
                raise
            except (OSError, FileOpError):
                continue
            if b"\x00" in data:
                continue  # binary, as ripgrep decides it
            text = data.decode("utf-8", errors="replace")
            if literal is not None and literal not in text:
                continue
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            for number, line in enumerate(lines, start=1):
                if search(line):
                    hits.append(Hit(path, number, line))
                    if len(hits) >= max_hits:
                        return hits
        return hits


def _bounded_search(pattern: str) -> Callable[[str], object]:
    """``search(line)`` for ``pattern`` that cannot stall the host: the ``regex`` engine
    releases the GIL while it matches (``re`` holds it, so one catastrophically
    backtracking pattern from a script, ``(a|aa)+$``, froze every thread of the engine,
    timeouts included), and the whole search has :data:`SEARCH_SECONDS`."""
    if regex is None:
        return re.compile(pattern).search
    try:
        compiled = regex.compile(pattern)  # VERSION0: the re-compatible syntax
    except regex.error as exc:
        raise FileOpError(f"invalid regex {pattern!r}: {exc}") from None
    deadline = time.monotonic() + SEARCH_SECONDS

    def search(line: str) -> object:
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return compiled.search(line, timeout=left, concurrent=True)
        except TimeoutError:
            raise SearchTooSlowError(
                f"search_files: the pattern {pattern!r} took longer than "
                f"{SEARCH_SECONDS:g}s (it backtracks too much: simplify nested "
                "repetitions such as (a+)+)") from None

    return search


def _grep_stream(fh: IO[bytes], path: str, start: bytes, search: Callable[[str], object],
                 max_hits: int) -> list[Hit]:
    """Search a big file from its start a line at a time, each line's first :data:`_LINE`
    bytes (``start`` is what was read of it already): memory stays bounded however big
    the file or long its lines (a script may make either)."""
    if b"\x00" in start:
        return []  # binary, as above
    fh.seek(0)
    hits: list[Hit] = []
    for number, (raw, _) in enumerate(bounded_lines(fh, _LINE), start=1):
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        if search(line):
            hits.append(Hit(path, number, line))
            if len(hits) >= max_hits:
                break
    return hits


def _is_literal(pattern: str) -> bool:
    return all(c.isalnum() or c in " _-:=,;'\"/<>@#%&~`" for c in pattern)
