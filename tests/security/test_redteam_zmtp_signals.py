"""Red team: an exception raised at every bytecode of the child's ZMTP read path in turn.

A signal handler (a script's alarm, ``KeyboardInterrupt``) runs, and may raise, between two
bytecodes of whatever the main thread executes, the client's reading included. Raising at
each opcode boundary of ``sandbox/zmtp.py`` in turn is a superset of those points. Whatever
the point, the stream must stay whole: later messages arrive intact and in order, never a
torn or merged message or a protocol error. Through ``recv`` at worst the one message
being handed back when the exception struck is lost whole; the client's reader (``peek``,
hand on, ``consume``) loses none.

Every byte is in the socket before reading starts, so the short timeouts below only ask
"is there another message?", never wait for one to arrive.
"""

from __future__ import annotations

import asyncio
import dis
import json
import socket
import struct
import sys
from typing import Any

import pytest

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


def _no_signal_points(code: Any) -> frozenset[int]:
    """Offsets in ``code`` where CPython (3.11+) runs no signal handler, yet a raise would
    leave a ``with`` block's lock held: right after ``BEFORE_WITH`` (before the block's
    cleanup covers it), and the normal exit's ``LOAD_CONST None`` x3 up to the call of
    ``__exit__`` (a signal that arrives there is handled after that call returns). The
    interpreter checks for signals only at a function's start, a backward jump and after
    a call, none of which falls there."""
    ins = list(dis.get_instructions(code))
    skip: set[int] = set()
    for i, x in enumerate(ins):
        if x.opname == "BEFORE_WITH" and i + 1 < len(ins):
            skip.add(ins[i + 1].offset)
        three = ins[i:i + 3]
        if (len(three) == 3 and all(y.opname == "LOAD_CONST" and y.argval is None
                                    for y in three)):
            rest = [y for y in ins[i + 3:i + 5] if y.opname in ("PRECALL", "CALL")]
            if rest and rest[-1].opname == "CALL" and rest[-1].arg == 2:
                skip.update(y.offset for y in (*three, *rest))
                if i and ins[i - 1].opname == "NOP":  # the line marker of an early exit
                    skip.add(ins[i - 1].offset)
    return frozenset(skip)


def _raising_at(k: int, fired: dict[str, Any], files: tuple[str, ...] = (zmtp.__file__,)
                ) -> Any:
    """A trace function raising Boom at the ``k``-th opcode executed in ``files``
    (sandbox/zmtp.py), but for the points no signal handler can reach
    (:func:`_no_signal_points`)."""
    count = [0]
    skips: dict[Any, frozenset[int]] = {}

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode" and not fired:
            code = frame.f_code
            if code not in skips:
                skips[code] = _no_signal_points(code)
            if frame.f_lasti in skips[code]:
                return local
            count[0] += 1
            if count[0] == k:
                fired["at"] = (code.co_name, frame.f_lineno)
                raise Boom
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename not in files:
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


@pytest.mark.timeout(300)
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


# -- the client's hand-off: a reply read for another thread -----------------------------
#
# The read role's holder reads replies for every waiting call. If the holder is the main
# thread and a signal handler raises while it hands a reply on, the reply must still
# reach its waiter: the message stays buffered until handed on, and the next reader hands
# it on again (a no-op for a waiter that has it already).

from sandbox import client as client_mod  # noqa: E402


def _replies(ids: list[str]) -> bytes:
    data = b""
    for i, rid in enumerate(ids):
        body = json.dumps({"v": client_mod.PROTOCOL_VERSION, "type": "result", "id": rid,
                           "result": "r" + rid}).encode()
        data += zmtp.encode_frame(body)
        if i == 1:
            data += zmtp.encode_command(b"PING", struct.pack("!H", 0) + b"ctx")
    return data


def _hand_off_interrupted_at(k: int, files: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    ours, theirs = socket.socketpair()
    fired: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    try:
        ids = [str(i) for i in range(1, 7)]
        theirs.sendall(_replies(ids))
        ours.settimeout(0.05)
        conn = zmtp.ZmtpConnection(ours)
        rpc = client_mod.RpcClient("unused", "t", "e", connector=lambda path: conn)
        rpc._conn = conn
        sync = {rid: client_mod._Waiter() for rid in ids[:4]}  # other threads' calls
        futures = {rid: loop.create_future() for rid in ids[4:]}  # asyncio calls
        rpc._pending.update(sync)
        rpc._pending.update({rid: client_mod._AsyncWaiter(loop, f) for rid, f in futures.items()})
        sys.settrace(_raising_at(k, fired, files))
        try:
            while rpc._pending or rpc._batch:
                try:
                    if rpc._pending and not rpc._read_one(conn):
                        return "connection failed", fired
                    if rpc._batch:
                        rpc._flush()
                except Boom:
                    sys.settrace(None)
                except TimeoutError:
                    break
        finally:
            sys.settrace(None)
        loop.run_until_complete(asyncio.sleep(0))
        got = {rid: (w.reply or {}).get("result") for rid, w in sync.items()}
        got.update({rid: f.result()["result"] if f.done() else None
                    for rid, f in futures.items()})
        lost = sorted(rid for rid in ids if got[rid] != "r" + rid)
        if not lost and not rpc._pending and not rpc._batch:
            return "all delivered", fired
        return f"lost {lost}", fired
    finally:
        loop.close()
        ours.close()
        theirs.close()


def _bad_points(probe: Any, files: tuple[str, ...], good: str
                ) -> tuple[int, list[tuple[int, str, Any]]]:
    """Run ``probe(k, files)`` for k = 1, 2, ... until it no longer reaches a k-th opcode:
    how many points there were, and those whose outcome was not ``good``."""
    bad: list[tuple[int, str, Any]] = []
    k = 1
    while True:
        outcome, fired = probe(k, files)
        if not fired:
            return k, bad
        if outcome != good:
            bad.append((k, outcome, fired["at"]))
        k += 1


@pytest.mark.timeout(300)  # about 2,400 points, each a fresh hand-off: 20-50 s here
def test_no_interruption_point_loses_a_reply_handed_to_another_thread() -> None:
    k, bad = _bad_points(_hand_off_interrupted_at, (zmtp.__file__, client_mod.__file__),
                         "all delivered")
    assert k > 500, k  # the probe reached the hand-off's opcodes
    assert bad == [], bad[:10]


# -- the client's read role: never left held by an interrupted call ----------------------
#
# A synchronous call takes the read role, reads until answered and gives the role up. A
# handler raising anywhere in that (taking it, reading, handing the batch on, giving it up)
# must not leave the role held: every later call of every other thread would wait for a
# reader that never comes.


def _echo_host(sock: socket.socket) -> None:
    """Answer every call on ``sock`` with its tool's name, until EOF."""
    buf = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            buf += data
            while len(buf) >= 2 and len(buf) >= 2 + buf[1]:
                flags, size = buf[0], buf[1]
                body, buf = buf[2:2 + size], buf[2 + size:]
                if flags & 0x04:  # a command (a PING): answered with a PONG
                    sock.sendall(zmtp.encode_command(b"PONG", b""))
                    continue
                msg = json.loads(body)
                sock.sendall(zmtp.encode_frame(json.dumps(
                    {"v": client_mod.PROTOCOL_VERSION, "type": "result", "id": msg["id"],
                     "result": json.dumps(msg["tool"])}).encode()))
    except OSError:
        return


def _role_after_call_interrupted_at(k: int, files: tuple[str, ...]
                                    ) -> tuple[str, dict[str, Any]]:
    import threading

    ours, theirs = socket.socketpair()
    host = threading.Thread(target=_echo_host, args=(theirs,), daemon=True)
    host.start()
    fired: dict[str, Any] = {}
    conn = zmtp.ZmtpConnection(ours)
    rpc = client_mod.RpcClient("unused", "t", "e", connector=lambda path: conn)
    rpc._conn = conn  # no background reader: a later call must find the role free
    try:
        sys.settrace(_raising_at(k, fired, files))
        try:
            rpc.call("first", {})
        except Boom:
            pass
        finally:
            sys.settrace(None)
        other: list[Any] = []
        caller = threading.Thread(target=lambda: other.append(rpc.call("second", {})),
                                  daemon=True)
        caller.start()
        caller.join(5)
        if caller.is_alive():
            return "another thread's call was never answered", fired
        if other != ["second"] or rpc.call("third", {}) != "third":
            return f"wrong answers: {other}", fired
        if rpc._reading is not None:
            return "the role stayed held", fired
        return "ok", fired
    finally:
        rpc.close()
        theirs.close()
        host.join(5)


@pytest.mark.timeout(300)
def test_no_interruption_point_leaves_the_read_role_held() -> None:
    import threading

    # threading.py too: a handler runs in its Python code as well (Condition.__enter__
    # once held the role's lock when it raised: nothing released it)
    k, bad = _bad_points(_role_after_call_interrupted_at,
                         (zmtp.__file__, client_mod.__file__, threading.__file__), "ok")
    assert k > 100, k  # the probe reached the call's opcodes
    assert bad == [], (len(bad), bad[:10])
