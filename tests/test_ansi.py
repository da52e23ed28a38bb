from __future__ import annotations

from execengine.ansi import MAX_HELD, AnsiStripper, strip_ansi


def test_strip_ansi_kinds() -> None:
    text = ("\x1b[1;31mred\x1b[0m \x1b]0;title\x07a \x1b]8;;u\x1b\\b \x1bPq#0\x1b\\c "
            "\x1b7d\x1b8 \x9b2Je \x1b(Bf\x1bc")
    assert strip_ansi(text) == "red a b c d e f"


def test_stripper_holds_only_unfinished_sequences() -> None:
    s = AnsiStripper()
    assert s.feed("x\x1b") == "x"
    assert s.feed("[3") == ""
    assert s.feed("1mred\x1b]0;ti") == "red"
    assert s.feed("tle\x07!") == "!"
    assert s.feed("\x1b[2") + s.feed("Jz") == "z"
    assert s.feed("\x1b(") + s.feed("Bq") == "q"
    assert s.flush() == ""


def test_stripper_does_not_hold_without_bound() -> None:
    s = AnsiStripper()
    out = s.feed("\x1b]" + "t" * (MAX_HELD + 10))  # an OSC that never ends
    assert out == ""  # stripped as it is, not held forever
    assert s.feed("after") == "after"
