"""The RPC client against a real pyzmq ROUTER playing the host."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _sandbox_peers import (
    EXEC_ID,
    TOKEN,
    FakeHost,
    RawServer,
    echo,
    read_frame,
    server_handshake,
)

from sandbox import client as client_module
from sandbox import zmtp
from sandbox.client import RpcClient, ToolCallError, decode_result


@pytest.fixture
def client(host: FakeHost) -> Iterator[RpcClient]:
    with RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        yield c


def result(msg: dict[str, Any], value: Any, delay: float = 0.0) -> tuple[float, dict[str, Any]]:
    return delay, {"v": 1, "type": "result", "id": msg["id"], "result": value}


# -- decoding -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    (json.dumps(json.dumps({"a": [1, 2]})), {"a": [1, 2]}),  # a JSON string holding JSON
    (json.dumps("plain words"), "plain words"),
    ("not json at all", "not json at all"),
    ("[1, 2]", [1, 2]),
    ("", ""),
    ({"already": "decoded"}, {"already": "decoded"}),
])
def test_decode_result(text: Any, expected: Any) -> None:
    assert decode_result(text) == expected


@pytest.mark.parametrize("text", [
    '{"a": 1}', ' {"a": 1}', '{"a": 1} ', '\n[1]\n', '"x"', "1", "-0.5e3", "NaN", "null",
    '{"a": 1}{"b": 2}', '{"a": 1} x', "\ufeff{}", "", " ", "{", '{"a": }', "[" * 50 + "]" * 50,
    '{"a": 1, "a": 2}', '"\\ud800"', "1e999", "tru", "true false",
])
def test_fast_loads_is_json_loads(text: str) -> None:
    """What the client decodes without json.loads' Python layers gives what json.loads
    gives, and fails where it fails, with the same kind of error."""
    from sandbox.client import _loads
    try:
        expected: Any = ("ok", json.loads(text))
    except ValueError as exc:
        expected = ("error", type(exc))
    try:
        got: Any = ("ok", _loads(text))
    except ValueError as exc:
        got = ("error", type(exc))
    if expected[0] == "ok" and expected[1] != expected[1]:  # NaN
        assert got[0] == "ok" and got[1] != got[1]
    else:
        assert got == expected


# -- handshake ----------------------------------------------------------------------------


def test_hello_then_call(host: FakeHost, client: RpcClient) -> None:
    assert client.call("read_file", {"path": "a.txt"}) == {
        "tool": "read_file", "args": {"path": "a.txt"}}
    hello = host.hellos[0]
    assert hello == {"v": 1, "type": "hello", "exec": EXEC_ID, "token": TOKEN,
                     "pid": os.getpid()}
    assert client.max_tool_calls == 50
    call = host.calls[0]
    assert call["v"] == 1 and call["type"] == "call" and isinstance(call["id"], str)
    assert all(len(frames) == 1 for frames in host.raw)  # one frame per message


def test_denied_is_a_clear_error_every_time(host: FakeHost) -> None:
    with RpcClient(str(host.path), "00" * 32, EXEC_ID) as c:
        with pytest.raises(ToolCallError, match="refused the connection: wrong token"):
            c.call("read_file", {})
        with pytest.raises(ToolCallError, match="refused"):
            c.call("read_file", {})
    assert host.calls == []  # nothing was dispatched


def test_missing_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EXECENGINE_RPC_ENDPOINT", "EXECENGINE_RPC_TOKEN", "EXECENGINE_EXEC_ID"):
        monkeypatch.delenv(name, raising=False)
    with RpcClient.from_environ() as c, pytest.raises(
            ToolCallError, match="not running under execengine: EXECENGINE_RPC_ENDPOINT"):
        c.call("x", {})


def test_no_host_listening(short_dir: Path) -> None:
    with RpcClient(str(short_dir / "none.sock"), TOKEN, EXEC_ID) as c, pytest.raises(
            ToolCallError, match="cannot reach the execengine host"):
        c.call("x", {})


def test_bad_arguments_are_rejected_before_sending(host: FakeHost, client: RpcClient) -> None:
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        client.call("write_file", {"content": object()})
    with pytest.raises(TypeError, match="must be a dict"):
        client.call("write_file", ["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tool name"):
        client.call("", {})
    assert client.call("ok", None) == {"tool": "ok", "args": {}}  # still usable
    assert [c["tool"] for c in host.calls] == ["ok"]


# -- concurrency --------------------------------------------------------------------------


def test_twenty_threads_in_flight_at_once(short_dir: Path) -> None:
    # The host answers only when all 20 calls are waiting, in reverse order: a client that
    # serialised calls (or mixed up replies) could not pass.
    def handler(msg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return result(msg, json.dumps({"n": msg["args"]["n"]}), delay=0.005 * msg["args"]["n"])

    with FakeHost(short_dir / "rpc.sock", handler=handler, hold=20) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c, \
            ThreadPoolExecutor(20) as pool:
        got = list(pool.map(lambda n: c.call("slow", {"n": n}), range(20)))
    assert got == [{"n": n} for n in range(20)]
    assert len(host.hellos) == 1  # one connection for all threads


def test_twenty_asyncio_tasks_in_flight_at_once(short_dir: Path) -> None:
    def handler(msg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return result(msg, json.dumps({"n": msg["args"]["n"]}))

    async def main(c: RpcClient) -> tuple[list[Any], int]:
        threads_before = threading.active_count()
        tasks = [asyncio.ensure_future(c.acall("slow", {"n": n})) for n in range(20)]
        await asyncio.sleep(0)
        threads_during = threading.active_count()
        return await asyncio.gather(*tasks), threads_during - threads_before

    with FakeHost(short_dir / "rpc.sock", handler=handler, hold=20) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()
        got, extra_threads = asyncio.run(main(c))
    assert got == [{"n": n} for n in range(20)]
    assert extra_threads == 0  # no thread per call


def test_first_async_call_connects(host: FakeHost, client: RpcClient) -> None:
    async def main() -> Any:
        return await asyncio.gather(client.acall("a", {}), client.acall("b", {}))

    assert asyncio.run(main()) == [{"tool": "a", "args": {}}, {"tool": "b", "args": {}}]
    assert len(host.hellos) == 1


def test_cancelled_task_does_not_disturb_others(short_dir: Path) -> None:
    def handler(msg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return result(msg, msg["tool"], delay=0.3 if msg["tool"] == "slow" else 0.0)

    async def main(c: RpcClient) -> Any:
        slow = asyncio.ensure_future(c.acall("slow", {}))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        first = await c.acall("fast", {})
        await asyncio.sleep(0.4)  # the late reply for the cancelled call arrives, is dropped
        return first, await c.acall("fast2", {})

    with FakeHost(short_dir / "rpc.sock", handler=handler) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()
        assert asyncio.run(main(c)) == ("fast", "fast2")


# -- sizes and heartbeats -----------------------------------------------------------------


@pytest.mark.parametrize("size", [300, 70_000, 4 * 1024 * 1024])
def test_large_messages_both_ways(short_dir: Path, size: int) -> None:
    def handler(msg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return result(msg, json.dumps({"back": msg["args"]["blob"][::-1]}))

    blob = "".join(chr(0x61 + i % 26) for i in range(size))
    with FakeHost(short_dir / "rpc.sock", handler=handler) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        assert c.call("big", {"blob": blob}) == {"back": blob[::-1]}


def test_oversized_call_is_refused_when_the_host_states_its_limit(short_dir: Path) -> None:
    with FakeHost(short_dir / "rpc.sock", welcome_extra={"max_message_bytes": 1000}) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        with pytest.raises(ToolCallError, match=r"more than the host accepts \(1000 bytes\)"):
            c.call("write_file", {"content": "x" * 2000})
        assert c.call("write_file", {"content": "small"})["args"] == {"content": "small"}
    assert [call["args"] for call in host.calls] == [{"content": "small"}]


def test_connection_survives_libzmq_heartbeats(short_dir: Path) -> None:
    with FakeHost(short_dir / "rpc.sock", heartbeat_ms=30, heartbeat_timeout_ms=150) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()
        conn = c._conn
        assert conn is not None
        deadline = time.monotonic() + 10
        while conn.pings < 10:  # idle long enough for libzmq to drop a silent peer
            assert time.monotonic() < deadline and not conn.closed
            time.sleep(0.02)
        assert c.call("after", {}) == {"tool": "after", "args": {}}


# -- failures -----------------------------------------------------------------------------


def test_host_vanishes_mid_call(short_dir: Path) -> None:
    arrived = threading.Semaphore(0)

    def handler(msg: dict[str, Any]) -> tuple[float, None]:
        arrived.release()
        return 0.0, None  # never answers

    with FakeHost(short_dir / "rpc.sock", handler=handler) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c, ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(c.call, "hang", {}) for _ in range(3)]
        assert all(arrived.acquire(timeout=5) for _ in futures)
        host.drop()
        for f in futures:
            with pytest.raises(ToolCallError, match="lost the connection"):
                f.result(timeout=10)
        with pytest.raises(ToolCallError, match="lost the connection"):
            c.call("later", {})


def test_a_send_that_fails_breaks_the_connection_for_good(host: FakeHost,
                                                          client: RpcClient) -> None:
    """The host died between the welcome and the call (the reader has not seen it yet):
    the client is lost, as when the reader sees it first (the bootstrap then waits for
    the watchdog before the script's exit)."""
    client.connect()
    assert not client.lost

    def broken(data: bytes) -> None:
        raise zmtp.PeerClosed("connection lost while sending: [Errno 32] Broken pipe")

    client._conn.send = broken  # type: ignore[union-attr,method-assign]
    with pytest.raises(ToolCallError, match="could not send the call to 'x'"):
        client.call("x", {})
    assert client.lost
    with pytest.raises(ToolCallError, match="could not send"):
        client.call("y", {})


def test_close_fails_pending_calls(host: FakeHost) -> None:
    host.handler = lambda msg: (0.0, None)
    c = RpcClient(str(host.path), TOKEN, EXEC_ID)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(c.call, "hang", {})
        deadline = time.monotonic() + 10
        while not host.calls:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        c.close()
        c.close()
        with pytest.raises(ToolCallError, match="closed"):
            future.result(timeout=10)


def test_error_reply_with_id_raises(host: FakeHost, client: RpcClient) -> None:
    host.handler = lambda msg: (0.0, {"v": 1, "type": "error", "id": msg["id"],
                                      "error": "missing tool"})
    with pytest.raises(ToolCallError, match="rejected the call to 'x': missing tool"):
        client.call("x", {})
    host.handler = lambda msg: result(msg, '{"ok": true}')
    assert client.call("y", {}) == {"ok": True}  # the connection goes on


def test_reply_for_unknown_id_is_ignored(host: FakeHost, client: RpcClient) -> None:
    stray = {"v": 1, "type": "result", "id": "999", "result": "stray"}
    notice = {"v": 1, "type": "notice", "id": None}  # unknown kind without id: ignored
    host.handler = lambda msg: (0.0, (stray, notice, result(msg, '"mine"')[1]))
    assert client.call("x", {}) == "mine"


@pytest.mark.parametrize("reply, match", [
    (b"\xff not json", "not JSON"),
    (b"[1, 2]", "not an object"),
    (json.dumps({"v": 2, "type": "result", "id": "1", "result": "x"}).encode(), "version 2"),
    ([b"{}", b"{}"], "2-frame message"),
    (json.dumps({"v": 1, "type": "error", "id": None, "error": "bad frame"}).encode(),
     "host reported bad frame"),
    (json.dumps({"v": 1, "type": "surprise", "id": "1"}).encode(), "unexpected reply type"),
])
def test_malformed_replies(host: FakeHost, client: RpcClient, reply: Any, match: str) -> None:
    """A bad reply fails the call it answered and nothing else: the next call of the same
    connection works (before, all but the last case ended the connection for good)."""
    host.handler = lambda msg: (0.0, reply)
    with pytest.raises(ToolCallError, match=match):
        client.call("x", {})
    host.handler = echo
    assert client.call("after", {"n": 1}) == {"tool": "after", "args": {"n": 1}}
    assert not client.lost and client.bad_replies == (0 if "unexpected" in match else 1)


def wait_for(pred: Callable[[], object], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def _bad_for(tool: str, bad: Callable[[dict[str, Any]], Any]) -> Any:
    def handler(msg: dict[str, Any]) -> tuple[float, Any]:
        return (0.0, bad(msg)) if msg["tool"] == tool else echo(msg)
    return handler


@pytest.mark.parametrize("bad", [
    # cut short: not JSON, but its id is there to read
    lambda msg: b'{"v": 1, "type": "result", "id": "' + msg["id"].encode() + b'", "result": "c',
    lambda msg: {"v": 7, "type": "result", "id": msg["id"], "result": "x"},
    lambda msg: [json.dumps({"v": 1, "type": "result", "id": msg["id"]}).encode(), b"extra"],
], ids=["not-json", "version", "two-frames"])
def test_a_bad_reply_naming_a_call_fails_that_call_alone(short_dir: Path, bad: Any) -> None:
    """The host answers only once both calls wait (in reverse order): the bad reply to one
    fails it, the other call in flight still gets its own reply."""
    with FakeHost(short_dir / "rpc.sock", handler=_bad_for("bad", bad), hold=2) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c, ThreadPoolExecutor(2) as pool:
        c.connect()
        good = pool.submit(c.call, "good", {"n": 1})
        assert wait_for(lambda: len(host.calls) == 1)
        with pytest.raises(ToolCallError, match="protocol error"):
            c.call("bad", {})
        assert good.result(timeout=10) == {"tool": "good", "args": {"n": 1}}
        host.hold = 0
        assert c.call("later", {}) == {"tool": "later", "args": {}}
        assert not c.lost


def test_an_error_naming_no_call_fails_the_calls_in_flight_not_the_connection(
        short_dir: Path) -> None:
    """The host could not tell which request it refused: whichever call it was will get no
    other reply, so every call in flight fails; later calls (sync and asyncio) work."""
    nameless = {"v": 1, "type": "error", "id": None, "error": "message nests too deeply"}
    handler = _bad_for("bad", lambda msg: nameless)
    with FakeHost(short_dir / "rpc.sock", handler=handler, hold=2) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c, ThreadPoolExecutor(2) as pool:
        c.connect()
        other = pool.submit(c.call, "good", {})
        assert wait_for(lambda: len(host.calls) == 1)
        with pytest.raises(ToolCallError, match="nests too deeply"):
            c.call("bad", {})
        with pytest.raises(ToolCallError, match="nests too deeply"):
            other.result(timeout=10)
        host.hold = 0
        assert c.call("later", {}) == {"tool": "later", "args": {}}

        async def both() -> list[Any]:
            return await asyncio.gather(c.acall("a", {}), c.acall("b", {}))

        assert asyncio.run(both()) == [{"tool": "a", "args": {}}, {"tool": "b", "args": {}}]
        assert not c.lost and c.bad_replies == 1


def test_garbage_instead_of_welcome(short_dir: Path) -> None:
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        server_handshake(conn)
        read_frame(conn)  # the hello
        conn.sendall(zmtp.encode_frame(b'{"v": 1, "type": "result", "id": "1"}'))
        conn.recv(1)

    with RawServer(path, serve), RpcClient(str(path), TOKEN, EXEC_ID) as c, \
            pytest.raises(ToolCallError, match="expected welcome"):
        c.call("x", {})


def test_transport_error_fails_the_call(short_dir: Path) -> None:
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        server_handshake(conn)
        read_frame(conn)
        conn.sendall(zmtp.encode_frame(b'{"v": 1, "type": "welcome", "exec": "e"}'))
        read_frame(conn)  # the call
        conn.sendall(b"\xf0\x00")  # reserved flag bits
        conn.recv(1)

    with RawServer(path, serve), RpcClient(str(path), TOKEN, EXEC_ID) as c, \
            pytest.raises(ToolCallError, match="RPC transport error: .*reserved"):
        c.call("x", {})


# -- who reads (leader/follower) ----------------------------------------------------------


def _spy_reads(c: RpcClient) -> list[str]:
    """The names of the threads that read each message from now on."""
    readers: list[str] = []
    real = c._read_one

    def read_one(conn: Any, idle: bool = False) -> bool:
        readers.append(threading.current_thread().name)
        return real(conn, idle)

    c._read_one = read_one  # type: ignore[method-assign]
    return readers


def test_a_lone_caller_reads_its_own_replies(host: FakeHost,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sandbox.client.IDLE_READ", 60.0)  # the reader never steps in idle
    with RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        readers = _spy_reads(c)
        for n in range(20):
            assert c.call("t", {"n": n}) == {"tool": "t", "args": {"n": n}}
        assert readers == [threading.current_thread().name] * 20  # no thread switch


class _Polls:
    """What each poll of a caller for its reply found from now on (``polls``). With
    ``found`` set, every poll reports that, having waited for the reply without a bound
    (so a hit does not depend on how fast the machine is); else the real poll runs.

    The threads this process runs now (the fake host's, the test runner's) count as the
    client's own: its caller polls as in a script that runs no thread of its own."""

    def __init__(self, c: RpcClient, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("sandbox.client.OWN_THREADS", threading.active_count())
        self.polls: list[bool] = []
        self.found: bool | None = None
        conn = c._conn
        assert conn is not None
        self._real = conn.spin
        conn.spin = self._spin  # type: ignore[method-assign]

    def _spin(self, seconds: float) -> bool:
        assert seconds == client_module.SPIN
        if self.found is None:
            self.polls.append(self._real(seconds))
        else:
            self._real(30.0)
            self.polls.append(self.found)
        return self.polls[-1]

    def per_call(self, c: RpcClient, calls: int) -> list[int]:
        """Make ``calls`` calls; how many polls each made."""
        out = []
        for n in range(calls):
            before = len(self.polls)
            assert c.call("t", {"n": n}) in ({"tool": "t", "args": {"n": n}}, "late")
            out.append(len(self.polls) - before)
        return out


def test_a_caller_polls_for_its_reply_and_backs_off_while_replies_are_slow(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sandbox.client.IDLE_READ", 60.0)  # only the caller reads
    monkeypatch.setattr("sandbox.client.SPIN_BACKOFF", 8)
    host.handler = lambda msg: result(msg, "late", delay=0.01)  # 100 x the poll: a miss
    with RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()
        spy = _Polls(c, monkeypatch)
        # a poll that missed makes the next 1, 2, 4, then at most 8 calls sleep at once
        assert spy.per_call(c, 24) == [1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1] + [0] * 8 + [1] + [0] * 4
        assert spy.polls == [False] * 5


def test_a_reply_found_by_polling_ends_the_back_off(host: FakeHost,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sandbox.client.IDLE_READ", 60.0)
    with RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()
        spy = _Polls(c, monkeypatch)
        spy.found = False
        assert spy.per_call(c, 10) == [1, 0, 1, 0, 0, 1, 0, 0, 0, 0]  # the next pause: 4
        spy.found = True
        assert spy.per_call(c, 5) == [1] * 5  # found: every call polls again
        spy.found = False
        assert spy.per_call(c, 3) == [1, 0, 1]  # and a miss pauses one call, not 4 or 8
        assert spy.polls == [False] * 3 + [True] * 5 + [False] * 2


def test_a_caller_does_not_poll_while_the_script_runs_a_thread_of_its_own(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    # a polling caller takes the interpreter lock back after every poll: the other thread
    # would wait for the forced switch (5 ms) while calls go back to back
    monkeypatch.setattr("sandbox.client.IDLE_READ", 60.0)
    with RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()  # the reader thread: the client's own
        spy = _Polls(c, monkeypatch)
        spy.found = True
        assert spy.per_call(c, 3) == [1] * 3  # alone: it polls
        release = threading.Event()
        other = threading.Thread(target=release.wait, args=(30,))
        other.start()
        try:
            assert spy.per_call(c, 3) == [0] * 3
        finally:
            release.set()
            other.join()
        assert spy.per_call(c, 3) == [1] * 3


def test_a_fast_reply_is_read_after_polling_without_sleeping(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sandbox.client.IDLE_READ", 60.0)  # only the caller reads
    with RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()
        spy = _Polls(c, monkeypatch)
        spy.found = True
        assert spy.per_call(c, 5) == [1] * 5


def test_idle_reader_steps_in_for_waiting_asyncio_calls(
        short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a synchronous caller holds the read role while the host keeps its reply back; the
    # asyncio calls meanwhile are answered (it reads for them), and once it is gone the
    # background reader reads for the ones still waiting
    monkeypatch.setattr("sandbox.client.IDLE_READ", 60.0)

    def handler(msg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        slow = msg["tool"] == "slow"
        return result(msg, json.dumps(msg["tool"]), delay=2.0 if slow else 0.0)

    async def main(c: RpcClient, leader_done: threading.Event) -> list[Any]:
        first = await asyncio.gather(*[c.acall("fast") for _ in range(5)])
        assert not leader_done.is_set()  # answered while the sync leader still waited
        leader_done.wait(10)
        return first + await asyncio.gather(*[c.acall("fast") for _ in range(5)])

    with FakeHost(short_dir / "rpc.sock", handler=handler) as host, \
            RpcClient(str(host.path), TOKEN, EXEC_ID) as c, ThreadPoolExecutor(1) as pool:
        c.connect()
        readers = _spy_reads(c)
        done = threading.Event()
        slow = pool.submit(lambda: (c.call("slow"), done.set())[0])
        deadline = time.monotonic() + 10
        while not readers:  # the sync caller leads
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert asyncio.run(main(c, done)) == ["fast"] * 10
        assert slow.result(10) == "slow"
    assert "execengine-rpc" in readers  # the background reader served the second batch


def test_an_interrupted_leader_leaves_the_stream_intact(short_dir: Path) -> None:
    # the reply is cut in two; the caller is interrupted (a signal handler raises) between
    # the halves: the next call still reads whole frames
    import signal

    class Interrupted(Exception):
        pass

    def on_signal(signum: int, frame: Any) -> None:
        raise Interrupted

    main = threading.get_ident()
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        server_handshake(conn)
        read_frame(conn)
        conn.sendall(zmtp.encode_frame(b'{"v": 1, "type": "welcome", "exec": "e"}'))
        first = json.loads(read_frame(conn)[1])
        reply = zmtp.encode_frame(json.dumps(
            {"v": 1, "type": "result", "id": first["id"], "result": "x" * 300}).encode())
        conn.sendall(reply[:150])
        signal.pthread_kill(main, signal.SIGUSR1)
        second = json.loads(read_frame(conn)[1])
        conn.sendall(reply[150:] + zmtp.encode_frame(json.dumps(
            {"v": 1, "type": "result", "id": second["id"], "result": '"second"'}).encode()))
        conn.recv(1)

    old = signal.signal(signal.SIGUSR1, on_signal)
    try:
        with RawServer(path, serve), RpcClient(str(path), TOKEN, EXEC_ID) as c:
            with pytest.raises(Interrupted):
                c.call("first", {})
            assert c.call("second", {}) == "second"
    finally:
        signal.signal(signal.SIGUSR1, old)


@pytest.mark.parametrize("first", ["outer", "inner"])
def test_a_call_from_a_signal_handler_during_its_threads_own_read_is_answered(
        short_dir: Path, first: str) -> None:
    # the main thread leads (reads for its own call) when a signal handler makes a call:
    # the handler reads for itself without disturbing the suspended read, whichever
    # reply comes first; its PING's PONG wakes the suspended read, which would otherwise
    # wait on the socket for a reply the handler has already read
    import signal

    main = threading.get_ident()
    path = short_dir / "raw.sock"
    client: list[RpcClient] = []
    got: dict[str, Any] = {}
    seen: list[bytes] = []

    def on_signal(signum: int, frame: Any) -> None:
        got["inner"] = client[0].call("inner", {})

    def reply(msg: dict[str, Any]) -> bytes:
        return zmtp.encode_frame(json.dumps({"v": 1, "type": "result", "id": msg["id"],
                                             "result": json.dumps(msg["tool"])}).encode())

    def serve(conn: socket.socket) -> None:
        server_handshake(conn)
        read_frame(conn)
        conn.sendall(zmtp.encode_frame(b'{"v": 1, "type": "welcome", "exec": "e"}'))
        outer = json.loads(read_frame(conn)[1])
        deadline = time.monotonic() + 10
        while client[0]._reading is not threading.main_thread():  # it leads
            assert time.monotonic() < deadline
            time.sleep(0.001)
        signal.pthread_kill(main, signal.SIGUSR1)
        inner = json.loads(read_frame(conn)[1])
        replies = {"outer": reply(outer), "inner": reply(inner)}
        conn.sendall(replies[first])
        if first == "outer":
            conn.sendall(replies["inner"])
        seen.append(read_frame(conn)[1])  # the handler, answered, pings
        conn.sendall(zmtp.encode_command(b"PONG", b""))
        if first == "inner":  # the outer read has waited on the socket meanwhile
            conn.sendall(replies["outer"])
        again = json.loads(read_frame(conn)[1])  # the stream is intact: the next call
        conn.sendall(reply(again))
        conn.recv(1)

    old = signal.signal(signal.SIGUSR1, on_signal)
    try:
        with RawServer(path, serve), RpcClient(str(path), TOKEN, EXEC_ID) as c:
            client.append(c)
            c.connect()
            assert c.call("outer", {}) == "outer"
            assert got == {"inner": "inner"}
            assert c.call("again", {}) == "again"
            assert not c._conn._buf  # type: ignore[union-attr]  # the PONG, the replies: all taken
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert [zmtp.split_command(b)[0] for b in seen] == [b"PING"]


def test_the_host_vanishing_under_a_signal_handlers_call_fails_both_calls(
        short_dir: Path) -> None:
    # the host goes away while the handler's call reads for itself: the handler's call
    # and the suspended one it interrupted both fail clearly, nothing waits forever
    import signal

    main = threading.get_ident()
    path = short_dir / "raw.sock"
    client: list[RpcClient] = []
    got: dict[str, str] = {}

    def on_signal(signum: int, frame: Any) -> None:
        try:
            client[0].call("inner", {})
        except ToolCallError as exc:
            got["inner"] = str(exc)

    def serve(conn: socket.socket) -> None:
        server_handshake(conn)
        read_frame(conn)
        conn.sendall(zmtp.encode_frame(b'{"v": 1, "type": "welcome", "exec": "e"}'))
        read_frame(conn)  # the outer call
        deadline = time.monotonic() + 10
        while client[0]._reading is not threading.main_thread():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        signal.pthread_kill(main, signal.SIGUSR1)
        read_frame(conn)  # the handler's call; then the host is gone, unanswered

    old = signal.signal(signal.SIGUSR1, on_signal)
    try:
        with RawServer(path, serve), RpcClient(str(path), TOKEN, EXEC_ID) as c:
            client.append(c)
            c.connect()
            with pytest.raises(ToolCallError, match="lost the connection to the execengine"):
                c.call("outer", {})
            assert "lost the connection to the execengine host" in got["inner"]
            with pytest.raises(ToolCallError, match="lost the connection"):
                c.call("later", {})  # the failure is final
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_a_burst_of_replies_wakes_the_event_loop_once(short_dir: Path) -> None:
    # the host writes 20 replies in one go: they reach the event loop in one wake-up (one
    # call_soon_threadsafe), and every task gets its own reply
    path = short_dir / "raw.sock"

    def serve(conn: socket.socket) -> None:
        server_handshake(conn)
        read_frame(conn)  # the hello
        conn.sendall(zmtp.encode_frame(b'{"v": 1, "type": "welcome", "exec": "e"}'))
        ids = [json.loads(read_frame(conn)[1])["id"] for _ in range(20)]
        conn.sendall(b"".join(zmtp.encode_frame(json.dumps(
            {"v": 1, "type": "result", "id": i, "result": json.dumps(i)}).encode())
            for i in reversed(ids)))
        conn.recv(1)

    wakes: list[int] = []

    async def main(c: RpcClient) -> list[Any]:
        loop = asyncio.get_running_loop()
        real = loop.call_soon_threadsafe

        def counting(fn: Any, *args: Any) -> Any:
            wakes.append(len(args[0]) if args and isinstance(args[0], list) else 1)
            return real(fn, *args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        return await asyncio.gather(*[c.acall("t") for _ in range(20)])

    with RawServer(path, serve), RpcClient(str(path), TOKEN, EXEC_ID) as c:
        c.connect()
        got = asyncio.run(main(c))
    assert got == list(range(1, 21))  # task n sent id n and got its reply
    assert wakes == [20]


def test_asyncio_calls_keep_the_reader_and_a_sync_call_takes_it_back(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sandbox.client.IDLE_READ", 60.0)  # no idle reads: only the mode

    async def calls(c: RpcClient) -> list[Any]:
        return [await c.acall("a", {"n": n}) for n in range(5)]

    with RpcClient(str(host.path), TOKEN, EXEC_ID) as c:
        c.connect()
        readers = _spy_reads(c)
        assert asyncio.run(calls(c)) == [{"tool": "a", "args": {"n": n}} for n in range(5)]
        assert set(readers) == {"execengine-rpc"}
        readers.clear()
        for n in range(5):  # the first waits for the reader; then it leads again
            assert c.call("s", {"n": n}) == {"tool": "s", "args": {"n": n}}
        me = threading.current_thread().name
        assert readers[-3:] == [me] * 3
