"""Warm entries: the pool's bookkeeping (fakes, no processes), and the real launcher's
fallback to a cold entry when a warm one is gone."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from execengine.isolation.detect import detect
from execengine.launch.base import Background, WarmEntry, WarmPool

from .test_launchers import LEVELS, spec


class _Fake:
    def __init__(self, fail: bool = False) -> None:
        self.made: list[WarmEntry] = []
        self.discarded: list[WarmEntry] = []
        self.fail = fail
        self.calls = 0
        self.lock = threading.Lock()

    def make(self, key: object) -> WarmEntry:
        self.calls += 1
        if self.fail:
            raise OSError("no slot")
        with self.lock:
            entry = WarmEntry(f"w{len(self.made)}", key, None)
            self.made.append(entry)
        return entry

    def discard(self, entry: WarmEntry) -> None:
        with self.lock:
            self.discarded.append(entry)


def test_pool_refills_hands_out_and_discards_mismatches():
    fake, bg = _Fake(), Background()
    pool = WarmPool(fake.make, fake.discard, bg, size=2)
    assert pool.take(False) is None  # nothing prepared yet: the caller goes cold
    pool.refill(False)
    bg.close()  # runs what is queued
    assert len(pool) == 2
    first = pool.take(False)
    assert first is not None and first.key is False and len(pool) == 1
    assert pool.take(True) is None  # other key: the stale entry is discarded
    assert len(pool) == 0 and [e.id for e in fake.discarded] == ["w1"]
    pool.close()


def test_pool_keeps_entries_of_keys_not_stale_for_the_one_asked_for():
    fake, bg = _Fake(), Background()
    # keys (generation, kind): another kind is kept for its launches, another generation
    # is discarded
    pool = WarmPool(fake.make, fake.discard, bg, size=1,
                    stale=lambda have, want: have[0] != want[0])
    pool.refill((0, "script"))
    pool.refill((0, "exec"))
    pool.refill((0, "exec"))  # topped up per key: one each
    bg.close()
    assert sorted(e.key for e in pool._entries) == [(0, "exec"), (0, "script")]
    assert pool.take((0, "exec")).key == (0, "exec")
    assert [e.key for e in pool._entries] == [(0, "script")] and not fake.discarded
    assert pool.take((1, "exec")) is None  # a new generation: the old entry is stale
    assert len(pool) == 0 and [e.key for e in fake.discarded] == [(0, "script")]
    pool.close()


def test_pool_close_discards_unused_and_stops_after_repeated_failures():
    fake, bg = _Fake(), Background()
    pool = WarmPool(fake.make, fake.discard, bg, size=1)
    pool.refill(False)
    pool.close()
    bg.close()
    assert fake.made and fake.discarded == fake.made  # nothing left behind
    failing, bg2 = _Fake(fail=True), Background()
    pool2 = WarmPool(failing.make, failing.discard, bg2, size=1)
    bg2.close()  # from now on jobs run inline: each refill tries at once
    for _ in range(5):
        pool2.refill(False)
    assert failing.calls == 3 and len(pool2) == 0  # it gave up after three failures


def test_background_runs_inline_once_closed():
    bg = Background()
    bg.close()
    ran: list[int] = []
    bg.submit(lambda: ran.append(1))
    assert ran == [1]


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(os.geteuid() != 0 or not detect().levels.get("restricted"),
                    reason="sandbox levels as root only")
@pytest.mark.parametrize("launcher_cls", [p.values[0] for p in LEVELS], ids=["r", "i"])
def test_a_dead_warm_entry_is_replaced_by_a_cold_one(launcher_cls, tmp_path):
    if not detect().levels.get(launcher_cls.level):
        pytest.skip(f"{launcher_cls.level} unavailable")
    with launcher_cls(warm=1) as launcher:
        with launcher.launch(spec("print('one')", tmp_path)) as child:
            assert child.wait(20) == 0
        launcher._background.close()  # the refill has happened
        entries = list(launcher._pool._entries)
        assert len(entries) == 1
        # kill the prepared process behind the launcher's back: by the pid the spawner gave
        # when it forked it (the cgroup may not hold it yet: it joins while preparing)
        victim = entries[0].pid
        assert victim > 0
        os.kill(victim, signal.SIGKILL)
        # dead means its exit has run (a zombie until the spawner reaps it, or gone): until
        # then the namespace's init it holds may still take the plan
        deadline = time.monotonic() + 10
        while _running(victim) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert not _running(victim)
        with launcher.launch(spec("print('two')", tmp_path)) as child:
            assert child.wait(20) == 0, child.stderr.read()
            assert child.stdout.read() == b"two\n"


@pytest.mark.skipif(os.geteuid() != 0 or not detect().levels.get("restricted"),
                    reason="sandbox levels as root only")
def test_cold_only_launcher_works_and_uses_the_spec_limits(tmp_path):
    from execengine.launch.base import LaunchLimits
    from execengine.launch.sandboxed import RestrictedLauncher

    code = ("import resource; print(resource.getrlimit(resource.RLIMIT_NPROC)[0])")
    with RestrictedLauncher(warm=0) as launcher:
        for n in (17, 23):
            s = spec(code, tmp_path, limits=LaunchLimits(max_processes=n))
            with launcher.launch(s) as child:
                assert child.wait(20) == 0, child.stderr.read()
                assert child.stdout.read() == f"{n}\n".encode()
        assert len(launcher._pool) == 0
