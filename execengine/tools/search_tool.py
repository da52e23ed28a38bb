"""search_files (toolset ``file``): regex search in file contents, or file-name search.

Uses ripgrep when ``rg`` is installed and an equivalent pure-Python search otherwise; both
give the same results (see :mod:`execengine.fileops.search`).
"""

from __future__ import annotations

from functools import partial

from execengine.config import Config
from execengine.discovery import ToolSpecs
from execengine.fileops.search.query import OUTPUT_MODES, TARGETS
from execengine.host.base import run_operation
from execengine.host.factory import files_available
from execengine.policy import ToolPolicy

specs = ToolSpecs()


def search_available(config: Config) -> bool | str:
    """Searching needs a usable working directory; ripgrep is optional (Python fallback)."""
    return files_available(config)


SEARCH_SCHEMA = {
    "description": "Search files. target='content' (default): regex (Python syntax) matched "
    "line by line; returns matches [{path, line, content}], total_count and paging "
    "(offset/limit, next_offset). output_mode 'files_with_matches' lists files, 'count' "
    "counts per file; context adds lines before/after each match. target='files': the "
    "pattern is a glob on file names ('*.py', 'src/**/test_*.py'). .gitignore is honoured; "
    ".git, node_modules, virtualenvs and binary files are skipped. Use this instead of "
    "grep/find in the terminal.",
    "parameters": {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regex (content) or glob (files)"},
            "target": {"type": "string", "enum": list(TARGETS), "default": "content"},
            "path": {"type": "string", "default": ".",
                     "description": "Folder or file to search"},
            "file_glob": {"type": "string",
                          "description": "Only files matching this glob, e.g. '*.py'"},
            "limit": {"type": "integer", "default": 50, "minimum": 1},
            "offset": {"type": "integer", "default": 0, "minimum": 0},
            "output_mode": {"type": "string", "enum": list(OUTPUT_MODES),
                            "default": "content"},
            "context": {"type": "integer", "default": 0, "minimum": 0,
                        "description": "Lines of context around each match"},
        },
        "required": ["pattern"],
    },
}

specs.register("search_files", "file", SEARCH_SCHEMA, partial(run_operation, "search_files"),
               check_fn=search_available,
               emoji="🔍", max_result_size_chars=100_000,
               policy=ToolPolicy(script_callable=True, read_only=True, parallel_safe=True))
