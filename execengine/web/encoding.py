"""Response bodies: content decoding with a size cap, and charset detection.

Decompression is streamed and bounded, so a small gzip bomb cannot expand past the cap.
The charset comes from the ``Content-Type`` header, then a byte-order mark, then (for HTML)
a ``<meta>`` tag in the first 2 KiB, then UTF-8 if the bytes are valid UTF-8, then
windows-1252 (the web's historical default). Unknown charset names are ignored, never fatal.
"""

from __future__ import annotations

import codecs
import re
import zlib
from email.message import Message

_META = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE
)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: content codings we ask for and can undo
SUPPORTED_CODINGS = ("gzip", "deflate")


class Decoder:
    """Undo a ``Content-Encoding`` incrementally, never producing more than ``limit`` bytes."""

    def __init__(self, coding: str, limit: int) -> None:
        coding = coding.strip().lower()
        if coding in ("", "identity"):
            self._z = None
        elif coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._z = None  # zlib-wrapped or raw: decided by the first bytes
        else:
            raise ValueError(f"unsupported Content-Encoding {coding!r}")
        self.coding = coding
        self.limit = limit
        self.produced = 0
        #: True once output was cut at ``limit``
        self.capped = False

    def feed(self, data: bytes) -> bytes:
        if self.coding == "deflate" and self._z is None:
            # "deflate" is meant to be zlib-wrapped, but many servers send raw deflate.
            wrapped = len(data) >= 2 and (data[0] * 256 + data[1]) % 31 == 0 and data[0] & 15 == 8
            self._z = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        if self._z is None:
            out = data
        else:
            room = self.limit - self.produced + 1
            try:
                out = self._z.decompress(data, room)
                while self._z.unused_data and self.coding != "deflate" and len(out) < room:
                    rest = self._z.unused_data  # another gzip member follows
                    self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    out += self._z.decompress(rest, room - len(out))
            except zlib.error as exc:
                raise ValueError(f"corrupt {self.coding} body: {exc}") from exc
        if self.produced + len(out) > self.limit:
            out = out[: self.limit - self.produced]
            self.capped = True
        self.produced += len(out)
        return out


def header_charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    msg = Message()
    msg["content-type"] = content_type
    found = msg.get_param("charset")
    return found.strip().strip("'\"") if isinstance(found, str) else None


def known_codec(name: str | None) -> str | None:
    """The Python codec for a charset label, or None for unknown labels."""
    if not name:
        return None
    try:
        return codecs.lookup(name.strip().lower()).name
    except (LookupError, ValueError):
        return None


def detect_charset(body: bytes, content_type: str | None, *, html: bool = False) -> str:
    """The codec to decode ``body`` with (see the module docstring for the order)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    codec = known_codec(header_charset(content_type))
    if codec:
        return codec
    if html:
        match = _META.search(body[:2048])
        if match:
            codec = known_codec(match.group(1).decode("ascii", "replace"))
            if codec:
                return "utf-8" if codec.startswith("utf-16") else codec
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a body cut (at the size cap) in the middle of a character is still UTF-8
        if exc.reason != "unexpected end of data":
            return "cp1252"
    return "utf-8"


def decode_text(body: bytes, content_type: str | None, *, html: bool = False) -> str:
    """``body`` as text; undecodable bytes become U+FFFD, never an exception."""
    codec = detect_charset(body, content_type, html=html)
    return body.decode(codec, "replace")
