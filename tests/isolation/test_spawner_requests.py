"""Requests to the spawner in flight at once: each reply reaches the thread that asked, a
launch whose entry is slow to start holds up no other request, and a spawner that dies
fails every request in flight (and only those)."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import replace

import pytest

from execengine.errors import SandboxError
from execengine.isolation.spawner import Spawner

from .test_prestart import IN_PRESTARTED, ISOLATED, _venv, run, spec


class FakeSpawner(Spawner):
    """The host side over a socket pair whose other end the test answers (no process)."""

    def __init__(self) -> None:
        super().__init__()
        self.ours, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def _start(self) -> socket.socket:
        self._sock = self.ours
        return self.ours

    def _stop(self) -> None:
        self._sock = None

    def requests(self, n: int) -> list[dict]:
        return [json.loads(self.theirs.recv(4096)) for _ in range(n)]

    def answer(self, req: dict, **reply) -> None:
        self.theirs.send(json.dumps({**reply, "rid": req["rid"]}).encode())

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


@pytest.fixture
def fake():
    spawner = FakeSpawner()
    yield spawner
    spawner.close()


def _ask(spawner: Spawner, results: dict, name: str) -> threading.Thread:
    def ask() -> None:
        try:
            results[name] = spawner.request({"op": name})
        except SandboxError as exc:
            results[name] = exc

    thread = threading.Thread(target=ask)
    thread.start()
    return thread


def test_replies_in_any_order_reach_the_thread_that_asked(fake):
    spawner = fake
    results: dict = {}
    threads = [_ask(spawner, results, name) for name in ("a", "b", "c")]
    reqs = {r["op"]: r for r in spawner.requests(3)}
    assert len({r["rid"] for r in reqs.values()}) == 3
    for name in ("c", "a", "b"):  # not the order asked
        spawner.answer(reqs[name], ok=True, said=name)
    for thread in threads:
        thread.join(5)
    assert {k: v["said"] for k, v in results.items()} == {"a": "a", "b": "b", "c": "c"}
    assert not spawner._waiting


def test_a_spawner_that_dies_fails_every_request_in_flight(fake):
    spawner = fake
    results: dict = {}
    threads = [_ask(spawner, results, name) for name in ("a", "b")]
    reqs = {r["op"]: r for r in spawner.requests(2)}
    spawner.answer(reqs["a"], ok=True)
    deadline = time.monotonic() + 5
    while "a" not in results and time.monotonic() < deadline:
        time.sleep(0.01)
    spawner.theirs.close()
    for thread in threads:
        thread.join(5)
    assert results["a"] == {"ok": True, "rid": reqs["a"]["rid"]}
    assert isinstance(results["b"], SandboxError)
    assert "exited unexpectedly" in str(results["b"])
    assert not spawner._waiting


@pytest.mark.parametrize("launcher_cls", ISOLATED)
def test_a_launch_whose_entry_is_slow_to_start_holds_up_no_other(launcher_cls, tmp_path):
    """The next entry's interpreter spends 2 s in ``site``: the launch that takes it waits
    for that (its plan is sent, the interpreter takes it once ready), while a launch of
    another kind, sent after it, is started and answered meanwhile."""
    python, site = _venv(tmp_path)
    (site / "0slow.pth").write_text(f"import time; {IN_PRESTARTED} and time.sleep(2)\n")
    work = tmp_path / "work"
    work.mkdir()
    slow = replace(spec("print('slow')", work), argv=[python, "-c", "print('slow')"])
    other = replace(spec("print('other')", work), prestart=False)
    with launcher_cls(warm=1) as launcher:
        with launcher.launch(slow) as first:  # learns the interpreter to start ahead
            assert first.wait(30) == 0
        deadline = time.monotonic() + 10
        while not any(e.prestarted for e in list(launcher._pool._entries)):
            assert time.monotonic() < deadline, "no pre-started entry"
            time.sleep(0.02)
        done: dict = {}

        def launch_slow() -> None:
            done["slow"] = run(launcher, slow)
            done["slow_at"] = time.monotonic()

        thread = threading.Thread(target=launch_slow)
        thread.start()
        time.sleep(0.3)  # its plan is with the entry, whose interpreter is still in site
        rc, out, err, _ = run(launcher, other)
        other_at = time.monotonic()
        thread.join(30)
    assert (rc, out) == (0, "other\n"), err
    assert done["slow"][:2] == (0, "slow\n"), done["slow"][2]
    assert other_at < done["slow_at"] - 0.5
