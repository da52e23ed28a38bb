"""search_files: regex content search and file-name search, ripgrep or pure Python.

:func:`search` validates the request, runs a backend (:mod:`.rg` when ``rg`` is on PATH,
else :mod:`.pysearch`; ``backend=`` forces one) and shapes the result in :mod:`.results`.
"""

from __future__ import annotations

from typing import Any

from execengine.errors import FileOpError, PatternUnsupported
from execengine.fileops.paths import Scope, int_arg
from execengine.fileops.search.base import Backend
from execengine.fileops.search.pysearch import PythonBackend
from execengine.fileops.search.query import MAX_HITS, Query, make_query
from execengine.fileops.search.results import file_result, grep_result
from execengine.fileops.search.rg import RipgrepBackend, find_rg

BACKENDS = ("auto", "ripgrep", "python")


def pick_backend(name: str = "auto") -> Backend:
    if name not in BACKENDS:
        raise FileOpError(f"unknown search backend {name!r}; use one of {', '.join(BACKENDS)}")
    exe = find_rg() if name in ("auto", "ripgrep") else None
    if exe is not None:
        return RipgrepBackend(exe)
    if name == "ripgrep":
        raise FileOpError("ripgrep (rg) is not installed")
    return PythonBackend()


def search(scope: Scope, args: dict[str, Any], *, backend: str = "auto",
           max_hits: int = MAX_HITS) -> dict[str, Any]:
    """Run ``search_files`` with the tool's arguments; returns the result dict."""
    raw_path = args.get("path") or "."
    if not isinstance(raw_path, str):
        raise FileOpError(f"path must be a string, got {type(raw_path).__name__}")
    root, shown_root = scope.path(raw_path, "searching")
    if not root.exists():
        raise FileOpError(f"Path not found: {shown_root!r}")
    query = make_query(
        args.get("pattern"), root,
        target=args.get("target") or "content",
        file_glob=args.get("file_glob"),
        limit=int_arg(args, "limit", 50, minimum=1),
        offset=int_arg(args, "offset", 0),
        output_mode=args.get("output_mode") or "content",
        context=int_arg(args, "context", 0),
    )
    engine = pick_backend(backend)
    result = _run(engine, query, scope, max_hits)
    result["backend"] = engine.name
    return result


def _run(engine: Backend, query: Query, scope: Scope, max_hits: int) -> dict[str, Any]:
    if query.target == "files":
        paths = engine.files(query, max_hits)
        return file_result(query, paths, scope.guard, scope.show, len(paths) >= max_hits)
    try:
        hits = engine.grep(query, max_hits)
    except PatternUnsupported:
        engine = PythonBackend()
        hits = engine.grep(query, max_hits)
    return grep_result(query, hits, scope.guard, scope.show, len(hits) >= max_hits)


__all__ = ["BACKENDS", "pick_backend", "search"]
