"""The search backend seam: ripgrep (:mod:`.rg`) or pure Python (:mod:`.pysearch`).

Both list files in the same order (see :mod:`.walk`) and return every matching line up to
``max_hits``; everything after that (denied paths, globs, sorting, paging, context, output
modes) happens once, in :mod:`.results`, so the two give identical answers.
"""

from __future__ import annotations

from typing import Protocol

from execengine.fileops.search.query import Hit, Query


class Backend(Protocol):
    name: str

    def files(self, query: Query, max_hits: int) -> list[str]:
        """Absolute paths of the searchable files under the root, in walk order."""
        ...

    def grep(self, query: Query, max_hits: int) -> list[Hit]:
        """Matching lines of the searchable text files, in walk order."""
        ...
