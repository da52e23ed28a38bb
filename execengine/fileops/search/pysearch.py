"""Pure-Python search backend: the walk of :mod:`.walk` and ``re`` line by line."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from execengine.confine.files import open_binary
from execengine.errors import FileOpError
from execengine.fileops.search.query import Hit, Query
from execengine.fileops.search.walk import walk_files
from execengine.fileops.textio import MAX_EDIT_BYTES, bounded_lines

_CHUNK = 1 << 20
#: files up to this size are read whole; bigger ones a line at a time
_WHOLE = MAX_EDIT_BYTES
#: how much of one line a streamed search looks at
_LINE = 1 << 20


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
        search = query.regex.search
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
