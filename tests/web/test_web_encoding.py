from __future__ import annotations

import gzip
import zlib

import pytest

from execengine.web.encoding import Decoder, decode_text, detect_charset


def test_gzip_is_decoded_incrementally() -> None:
    data = gzip.compress(b"hello world " * 1000)
    dec = Decoder("gzip", 1_000_000)
    out = b"".join(dec.feed(data[i:i + 100]) for i in range(0, len(data), 100))
    assert out == b"hello world " * 1000 and not dec.capped


def test_gzip_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(b"\0" * 20_000_000)  # about 20 KB on the wire
    dec = Decoder("gzip", 100_000)
    out = dec.feed(bomb)
    assert len(out) == 100_000 and dec.capped


def test_concatenated_gzip_members_are_all_decoded() -> None:
    dec = Decoder("gzip", 1000)
    assert dec.feed(gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS], ids=["zlib", "raw"])
def test_deflate_with_and_without_zlib_wrapper(wbits: int) -> None:
    comp = zlib.compressobj(wbits=wbits)
    data = comp.compress(b"deflated text") + comp.flush()
    assert Decoder("deflate", 1000).feed(data) == b"deflated text"


def test_identity_body_is_capped_too() -> None:
    dec = Decoder("", 10)
    assert dec.feed(b"0123456789abc") == b"0123456789" and dec.capped


def test_corrupt_and_unknown_codings_are_value_errors() -> None:
    with pytest.raises(ValueError, match="corrupt gzip"):
        Decoder("gzip", 100).feed(b"not gzip at all")
    with pytest.raises(ValueError, match="unsupported Content-Encoding 'br'"):
        Decoder("br", 100)


@pytest.mark.parametrize(("body", "ctype", "html", "expected"), [
    ("café".encode("latin-1"), "text/html; charset=ISO-8859-1", True, "iso8859-1"),
    ("café".encode(), 'text/plain; charset="UTF-8"', False, "utf-8"),
    ("café".encode(), "text/plain; charset=no-such-charset", False, "utf-8"),
    ("café au lait".encode("latin-1"), "text/plain; charset=no-such", False, "cp1252"),
    (b'<meta charset="windows-1251"><p>\xcf\xf0\xe8', "text/html", True, "cp1251"),
    (b'<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">', "text/html",
     True, "koi8-r"),
    (b"\xef\xbb\xbfbom", "text/plain; charset=latin-1", False, "utf-8-sig"),
    ("ünïcode".encode(), None, True, "utf-8"),
])
def test_charset_detection(body: bytes, ctype: str | None, html: bool, expected: str) -> None:
    assert detect_charset(body, ctype, html=html) == expected


def test_decode_never_raises_on_garbage() -> None:
    text = decode_text(b"ok \xff\xfe\xfd", "text/plain; charset=utf-8")
    assert text.startswith("ok ") and "\ufffd" in text


def test_a_body_cut_inside_a_character_is_still_utf8() -> None:
    body = "naïve ".encode() * 50 + "é".encode()[:1]
    assert detect_charset(body, None) == "utf-8"
