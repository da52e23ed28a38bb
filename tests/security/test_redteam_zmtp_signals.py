"""Red team: an exception raised at every bytecode of the child's ZMTP read path in turn.

A signal handler (a script's alarm, ``KeyboardInterrupt``) runs, and may raise, between two
bytecodes of whatever the main thread executes, the client's reading included. Raising at
each opcode boundary of ``sandbox/zmtp.py`` in turn is a superset of those points. Whatever
the point, the stream must stay whole: later messages arrive intact and in order, never a
torn or merged message or a protocol error. At worst the one message being handed back
when the exception struck is lost whole.

Every byte is in the socket before reading starts, so the short timeouts below only ask
"is there another message?", never wait for one to arrive.
"""

from __future__ import annotations

import socket
import struct
import sys
from typing import Any

from sandbox import zmtp


class Boom(Exception):
    pass


def _messages() -> list[list[bytes]]:
    sizes = [3, 300, 70000, 10, 255, 256]  # short, long, larger than one read, edges
    out = [[b"m%d:" % i + b"x" * size] for i, size in enumerate(sizes)]
    out[3].append(b"second-frame")  # one message of two frames
    return out


def _wire(messages: list[list[bytes]]) -> bytes:
    data = b""
    for i, msg in enumerate(messages):
        data += b"".join(zmtp.encode_frame(f, zmtp.FLAG_MORE if j < len(msg) - 1 else 0)
                         for j, f in enumerate(msg))
        if i == 1:  # a heartbeat between messages (answered with a PONG)
            data += zmtp.encode_command(b"PING", struct.pack("!H", 0) + b"ctx")
    return data


def _raising_at(k: int, fired: dict[str, Any]) -> Any:
    """A trace function raising Boom at the ``k``-th opcode executed in sandbox/zmtp.py."""
    count = [0]

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode" and not fired:
            count[0] += 1
            if count[0] == k:
                fired["at"] = (frame.f_code.co_name, frame.f_lineno)
                raise Boom
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != zmtp.__file__:
            return None
        frame.f_trace_opcodes = True
        return local

    return tracer


def _read_all_interrupted_at(k: int) -> tuple[str, dict[str, Any]]:
    ours, theirs = socket.socketpair()
    fired: dict[str, Any] = {}
    messages = _messages()
    try:
        theirs.sendall(_wire(messages))
        ours.settimeout(0.05)
        conn = zmtp.ZmtpConnection(ours)
        got: list[list[bytes]] = []
        sys.settrace(_raising_at(k, fired))
        try:
            while len(got) < len(messages):
                try:
                    got.append(conn.recv())
                except Boom:
                    sys.settrace(None)
        except TimeoutError:
            pass  # nothing more: one message was lost whole, checked below
        except zmtp.ZmtpError as exc:
            return f"protocol error: {exc}", fired
        finally:
            sys.settrace(None)
        if got == messages:
            return "whole", fired
        if len(got) == len(messages) - 1 and got == [m for m in messages if m in got]:
            return "one lost whole", fired
        return f"torn: {[[f[:6] for f in m] for m in got]}", fired
    finally:
        ours.close()
        theirs.close()


def test_no_interruption_point_tears_the_stream() -> None:
    outcomes: dict[str, int] = {}
    bad: list[tuple[int, str, Any]] = []
    k = 1
    while True:
        outcome, fired = _read_all_interrupted_at(k)
        if not fired:
            break  # the whole read ran without reaching the k-th opcode: all points done
        key = outcome if outcome in ("whole", "one lost whole") else "bad"
        outcomes[key] = outcomes.get(key, 0) + 1
        if outcome not in ("whole", "one lost whole"):
            bad.append((k, outcome, fired["at"]))
        k += 1
    assert k > 500, outcomes  # the probe reached the read path's opcodes
    assert outcomes.get("whole", 0) > k // 2, outcomes
    assert bad == [], bad[:10]
