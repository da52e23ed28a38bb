"""Helpers of the file tools (read_file, write_file, patch, search_files).

- :mod:`.paths`: resolving path arguments against the task's directory; the denied-path guard
- :mod:`.textio`: binary detection, atomic writes
- :mod:`.suggest`: close-name suggestions for missing files
- :mod:`.reading`: numbered, paged reads
- :mod:`.replace`: ``old_string`` → ``new_string`` with a whitespace-tolerant fallback
- :mod:`.udiff`: parsing and applying multi-file unified diffs, all or nothing
- :mod:`.search`: content and file-name search, ripgrep-backed or pure Python, same results
"""

from __future__ import annotations

from execengine.errors import FileOpError
from execengine.fileops.paths import PathGuard, Scope

__all__ = ["FileOpError", "PathGuard", "Scope"]
