from __future__ import annotations

import pytest

from execengine.terminal.output import HeadTail, Ring, Utf8Stream


def test_headtail_keeps_everything_under_the_limit() -> None:
    h = HeadTail(100)
    for part in ("abc", "def", "g" * 50):
        h.feed(part)
    assert h.text() == "abcdef" + "g" * 50
    assert not h.truncated


def test_headtail_keeps_head_and_tail_with_a_marker() -> None:
    h = HeadTail(100)
    text = "".join(f"{i:05d}\n" for i in range(1000))
    for i in range(0, len(text), 7):
        h.feed(text[i:i + 7])
    out = h.text()
    assert h.truncated and h.total == len(text)
    assert out.startswith(text[:40])
    assert out.endswith(text[-60:])
    assert (f"... [OUTPUT TRUNCATED - {len(text) - 100:,} chars omitted out of {len(text):,} "
            "total] ...") in out


def test_utf8_split_across_reads_and_invalid_bytes() -> None:
    s = Utf8Stream()
    data = "é€".encode() + b"\xff" + b"x"
    out = "".join(s.feed(data[i:i + 1]) for i in range(len(data))) + s.flush()
    assert out == "é€\ufffdx"


def test_ring_offsets_and_drops() -> None:
    r = Ring(10)
    r.write("0123456789")
    text, off, dropped = r.read(0)
    assert (text, off, dropped) == ("0123456789", 10, 0)
    r.write("abcde")
    text, off, dropped = r.read(10)
    assert (text, off, dropped) == ("abcde", 15, 0)
    text, off, dropped = r.read(0)
    assert text == "56789abcde" and dropped == 5 and off == 15


def test_bad_limits() -> None:
    with pytest.raises(ValueError):
        HeadTail(0)
    with pytest.raises(ValueError):
        Ring(0)
