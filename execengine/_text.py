"""Words for what people read: a count with its noun, and text cut to a width."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 tool call``, ``2 tool calls`` (``many``: an irregular plural)."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def shorten(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters at a word where it can be, with
    ``…`` where it was cut."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    if " " in cut and text[width - 1] != " ":
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"
