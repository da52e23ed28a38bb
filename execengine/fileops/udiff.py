"""Unified diffs: parsing a (multi-file) patch and applying its hunks to text.

Accepted: ``diff --git`` and plain ``---``/``+++`` file headers (``a/``/``b/`` prefixes
stripped, ``/dev/null`` for created and deleted files), ``@@ -l,s +l,s @@`` hunks (a bare
``@@`` is located by its context alone), ``\\ No newline at end of file``. Models often get
the line counts wrong or drop the space of empty context lines; both are tolerated, the
counts only help to tell a removed ``-- x`` line from a file header.

Hunks are located at their stated line first, then at the nearest exact match, then at the
nearest match ignoring trailing whitespace, then ignoring indentation. A hunk that matches
nowhere is a :class:`FileOpError` naming the file, the hunk and the first line that differs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from execengine.errors import FileOpError

_HUNK = re.compile(r"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+(.*)$")
_BARE_HUNK = re.compile(r"^@@+(?:\s.*)?$")


@dataclass
class Hunk:
    header: str
    old_start: int | None  # 1-based; None for a bare "@@"
    old_count: int | None
    new_count: int | None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" "|"-"|"+", text)
    old_no_eol: bool = False
    new_no_eol: bool = False
    anchor: str | None = None  # a line the hunk comes after (bare "@@ anchor" hunks)

    @property
    def old(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "+"]

    @property
    def new(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "-"]

    def counts_met(self) -> bool:
        if self.old_count is None or self.new_count is None:
            return False
        return len(self.old) >= self.old_count and len(self.new) >= self.new_count


@dataclass
class FilePatch:
    old_path: str | None  # None: the file is created
    new_path: str | None  # None: the file is deleted
    hunks: list[Hunk] = field(default_factory=list)
    whole: bool = False  # a deletion of the whole file, whatever its content

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def action(self) -> str:
        if self.old_path is None:
            return "created"
        if self.new_path is None:
            return "deleted"
        return "renamed" if self.old_path != self.new_path else "modified"


def _header_path(raw: str) -> str | None:
    text = raw.split("\t", 1)[0].strip()
    if text.startswith('"') and text.endswith('"') and len(text) > 1:
        text = text[1:-1]
    return None if text == "/dev/null" else text


def _strip_prefixes(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    if (old is None or old.startswith("a/")) and (new is None or new.startswith("b/")) and (
        old or new
    ):
        old = old[2:] if old else old
        new = new[2:] if new else new
    return old, new


def parse(text: str) -> list[FilePatch]:
    """The file patches in ``text``; :class:`FileOpError` when it is not a unified diff."""
    lines = text.replace("\r\n", "\n").split("\n")
    files: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        is_file_header = line.startswith("--- ") and nxt is not None and nxt.startswith("+++ ")
        if is_file_header and (hunk is None or hunk.counts_met() or hunk.old_count is None):
            old, new = _strip_prefixes(_header_path(line[4:]), _header_path(nxt[4:]))  # type: ignore[index]
            if old is None and new is None:
                raise FileOpError(f"malformed patch: line {i + 1}: both sides are /dev/null")
            current, hunk = FilePatch(old, new), None
            files.append(current)
            i += 2
            continue
        if line.startswith("diff --git ") or line.startswith("Index: "):
            hunk = None
            i += 1
            continue
        m = _HUNK.match(line)
        if m or (_BARE_HUNK.match(line) and line.startswith("@@")):
            if current is None:
                raise FileOpError(f"malformed patch: line {i + 1}: hunk before any "
                                  "'--- a/file' / '+++ b/file' header")
            if m:
                hunk = Hunk(line, int(m.group(1)), int(m.group(2) or 1), int(m.group(4) or 1))
            else:
                hunk = Hunk(line, None, None, None)
            current.hunks.append(hunk)
            i += 1
            continue
        if hunk is not None:
            if line[:1] in (" ", "-", "+"):
                hunk.lines.append((line[0], line[1:]))
            elif line == "":
                hunk.lines.append((" ", ""))
            elif line.startswith("\\"):
                if hunk.lines and hunk.lines[-1][0] in (" ", "-"):
                    hunk.old_no_eol = True
                if hunk.lines and hunk.lines[-1][0] in (" ", "+"):
                    hunk.new_no_eol = True
            elif hunk.counts_met():
                hunk = None  # prose after the hunk
            else:
                raise FileOpError(
                    f"malformed patch: line {i + 1}: {line[:80]!r} inside a hunk of "
                    f"{current.path if current else '?'!r} does not start with ' ', '-' or '+'"
                )
        i += 1
    if not files:
        raise FileOpError("malformed patch: no '--- a/<file>' / '+++ b/<file>' header found; "
                          "mode='patch' expects a unified diff")
    for fp in files:
        for h in fp.hunks:
            _trim_blank_tail(h)
        if not fp.hunks and fp.action in ("modified",):
            raise FileOpError(f"malformed patch: no hunks for {fp.path!r}")
    return files


def _trim_blank_tail(h: Hunk) -> None:
    """Drop empty context lines that are only the blank lines between hunks or files."""
    while h.lines and h.lines[-1] == (" ", "") and h.old_count is not None and (
        len(h.old) > h.old_count
    ):
        h.lines.pop()
    if h.old_count is None:
        while h.lines and h.lines[-1] == (" ", ""):
            h.lines.pop()


# -- applying ------------------------------------------------------------------------------


@dataclass
class Text:
    """A file's text as lines plus whether it ends with a newline."""

    lines: list[str]
    eol: bool

    @classmethod
    def of(cls, text: str) -> Text:
        if text == "":
            return cls([], True)
        eol = text.endswith("\n")
        return cls((text[:-1] if eol else text).split("\n"), eol)

    def render(self) -> str:
        if not self.lines:
            return ""
        return "\n".join(self.lines) + ("\n" if self.eol else "")


def apply(fp: FilePatch, original: str) -> str:
    """The text after ``fp``'s hunks; raises :class:`FileOpError` naming a failing hunk."""
    text = Text.of(original)
    crlf = bool(text.lines) and all(x.endswith("\r") for x in text.lines)
    floor = 0  # hunks apply in order and never overlap
    delta = 0
    total = len(fp.hunks)
    for number, h in enumerate(fp.hunks, start=1):
        old, new = h.old, h.new
        if crlf:
            old = [x if x.endswith("\r") else x + "\r" for x in old]
            new = [x if x.endswith("\r") else x + "\r" for x in new]
        if h.old_start is None:
            expected = floor
            if h.anchor is not None:
                found = _locate(text.lines, [h.anchor], floor, floor)
                if found is not None:
                    expected = floor = found + 1
        elif not old:
            expected = h.old_start + delta  # pure insertion after line old_start
        else:
            expected = h.old_start - 1 + delta
        at = _locate(text.lines, old, max(expected, floor), floor)
        if at is None:
            raise FileOpError(
                f"patch failed: {fp.path!r} hunk {number} of {total} ({h.header.strip()}) "
                f"does not apply: {_mismatch(text.lines, old, max(expected, floor))}. "
                "No file was changed.",
                failed_file=fp.path, failed_hunk=number,
            )
        if old and at + len(old) == len(text.lines):
            if h.new_no_eol:
                text.eol = False
            elif h.old_no_eol:
                text.eol = True
        elif not old and at == len(text.lines) and h.new_no_eol:
            text.eol = False
        text.lines[at:at + len(old)] = new
        floor = at + len(new)
        delta += len(new) - len(old)
    return text.render()


def _locate(lines: list[str], old: list[str], expected: int, floor: int) -> int | None:
    if not old:
        return min(expected, len(lines))
    n = len(old)
    last = len(lines) - n
    if last < floor:
        return None
    for norm in (None, str.rstrip, str.strip):
        want = old if norm is None else [norm(x) for x in old]
        order = sorted(range(floor, last + 1), key=lambda k: (abs(k - expected), k))
        for k in order:
            window = lines[k:k + n]
            if norm is not None:
                window = [norm(x) for x in window]
            if window == want:
                return k
    return None


def _mismatch(lines: list[str], old: list[str], at: int) -> str:
    for j, want in enumerate(old):
        if at + j >= len(lines):
            return (f"expected {want!r} at line {at + j + 1}, but the file has only "
                    f"{len(lines)} lines")
        if lines[at + j].rstrip() != want.rstrip():
            return (f"expected {want!r} at line {at + j + 1}, found {lines[at + j]!r} "
                    "(and the hunk's lines were found nowhere else in the file)")
    return "its context lines were not found"
