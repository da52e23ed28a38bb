"""Small parsing helpers shared by a workflow's two ways.

The sequential plan calls them on the host; :func:`prelude` copies their source into the
programmatic script, so both ways parse tool results with the very same code (the script
side stays standard-library Python >= 3.8). User workflows may use them too.
"""

from __future__ import annotations

import inspect
import re
from typing import Any


def unnumber(content: str) -> str:
    """File text from ``read_file``'s numbered lines (``"     7|text"``)."""
    return "\n".join(re.sub(r"^\s*\d+\|", "", ln, count=1) for ln in content.splitlines())


def settings(text: str) -> dict[str, str]:
    """``key: value`` / ``key = value`` / ``"key": value`` settings of a config file."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        m = re.match(r'^\s*"?([A-Za-z_]\w*)"?\s*[:=]\s*"?([^"{\[,]*?)"?,?\s*$', ln)
        if m and m.group(2) and m.group(1) not in out:
            out[m.group(1)] = m.group(2)
    return out


def fact(content: str, label: str) -> str:
    """The value after ``label:`` in page text (``"License: MIT"`` -> ``"MIT"``)."""
    m = re.search(re.escape(label) + r":\**\s*([^\s*<]+)", content)
    return m.group(1) if m else ""


def failing_modules(output: str) -> list[str]:
    """Test modules with a failure or error in ``python -m unittest`` output, sorted."""
    found = re.findall(r"^(?:FAIL|ERROR): \w+ \((tests\.test_\w+)\.", output, re.M)
    return sorted(set(found))


def search_paths(result: Any) -> list[str]:
    """Paths named by a ``search_files`` result (content or file-name search), sorted."""
    if not isinstance(result, dict):
        return []
    paths = [m.get("path", "") for m in result.get("matches", []) if isinstance(m, dict)]
    paths += [f if isinstance(f, str) else f.get("path", "") for f in result.get("files", [])]
    return sorted({p[2:] if p.startswith("./") else p for p in paths if p})


def prelude(*tools: str) -> str:
    """The start of a script: imports, the tools it uses, and these helpers' source."""
    names = ", ".join(sorted(tools))
    funcs = "\n\n".join(inspect.getsource(f) for f in
                        (unnumber, settings, fact, failing_modules, search_paths))
    return ("from __future__ import annotations\n"
            "import json, re\n"
            "from typing import Any\n"
            f"from hermes_tools import {names}\n\n" + funcs + "\n")
