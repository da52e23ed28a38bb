"""From a backend's raw hits to the tool result: the one place both backends share.

Denied paths dropped, globs applied (relative to the search root), order fixed (path
components, then line), the page cut (``offset``/``limit``), context lines read for the page
only, the output mode shaped. Paths are shown relative to the working directory when below
it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from execengine.confine.files import open_binary
from execengine.errors import FileOpError
from execengine.fileops.paths import PathGuard
from execengine.fileops.search.query import Hit, Query
from execengine.fileops.textio import MAX_EDIT_BYTES

MAX_LINE_CHARS = 500


def _rel(query: Query, path: str) -> str:
    root = str(query.root)
    if path == root:
        return os.path.basename(path)
    return os.path.relpath(path, root).replace(os.sep, "/")


def _sort_key(query: Query) -> Callable[[str], tuple[str, ...]]:
    def key(path: str) -> tuple[str, ...]:
        return tuple(_rel(query, path).split("/"))

    return key


def _allowed(guard: PathGuard) -> Callable[[str], bool]:
    seen: dict[str, bool] = {}

    def ok(path: str) -> bool:
        if path not in seen:
            seen[path] = guard.reason(path) is None
        return seen[path]

    return ok


def _clip(text: str) -> str:
    text = text[:-1] if text.endswith("\r") else text
    if len(text) > MAX_LINE_CHARS:
        return text[:MAX_LINE_CHARS] + f" … [{len(text)} characters]"
    return text


def _page(query: Query, total: int, shown: int, capped: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"total_count": total, "offset": query.offset, "limit": query.limit}
    nxt = query.offset + shown
    if capped:
        out["total_count_is_lower_bound"] = True
    if nxt < total:
        out["truncated"] = True
        out["next_offset"] = nxt
        out["hint"] = (f"showing {query.offset + 1}-{nxt} of {total}"
                       f"{'+' if capped else ''}; use offset={nxt} for more")
    else:
        out["truncated"] = False
    return out


def file_result(query: Query, paths: list[str], guard: PathGuard, show: Callable[[str], str],
                capped: bool) -> dict[str, Any]:
    ok = _allowed(guard)
    assert query.name_glob is not None
    glob = query.name_glob
    chosen = [p for p in paths if ok(p) and glob.matches(_rel(query, p))
              and (query.file_glob is None or query.file_glob.matches(_rel(query, p)))]
    chosen.sort(key=_sort_key(query))
    page = chosen[query.offset:query.offset + query.limit]
    return {"files": [show(p) for p in page], **_page(query, len(chosen), len(page), capped)}


def grep_result(query: Query, hits: list[Hit], guard: PathGuard, show: Callable[[str], str],
                capped: bool) -> dict[str, Any]:
    ok = _allowed(guard)
    fglob = query.file_glob
    kept = [h for h in hits if ok(h.path) and (fglob is None or fglob.matches(_rel(query, h.path)))]
    key = _sort_key(query)
    kept.sort(key=lambda h: (key(h.path), h.line))
    if query.output_mode == "files_with_matches":
        files = list(dict.fromkeys(h.path for h in kept))
        page = files[query.offset:query.offset + query.limit]
        return {"files": [show(p) for p in page], **_page(query, len(files), len(page), capped)}
    if query.output_mode == "count":
        counts: dict[str, int] = {}
        for h in kept:
            counts[h.path] = counts.get(h.path, 0) + 1
        items = list(counts.items())
        page_items = items[query.offset:query.offset + query.limit]
        return {
            "counts": [{"path": show(p), "count": n} for p, n in page_items],
            "total_matches": len(kept),
            **_page(query, len(items), len(page_items), capped),
        }
    page_hits = kept[query.offset:query.offset + query.limit]
    matches = [{"path": show(h.path), "line": h.line, "content": _clip(h.content)}
               for h in page_hits]
    if query.context > 0:
        _add_context(matches, page_hits, query.context)
    return {"matches": matches, **_page(query, len(kept), len(page_hits), capped)}


def _add_context(matches: list[dict[str, Any]], hits: list[Hit], n: int) -> None:
    cache: dict[str, list[str]] = {}
    for match, hit in zip(matches, hits, strict=True):
        if hit.path not in cache:
            try:
                with open_binary(hit.path) as fh:  # verified under a confining policy
                    # context from the first MAX_EDIT_BYTES only: a script's file may be huge
                    text = fh.read(MAX_EDIT_BYTES).decode("utf-8", errors="replace")
            except (OSError, FileOpError):
                text = ""
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            cache[hit.path] = lines
        lines = cache[hit.path]
        i = hit.line - 1
        match["before"] = [{"line": k + 1, "content": _clip(lines[k])}
                           for k in range(max(0, i - n), min(i, len(lines)))]
        match["after"] = [{"line": k + 1, "content": _clip(lines[k])}
                          for k in range(i + 1, min(len(lines), i + 1 + n))]
