"""Helpers of the file tools (read_file, write_file, patch, search_files).

- :mod:`.ops`: the operations by tool name, as a file backend runs them
- :mod:`.paths`: the arguments' checks; resolving path arguments against the task's
  directory; the denied-path guard; who owns what a tool creates
- :mod:`.reading`: ``read_file``'s numbered, paged reads; binary detection
- :mod:`.textio`: whole-text reads for editing, atomic writes
- :mod:`.suggest`: close-name suggestions for missing files
- :mod:`.replace`: ``old_string`` → ``new_string`` with a whitespace-tolerant fallback
- :mod:`.udiff`: parsing and applying multi-file unified diffs, all or nothing
- :mod:`.search`: content and file-name search, ripgrep-backed or pure Python, same results
"""

from __future__ import annotations

from execengine.errors import FileOpError
from execengine.fileops.paths import PathGuard, Scope

__all__ = ["FileOpError", "PathGuard", "Scope"]
