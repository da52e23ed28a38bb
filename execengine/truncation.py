"""Head + tail truncation: one cut, one marker, for every place that shortens text.

Long output keeps its beginning and its end (the end of a log usually holds the error) and
says, in one wording everywhere, how much was left out:
``... [OUTPUT TRUNCATED - 582,112 chars omitted out of 630,034 total] ...`` (the
reference's wording; ``what`` names the stream: OUTPUT, STDERR, RESULT, PAGE). The
streaming accumulators (:class:`execengine.launch.supervise.OutputCapture` for a child's
bytes, :class:`execengine.terminal.output.HeadTail` for a command's text) keep head and
tail as data arrives and use :func:`marker` for the same words.
"""

from __future__ import annotations

from dataclasses import dataclass


def marker_line(omitted: int, total: int, what: str = "OUTPUT") -> str:
    """The one wording: ``... [OUTPUT TRUNCATED - N chars omitted out of M total] ...``."""
    return f"... [{what} TRUNCATED - {omitted:,} chars omitted out of {total:,} total] ..."


def marker(omitted: int, total: int, what: str = "OUTPUT", note: str = "") -> str:
    """What stands between head and tail, on lines of its own; ``note`` (where the whole
    text is...) follows on the next line."""
    return (f"\n\n{marker_line(omitted, total, what)}\n" + (f"[{note}]\n" if note else "")
            + "\n")


@dataclass(frozen=True)
class Cut:
    text: str
    #: characters left out (0 when the text fit)
    omitted: int
    total: int

    @property
    def truncated(self) -> bool:
        return self.omitted > 0


def head_tail(text: str, limit: int, *, head_share: float = 0.4, what: str = "OUTPUT",
              note: str = "", lines: bool = False) -> Cut:
    """``text`` cut to at most ``limit`` characters, marker included, when it is longer.

    ``head_share`` of what fits goes to the head, the rest to the tail; with ``lines`` the
    cut points move to line boundaries (never losing more than one partial line each).
    """
    total = len(text)
    if total <= limit:
        return Cut(text, 0, total)
    budget = max(limit - len(marker(total, total, what, note)), 0)
    head_len = int(budget * head_share)
    tail_len = budget - head_len
    head, tail = text[:head_len], (text[total - tail_len:] if tail_len else "")
    if lines:
        head, tail = _to_line_end(head), _from_line_start(tail)
    omitted = total - len(head) - len(tail)
    return Cut(head + marker(omitted, total, what, note) + tail, omitted, total)


def _to_line_end(head: str) -> str:
    cut = head.rfind("\n")
    return head[: cut + 1] if cut >= len(head) // 2 else head


def _from_line_start(tail: str) -> str:
    cut = tail.find("\n")
    return tail[cut + 1:] if 0 <= cut < len(tail) // 2 else tail
