"""The host's ZMTP codec, fed byte strings: no socket involved."""

from __future__ import annotations

import struct

import pytest

from execengine.rpc import connection as zmtp

READY = zmtp.command(b"READY", b"\x0bSocket-Type" + struct.pack("!I", 6) + b"DEALER")


def decoder(limit: int = 1 << 20) -> zmtp.Decoder:
    return zmtp.Decoder(limit)


def test_greeting_and_frames_split_at_every_byte():
    wire = (zmtp.GREETING + READY + zmtp.frame(b"hello") + zmtp.frame(b"x" * 300)
            + zmtp.frame(b"a", zmtp.FLAG_MORE) + zmtp.frame(b"b")
            + zmtp.command(b"PING", b"\x00\x0actx"))
    d = decoder()
    got = []
    for i in range(len(wire)):
        d.feed(wire[i:i + 1])
        got.extend(d.messages())
    assert got == [zmtp.Message(parts=(b"hello",)), zmtp.Message(parts=(b"x" * 300,)),
                   zmtp.Message(parts=(b"a", b"b")),
                   zmtp.Message(command=b"PING", data=b"\x00\x0actx")]
    assert d.handshaken and d.buffered() == 0


@pytest.mark.parametrize("wire, why", [
    (b"GET / HTTP/1.1\r\n", "bad greeting"),
    (zmtp.GREETING[:10] + b"\x02" + zmtp.GREETING[11:], "3.x"),
    (zmtp.GREETING[:12] + b"CURVE".ljust(20, b"\0") + zmtp.GREETING[32:], "NULL"),
    (zmtp.GREETING + zmtp.frame(b"data"), "before READY"),
    (zmtp.GREETING + zmtp.command(b"READY", b"\x0bSocket-Type\x00\x00\x00\x03PUB"), "PUB"),
    (zmtp.GREETING + READY + struct.pack("!BQ", zmtp.FLAG_LONG, 1 << 62), "larger"),
    (zmtp.GREETING + READY + bytes([0xF8, 0]), "reserved"),
    (zmtp.GREETING + READY + zmtp.frame(b"\x04PING", zmtp.FLAG_COMMAND | zmtp.FLAG_MORE),
     "MORE"),
    (zmtp.GREETING + READY + zmtp.frame(b"\xffX", zmtp.FLAG_COMMAND), "malformed"),
    (zmtp.GREETING + READY + zmtp.frame(b"p", zmtp.FLAG_MORE) * 17, "parts"),
])
def test_violations_are_reported_before_anything_big_is_buffered(wire, why):
    d = decoder(1024)
    d.feed(wire)
    with pytest.raises(zmtp.ProtocolViolation, match=why):
        list(d.messages())
    assert d.buffered() <= len(wire)


def test_a_message_over_the_limit_across_parts_is_refused():
    d = decoder(1000)
    d.feed(zmtp.GREETING + READY + zmtp.frame(b"x" * 600, zmtp.FLAG_MORE)
           + struct.pack("!BQ", zmtp.FLAG_LONG, 600))  # the second part's header alone is enough
    with pytest.raises(zmtp.ProtocolViolation, match="larger"):
        list(d.messages())


def test_our_ready_names_a_router():
    d = decoder()
    d.feed(zmtp.GREETING + zmtp.ready())
    assert list(d.messages()) == []  # a ROUTER peer is acceptable (and we are one)
    assert d.handshaken
