"""Small parsing helpers for the sequential plans (what a model reads off a tool result).

Only the sequential way uses them. Scripts carry their own parsing code, written as a model
would write it, and expected answers come from the generated records: a bug here makes the
sequential answers wrong, and the ground-truth check fails. User workflows may use them too.
"""

from __future__ import annotations

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


def grep_pairs(output: str) -> dict[str, dict[str, str]]:
    """``{path: {key: value}}`` from ``grep -Ho`` lines of ``path:key: value`` settings (the
    shell strategies' output, whatever the config's format)."""
    out: dict[str, dict[str, str]] = {}
    for line in output.splitlines():
        path, _, hit = line.partition(":")
        m = re.match(r'"?(\w+)"?\s*[:=]\s*"?([\w-]+)', hit)
        if m:
            out.setdefault(path, {})[m.group(1)] = m.group(2)
    return out
