"""Pure-Python search backend: the walk of :mod:`.walk` and ``re`` line by line."""

from __future__ import annotations

from execengine.confine.files import open_binary
from execengine.errors import FileOpError
from execengine.fileops.search.query import Hit, Query
from execengine.fileops.search.walk import walk_files

_CHUNK = 1 << 20


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
                    data = fh.read()
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


def _is_literal(pattern: str) -> bool:
    return all(c.isalnum() or c in " _-:=,;'\"/<>@#%&~`" for c in pattern)
