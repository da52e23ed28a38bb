"""``search_tools`` and ``describe_tool``: a script discovers the tools of its stub.

Runs in the child, standard library only (Python >= 3.8). The catalogue is the stub's own
functions: their names, signatures and docstrings, so it can never disagree with them.
"""

from __future__ import annotations

import re

# difflib and inspect are imported where they are used: together they cost the child about
# 20 ms at start-up, and most scripts never describe a tool

TYPE_CHECKING = False  # no typing import at run time: the child starts fast
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _summary(doc: str | None) -> str:
    first = (doc or "").strip().split("\n", 1)[0]
    return first[:200]


class Catalogue:
    """The tools of one stub, searchable by words."""

    def __init__(self, namespace: Mapping[str, Any], names: list[str]) -> None:
        self._functions: dict[str, Callable[..., Any]] = {
            n: namespace[n] for n in names if callable(namespace.get(n))}

    def search(self, query: str, limit: int = 10) -> list[dict[str, str]]:
        """Tools matching ``query`` (words of the name or description), best first:
        a list of ``{"name", "summary"}``. An empty query lists the first ``limit``."""
        if not isinstance(query, str):
            raise TypeError("search_tools() takes a string query")
        wanted = _words(query)
        phrase = query.lower().strip()
        scored = []
        for name, fn in self._functions.items():
            name_words = _words(name.replace("_", " "))
            doc_words = _words(fn.__doc__ or "")
            score = 3 * len(wanted & name_words) + len(wanted & doc_words)
            if phrase and phrase in name.lower():
                score += 5
            if score or not wanted:
                scored.append((-score, name))
        scored.sort()
        return [{"name": n, "summary": _summary(self._functions[n].__doc__)}
                for _, n in scored[: max(0, int(limit))]]

    def describe(self, name: str) -> dict[str, str]:
        """``{"name", "signature", "doc"}`` of tool ``name``; ``{"error": ...}`` with close
        names when there is no such tool."""
        import inspect

        fn = self._functions.get(name)
        if fn is None:
            import difflib

            close = difflib.get_close_matches(str(name), list(self._functions), n=3)
            hint = (" Did you mean: " + ", ".join(close) + "?") if close else ""
            return {"error": f"no tool named {name!r}.{hint}"}
        return {"name": name, "signature": _signature(name, fn), "doc": inspect.getdoc(fn) or ""}


def _annotation(value: Any) -> str:
    if isinstance(value, str):  # the stub uses postponed annotations: already source text
        return value
    return str(getattr(value, "__name__", None) or repr(value))


def _signature(name: str, fn: Callable[..., Any]) -> str:
    """``name(a: int, b: str = 'x') -> dict``, annotations shown as written."""
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return name + "(...)"
    parts = []
    for param in sig.parameters.values():
        text = param.name
        if param.annotation is not param.empty:
            text += ": " + _annotation(param.annotation)
        if param.default is not param.empty:
            text += " = " + repr(param.default)
        parts.append(text)
    returns = ""
    if sig.return_annotation is not sig.empty:
        returns = " -> " + _annotation(sig.return_annotation)
    return f"{name}({', '.join(parts)}){returns}"
