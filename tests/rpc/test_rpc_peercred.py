"""Peer credentials: with ``check_peer`` nothing a peer sends is parsed until the channel
knows the child's uid, and then only peers of that uid (SO_PEERCRED, as libzmq reads it
when it accepts the connection) are heard."""

from __future__ import annotations

import logging
import os
import secrets


def _open(rpc, check_peer: bool = True):
    token = secrets.token_hex(32)
    ch = rpc.server.open(exec_id=secrets.token_hex(8), token=token, allowed=("echo",),
                         handler=rpc.handler, max_tool_calls=5, check_peer=check_peer)
    ch.test_token = token
    return ch


def _refusals(caplog) -> int:
    return sum("connected to its socket; ignored" in r.getMessage() for r in caplog.records)


def test_a_peer_of_another_uid_is_ignored_before_parsing(rpc, caplog):
    caplog.set_level(logging.WARNING, logger="execengine.rpc.server")
    with _open(rpc) as ch:
        p = rpc.peer(ch)
        p.send({"v": 1, "type": "hello", "exec": ch.exec_id, "token": ch.test_token})
        assert p.silent()  # held: the child's uid is not known yet
        ch.expect_peer([os.geteuid() + 12345])
        assert p.silent()  # right credentials, wrong uid: never parsed, never answered
        assert _refusals(caplog) == 1 and not ch.hello.is_set()
        p.call("1", "echo")
        assert p.silent() and rpc.calls == []


def test_the_expected_uid_is_welcomed_with_what_it_sent_early(rpc):
    with _open(rpc) as ch:
        p = rpc.peer(ch)
        p.send({"v": 1, "type": "hello", "exec": ch.exec_id, "token": ch.test_token})
        assert p.silent(0.1)
        ch.expect_peer([os.geteuid()])
        assert p.recv()["type"] == "welcome"  # the held hello, judged now
        p.call("1", "echo")
        assert p.recv()["id"] == "1"


def test_a_flood_of_early_messages_is_bounded(rpc, caplog):
    from execengine.rpc.server import MAX_PENDING

    caplog.set_level(logging.WARNING, logger="execengine.rpc.server")
    with _open(rpc) as ch:
        p = rpc.peer(ch)
        for _ in range(MAX_PENDING * 3):
            p.send(b"junk")
        p.send({"v": 1, "type": "hello", "exec": ch.exec_id, "token": ch.test_token})
        p.silent(0.2)
        ch.expect_peer([os.geteuid() + 1])
        assert p.silent() and _refusals(caplog) == 1


def test_without_check_peer_every_uid_is_heard_as_before(rpc):
    with _open(rpc, check_peer=False) as ch:
        p = rpc.peer(ch)
        assert p.hello(ch.exec_id, ch.test_token)["type"] == "welcome"
