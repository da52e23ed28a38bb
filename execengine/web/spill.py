"""Long pages: head + tail (:mod:`execengine.truncation`), with the full text kept on disk.

A page longer than its character budget keeps its beginning (80 %) and its end (20 %), cut
at line breaks when one is near, joined by the one marker, which also names the file that
holds the whole text. The files live in one private directory per :class:`SpillStore`
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
from typing import Any

from execengine.truncation import Cut
from execengine.truncation import head_tail as cut

HEAD_SHARE = 0.8


def head_tail(text: str, limit: int, *, path: str | None = None) -> Cut:
    """``text`` cut to at most ``limit`` characters (marker included) when it is longer:
    80 % head, 20 % tail, at line breaks, the marker naming the file with the whole text."""
    return cut(text, limit, head_share=HEAD_SHARE, what="PAGE", lines=True,
               note=f"the full text is in {path}" if path else "")


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

    @property
    def holds_resources(self) -> bool:
        return self._dir is not None

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
