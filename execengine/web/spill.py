"""Head + tail truncation, with the full text kept on disk.

A page longer than its character budget keeps its beginning (80 %) and its end (20 %), cut
at line breaks when one is near, joined by a marker saying how much was left out and which
file holds the whole text. The files live in one private directory per :class:`SpillStore`
(one per registry, removed when the registry closes).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from typing import Any

HEAD_SHARE = 0.8


@dataclass(frozen=True)
class Cut:
    text: str
    #: characters left out (0 when the text fit)
    omitted: int
    total: int


def head_tail(text: str, limit: int, *, path: str | None = None) -> Cut:
    """``text`` cut to at most ``limit`` characters (marker included) when it is longer."""
    total = len(text)
    if total <= limit:
        return Cut(text, 0, total)
    where = f"; the full text is in {path}" if path else ""
    marker = f"\n\n[... {total:,} characters in all, {total:,} omitted here{where} ...]\n\n"
    budget = max(limit - len(marker), 0)
    head_len = int(budget * HEAD_SHARE)
    tail_len = budget - head_len
    head = _cut_back(text[:head_len])
    tail = _cut_forward(text[total - tail_len:]) if tail_len else ""
    omitted = total - len(head) - len(tail)
    marker = f"\n\n[... {omitted:,} of {total:,} characters omitted{where} ...]\n\n"
    return Cut(head + marker + tail, omitted, total)


def _cut_back(head: str) -> str:
    """End the head at a line break if one is near its end."""
    nl = head.rfind("\n")
    return head[:nl] if nl >= 0 and len(head) - nl <= _near(head) else head


def _cut_forward(tail: str) -> str:
    nl = tail.find("\n")
    return tail[nl + 1:] if 0 <= nl < _near(tail) else tail


def _near(part: str) -> float:
    return max(len(part) * 0.1, 40)


class SpillStore:
    """A private directory of full texts. A context manager; ``close`` is idempotent."""

    def __init__(self, *_: Any, directory: str | None = None) -> None:
        self._parent = directory
        self._dir: str | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def directory(self) -> str | None:
        return self._dir

    def save(self, text: str, url: str) -> str:
        """Write ``text`` to a file named after ``url`` and return its path."""
        with self._lock:
            if self._closed:
                raise RuntimeError("SpillStore is closed")
            if self._dir is None:
                if self._parent:
                    os.makedirs(self._parent, exist_ok=True)
                self._dir = tempfile.mkdtemp(prefix="execengine-web-", dir=self._parent)
            directory = self._dir
        digest = hashlib.sha256(url.encode("utf-8", "replace")).hexdigest()[:10]
        slug = re.sub(r"[^A-Za-z0-9]+", "-", re.sub(r"^https?://", "", url)).strip("-")[:60]
        path = os.path.join(directory, f"{slug or 'page'}-{digest}.md")
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path

    def close(self) -> None:
        with self._lock:
            directory, self._dir = self._dir, None
            self._closed = True
        if directory:
            shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> SpillStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_dir", None):
            warnings.warn(f"unclosed SpillStore {self._dir}", ResourceWarning, stacklevel=1)
