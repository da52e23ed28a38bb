"""``patch`` in replace mode: ``old_string`` → ``new_string`` inside one file's text.

An exact match is tried first. A non-unique match without ``replace_all`` is an error that
lists the line numbers of every candidate. With no exact match, a whitespace-tolerant
fallback compares whole lines, first ignoring trailing whitespace, then indentation, then
runs of whitespace; a hit is re-indented to the file's indentation and reported as
``match="whitespace-tolerant (...)"``. When nothing matches, the error points at the most
similar passage.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from execengine.errors import FileOpError

_WS = re.compile(r"\s+")
_STRATEGIES: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("trailing whitespace ignored", lambda s: s.rstrip()),
    ("indentation ignored", lambda s: s.strip()),
    ("whitespace runs collapsed", lambda s: _WS.sub(" ", s).strip()),
)


@dataclass(frozen=True)
class Replacement:
    text: str  # the new file text
    count: int
    match: str  # "exact" or "whitespace-tolerant (<how>)"
    lines: tuple[int, ...]  # 1-based first lines of the replaced passages


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def replace(text: str, old: str, new: str, *, replace_all: bool = False,
            shown: str = "file") -> Replacement:
    if not old:
        raise FileOpError("old_string must not be empty (to create a file use write_file)")
    if old == new:
        raise FileOpError("old_string and new_string are identical; nothing to change")
    starts = _find_all(text, old)
    if starts:
        lines = tuple(line_of(text, i) for i in starts)
        if len(starts) > 1 and not replace_all:
            raise _not_unique(shown, lines)
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        return Replacement(updated, len(starts), "exact", lines)
    return _tolerant(text, old, new, replace_all, shown)


def _find_all(text: str, needle: str) -> list[int]:
    out, i = [], text.find(needle)
    while i != -1:
        out.append(i)
        i = text.find(needle, i + len(needle))
    return out


def _not_unique(shown: str, lines: tuple[int, ...]) -> FileOpError:
    where = ", ".join(str(n) for n in lines[:20]) + (" …" if len(lines) > 20 else "")
    return FileOpError(
        f"old_string is not unique in {shown!r}: {len(lines)} matches, at lines {where}. "
        "Include more surrounding lines to pick one, or pass replace_all=true.",
        candidate_lines=list(lines),
    )


def _tolerant(text: str, old: str, new: str, replace_all: bool, shown: str) -> Replacement:
    file_lines = text.split("\n")
    old_lines = old.strip("\n").split("\n")
    n = len(old_lines)
    for how, norm in _STRATEGIES:
        want = [norm(x) for x in old_lines]
        if not any(want):
            continue
        normed = [norm(x) for x in file_lines]
        hits = [i for i in range(len(file_lines) - n + 1) if normed[i:i + n] == want]
        hits = _non_overlapping(hits, n)
        if not hits:
            continue
        lines = tuple(i + 1 for i in hits)
        if len(hits) > 1 and not replace_all:
            raise _not_unique(shown, lines)
        new_lines = new.strip("\n").split("\n") if new.strip("\n") else []
        for i in reversed(hits):
            found = file_lines[i:i + n]
            fresh = _reindent(new_lines, old_lines, found)
            if all(x.endswith("\r") for x in found):  # keep CRLF files CRLF
                fresh = [x if x.endswith("\r") else x + "\r" for x in fresh]
            file_lines[i:i + n] = fresh
        return Replacement("\n".join(file_lines), len(hits), f"whitespace-tolerant ({how})",
                           lines)
    raise _not_found(text, old, shown)


def _non_overlapping(hits: list[int], n: int) -> list[int]:
    out: list[int] = []
    for i in hits:
        if not out or i >= out[-1] + n:
            out.append(i)
    return out


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(new_lines: list[str], old_lines: list[str], found: list[str]) -> list[str]:
    """Give ``new_lines`` the file's indentation where old_string's differed from it.

    Each indentation used in old_string maps to the one the file has on the matched line;
    a new line takes the mapping of the longest old indentation it starts with.
    """
    mapping: dict[str, str] = {}
    for o, f in zip(old_lines, found, strict=True):
        if o.strip():
            mapping.setdefault(_indent(o), _indent(f))
    if all(k == v for k, v in mapping.items()):
        return new_lines
    out = []
    for line in new_lines:
        if not line.strip():
            out.append(line)
            continue
        ind = _indent(line)
        base = max((k for k in mapping if ind.startswith(k)), key=len, default=None)
        out.append(line if base is None else mapping[base] + line[len(base):])
    return out


def _not_found(text: str, old: str, shown: str) -> FileOpError:
    file_lines = text.split("\n")
    old_lines = old.strip("\n").split("\n")
    n = max(1, len(old_lines))
    best, best_at = 0.0, -1
    target = "\n".join(x.strip() for x in old_lines)
    if len(file_lines) * n <= 200_000:
        for i in range(max(1, len(file_lines) - n + 1)):
            window = "\n".join(x.strip() for x in file_lines[i:i + n])
            ratio = difflib.SequenceMatcher(None, target, window, autojunk=False).quick_ratio()
            if ratio > best:
                ratio = difflib.SequenceMatcher(None, target, window, autojunk=False).ratio()
                if ratio > best:
                    best, best_at = ratio, i
    message = f"old_string not found in {shown!r} (also tried whitespace-tolerant matching)."
    fields: dict[str, object] = {}
    if best_at >= 0 and best >= 0.5:
        snippet = "\n".join(file_lines[best_at:best_at + n])
        message += (f" The most similar passage starts at line {best_at + 1} "
                    f"({best:.0%} similar):\n{snippet}")
        fields["closest_line"] = best_at + 1
    else:
        message += " Re-read the file to get its current text."
    return FileOpError(message, **fields)
