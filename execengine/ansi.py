"""ANSI escape sequences: the one place that knows their shape.

:func:`strip_ansi` removes complete sequences from a text (the engine's output capture uses
it on a script's output). :class:`AnsiStripper` does the same for a stream that arrives in
pieces (the terminal tool's output): an escape sequence cut by a read boundary is held back
until its end arrives, so no fragment of it leaks into the text.
"""

from __future__ import annotations

import re

#: CSI / OSC / other ESC sequences, and stray C1 single-byte controls as text
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"        # CSI ... final byte
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC ... ST
    r"|\x1b[ -/]*[0-Z\\-~]"            # ESC 7, ESC c, ESC ( B ... (two-byte and nF)
    r"|\x9b[0-?]*[ -/]*[@-~]"          # 8-bit CSI
)
#: the start of a sequence whose end has not arrived yet, at the end of a piece
_UNFINISHED = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*\Z"   # CSI without its final byte
    r"|\x1b\][^\x07\x1b]*\x1b?\Z"       # OSC without BEL / ST
    r"|\x1b[PX^_][^\x1b]*\x1b?\Z"       # DCS, SOS, PM, APC without ST
    r"|\x1b[ -/]*\Z"                    # a lone ESC, or one with intermediates only
)
#: longest unfinished sequence held back; longer ones are stripped as they are
MAX_HELD = 4096


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences."""
    return _ANSI.sub("", text)


class AnsiStripper:
    """Incremental :func:`strip_ansi`: ``feed`` pieces, then ``flush`` at the end."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        text = self._held + text
        self._held = ""
        esc = max(text.rfind("\x1b", max(0, len(text) - MAX_HELD)),
                  text.rfind("\x9b", max(0, len(text) - MAX_HELD)))
        if esc >= 0 and _UNFINISHED.match(text, esc):
            text, self._held = text[:esc], text[esc:]
        return strip_ansi(text)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return strip_ansi(held)
