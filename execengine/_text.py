"""Words for what people read: a count with its noun, text cut to a width, a table."""

from __future__ import annotations

import textwrap
from typing import Any


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


def table(rows: list[list[Any]], header: list[str], *, width: int | None = None,
          wrap: int | None = None) -> str:
    """Columns padded to their widest cell. With ``width`` and ``wrap`` (a column's
    index), that column is narrowed so that the table fits ``width`` and its cells are
    wrapped onto more lines (at spaces; a word longer than the column is split)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(header))]
    if width is not None and wrap is not None:
        others = sum(w for i, w in enumerate(widths) if i != wrap) + 2 * (len(widths) - 1)
        widths[wrap] = max(min(widths[wrap], width - others), len(header[wrap]), 12)

    def line(parts: list[str]) -> str:
        return "  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip()

    lines = [line(header), "  ".join("-" * w for w in widths)]
    for r in cells:
        if wrap is None or len(r[wrap]) <= widths[wrap]:
            lines.append(line(r))
            continue
        pieces = textwrap.wrap(r[wrap], widths[wrap], break_on_hyphens=False) or [""]
        lines.append(line([*r[:wrap], pieces[0], *r[wrap + 1:]]))
        lines.extend(line(["" if i != wrap else p for i in range(len(r))]) for p in pieces[1:])
    return "\n".join(lines)
