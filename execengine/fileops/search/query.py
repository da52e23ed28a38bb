"""A validated search request and the hits both backends produce."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from execengine.errors import FileOpError
from execengine.fileops.search.globs import Glob, compile_glob

TARGETS = ("content", "files")
OUTPUT_MODES = ("content", "files_with_matches", "count")
#: directory (and file) names never searched, at any depth below the root
SKIPPED_NAMES = (".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox",
                 ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hg", ".svn")
#: matched lines (or listed files) collected at most; beyond it the count is a lower bound
MAX_HITS = 20_000
MAX_CONTEXT = 10
MAX_LIMIT = 1000


@dataclass(frozen=True)
class Hit:
    path: str  # absolute
    line: int  # 1-based
    content: str  # the line without its terminator


@dataclass(frozen=True)
class Query:
    pattern: str
    regex: re.Pattern[str] | None  # None for target="files"
    name_glob: Glob | None  # target="files": the pattern as a glob
    root: Path
    file_glob: Glob | None
    target: str = "content"
    output_mode: str = "content"
    limit: int = 50
    offset: int = 0
    context: int = 0


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Python's verdict on the regex decides for both backends."""
    if "\n" in pattern or "\\n" in pattern.replace("\\\\", ""):
        raise FileOpError("pattern must match within one line: search is line by line "
                          "(remove the newline from the pattern)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return re.compile(pattern)
    except (re.error, FutureWarning, DeprecationWarning) as exc:
        raise FileOpError(f"invalid regex {pattern!r}: {exc}") from None


def make_query(pattern: object, root: Path, *, target: object = "content",
               file_glob: object = None, limit: int = 50, offset: int = 0,
               output_mode: object = "content", context: int = 0) -> Query:
    if not isinstance(pattern, str) or not pattern:
        raise FileOpError("pattern must be a non-empty string")
    if target not in TARGETS:
        raise FileOpError(f"target must be 'content' or 'files', got {target!r}")
    if output_mode not in OUTPUT_MODES:
        raise FileOpError(f"output_mode must be one of {', '.join(OUTPUT_MODES)}, "
                          f"got {output_mode!r}")
    if file_glob is not None and (not isinstance(file_glob, str) or not file_glob):
        raise FileOpError(f"file_glob must be a non-empty string, got {file_glob!r}")
    if limit < 1:
        raise FileOpError(f"limit must be at least 1, got {limit}")
    try:
        fglob = compile_glob(file_glob) if isinstance(file_glob, str) else None
        name_glob = compile_glob(pattern) if target == "files" else None
    except (ValueError, re.error) as exc:
        raise FileOpError(f"invalid glob: {exc}") from None
    regex = compile_pattern(pattern) if target == "content" else None
    return Query(pattern, regex, name_glob, root, fglob, str(target), str(output_mode),
                 min(limit, MAX_LIMIT), offset, min(context, MAX_CONTEXT))
