"""The remote helpers' start header: what the host encodes the remote reads back exactly,
and malformed input is refused with ValueError (the helper then exits with a message)."""

from __future__ import annotations

import os

import pytest

from execengine.remote.launcher import encode_header
from sandbox.remote import _read_header


def read(data: bytes) -> tuple[dict[str, str], dict[str, str]]:
    r, w = os.pipe()
    try:
        os.write(w, data)
        os.close(w)
        w = -1
        return _read_header(r)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_round_trip_and_nothing_after_it_is_consumed() -> None:
    fields = {"script": "print('hé')\n# \udcff , : 12:", "stub": "", "cwd": None, "base": "/b"}
    env = {"LANG": "C.UTF-8", "X": "a,b:c"}
    r, w = os.pipe()
    try:
        os.write(w, encode_header(fields, env) + b"T")
        assert _read_header(r) == ({"script": fields["script"], "stub": "", "base": "/b"},
                                   env)
        assert os.read(r, 1) == b"T"  # the watchdog's input starts right after the header
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("data", [
    b"", b"EE1 5\n", b"XX1 3\n1:a,", b"EE1 99999999999999\n", b"EE1 4\n9:ab", b"EE1 4\n1:ab",
    b"EE1 4\n1:a,", b"EE1 5\nx:ab,", b"EE1 " + b"1" * 40,
])
def test_malformed_headers_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        read(data)
