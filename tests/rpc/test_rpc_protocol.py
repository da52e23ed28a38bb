from __future__ import annotations

import json
import time

import pytest

from execengine.rpc import connection
from execengine.rpc.connection import Call, Hello, Invalid, parse


def test_hello_and_call_parse():
    assert parse(b'{"v":1,"type":"hello","exec":"e","token":"t","pid":3}') == Hello("e", "t", 3)
    assert parse(b'{"v":1,"type":"call","id":"7","tool":"x","args":{"a":1}}') == Call(
        "7", "x", {"a": 1})
    assert parse(b'{"v":1,"type":"call","id":8,"tool":"x"}') == Call("8", "x", {})


def test_bad_messages_are_values_with_reasons():
    cases = {
        b"\xff\xfe": "UTF-8 JSON",
        b"{not json": "UTF-8 JSON",
        b"[1,2]": "JSON object",
        b'{"v":2,"type":"call","id":"1","tool":"x"}': "version",
        b'{"v":1,"type":"call","tool":"x"}': "'id'",
        b'{"v":1,"type":"call","id":"1","tool":""}': "'tool'",
        b'{"v":1,"type":"call","id":"1","tool":"x","args":[1]}': "'args'",
        b'{"v":1,"type":"zzz","id":"1"}': "unknown message type",
        b'{"v":1,"type":"hello","exec":1,"token":"t"}': "hello",
    }
    for frame, needle in cases.items():
        msg = parse(frame)
        assert isinstance(msg, Invalid), frame
        assert needle in msg.error, (frame, msg.error)
    # the id is kept when the reply can name the request
    assert parse(b'{"v":1,"type":"call","id":"9","tool":"x","args":3}').id == "9"
    assert parse(b'{"v":1,"type":"call","id":"' + b"x" * 500 + b'","tool":"x"}').id is None


def test_replies_are_versioned_json():
    assert json.loads(connection.result("3", "ok")) == {"v": 1, "type": "result", "id": "3",
                                                        "result": "ok"}
    assert json.loads(connection.error(None, "bad"))["id"] is None
    assert json.loads(connection.welcome("e", 5))["max_tool_calls"] == 5
    assert json.loads(connection.denied("no"))["type"] == "denied"


# -- containment: nesting bounded before decoding, replies that cannot fail to encode ----

def test_too_deep_counts_only_brackets_outside_strings():
    assert connection.too_deep(b'{"a":"' + b"[" * 10_000 + b'"}') is None
    assert connection.too_deep(b"[" * 64 + b"]" * 64) is None
    assert "deeper than 64" in (connection.too_deep(b"[" * 65 + b"]" * 65) or "")
    assert "nested values" in (connection.too_deep(b"[]" * 1_000_001) or "")


@pytest.mark.parametrize("text", ["\\", '"', 'a\\"b', "\\\\", "\x5c\\", "]}["])
def test_too_deep_reads_escapes_as_json_does(text):
    """Strings holding escaped backslashes and quotes end where JSON ends them: brackets
    after such a string count, brackets inside it do not (each frame is what json.dumps
    makes, so the decoder agrees)."""
    inside = json.dumps({"s": text + "[" * 100 + text, "t": text}).encode()
    assert connection.too_deep(inside) is None
    deep = json.dumps({"s": text, "d": json.loads("[" * 70 + "]" * 70)}).encode()
    assert "deeper than 64" in (connection.too_deep(deep) or "")


def test_too_deep_is_linear_in_an_unterminated_string_of_escaped_quotes():
    """A frame the old string pattern scanned in quadratic time, on the loop thread and
    holding the interpreter lock (a 112 KB one: 28 s; this one: weeks). Bounded here only
    against that: linear, it takes well under a second."""
    frame = b"[" * 65 + b'"' + b'\\"' * 4_000_000
    start = time.monotonic()
    assert isinstance(parse(frame), Invalid)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("frame", [b"[" * 100_000, b'{"v":1,"a":' + b"{" * 5000,
                                   b'{"v":1,"type":"call","id":"1","tool":"t","args":'
                                   + b'{"x":' * 70 + b"1" + b"}" * 71])
def test_deep_frames_are_invalid_not_a_recursion_error(frame):
    assert isinstance(connection.parse(frame), connection.Invalid)


DEEP = b"[" * 70 + b"]" * 70


@pytest.mark.parametrize(("frame", "msg_id"), [
    # what the child's client sends: the id ahead of the arguments
    (b'{"v": 1, "type": "call", "id": "12", "tool": "t", "args": {"a": ' + DEEP + b"}}", "12"),
    # anywhere at the top level, a string or an integer, whitespace around
    (b'{"v":1,"type":"call","tool":"t","args":{"a":' + DEEP + b'},"id" : 7 }', "7"),
    # an "id" inside the arguments, or inside a string, is not the request's
    (b'{"args":{"id":"inner","a":' + DEEP + b'},"id":"outer"}', "outer"),
    (b'{"s":"\\"id\\":\\"no\\"","a":' + DEEP + b"}", None),
    (b'{"s":"\\\\","id":"after-escapes","a":' + DEEP + b"}", "after-escapes"),
    # not JSON, or not decodable: the id still found
    (b'{"v":1,"type":"call","id":"5","n":' + b"9" * 5000 + b"}", "5"),
    (b'{"v":1,"type":"call","id":"6"', "6"),
    (b'{"v":1,"type":"call","id":"8","args":{"x":' + b"{" * 100_000, "8"),
    # nothing to name: no object, an id too long, a nested or escaped one
    (b"[" * 100_000, None),
    (b'[{"id":"1"}]' + DEEP, None),
    (b'{"id":"' + b"x" * 200 + b'","a":' + DEEP + b"}", None),
    (b'{"id":{"a":1},"a":' + DEEP + b"}", None),
    (b'{"id":"\\u0031","a":' + DEEP + b"}", None),
], ids=lambda v: v[:30].decode("ascii", "replace") if isinstance(v, bytes) else str(v))
def test_a_request_that_cannot_be_decoded_is_answered_with_its_own_id(frame, msg_id):
    """An error reply that names the request fails that call only; an error naming no
    request made the child's client give up its whole connection (issue 40: arguments 63
    levels deep cost every later call of the execution)."""
    msg = parse(frame)
    assert isinstance(msg, Invalid)
    assert msg.id == msg_id


def test_finding_the_id_is_linear_in_hostile_frames():
    """Bounded against quadratic work only: every step runs in C over the frame."""
    frame = (b'{"v":1,"a":' + b'["\\""],' * 200_000 + b'{"id":1},' * 100_000 + DEEP
             + b',"id":"late"}')
    start = time.monotonic()
    assert connection.request_id(frame) is None  # past the candidates it looks at
    assert connection.request_id(b'{"id":"first",' + frame[1:]) == "first"
    assert time.monotonic() - start < 10


def test_replies_with_lone_surrogates_encode():
    for payload in (connection.result("\ud800", "name \udcff.txt"),
                    connection.error("\udc80", "bad \ud800"), connection.denied("\udfff")):
        decoded = json.loads(payload)
        assert decoded["v"] == 1
    assert json.loads(connection.result("1", "é"))["result"] == "é"  # plain text stays UTF-8
    assert b"\xc3\xa9" in connection.result("1", "é")


@pytest.mark.parametrize(("msg_id", "text"), [
    ("1", '{"ok": true}'), ("x" * 128, ""), ("ü", "日本\n\"\\\x00\x1f\u2028"),
    ("\ud800", "fine"), ("1", "a\udcff b"), ("\udfff", "\ud800"), ("id", "x" * 100_000),
])
def test_the_result_template_is_the_same_json_as_the_generic_encoder(msg_id, text):
    fast = connection.result(msg_id, text)
    assert fast == connection._dump({"v": 1, "type": "result", "id": msg_id, "result": text})
    assert json.loads(fast) == {"v": 1, "type": "result", "id": msg_id, "result": text}
