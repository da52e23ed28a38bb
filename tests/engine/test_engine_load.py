"""Many concurrent executions with many tool calls each: nothing lost, misrouted, refused
or leaked (the full-size run is ``benchmarks/bench_load.py``; figures in the README).

Before the run the test process holds over 1,100 extra descriptors, so every descriptor
the host opens for an execution is numbered above 1023: a ``select()`` anywhere on the
host's path fails (``filedescriptor out of range``), as it did at about 120 concurrent
executions before.
"""

from __future__ import annotations

import os
import resource

import pytest

from execengine.bench import load
from execengine.isolation import detect


@pytest.fixture
def high_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is too low for this test")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), hard))
    null = os.open(os.devnull, os.O_RDONLY)
    held = [os.dup(null) for _ in range(1100)]
    os.close(null)
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("level", ["none", "auto"])
def test_64_executions_of_50_calls_at_once(level, high_fds):
    if level == "auto" and not any(detect().levels.get(lv) for lv in ("restricted",
                                                                       "isolated")):
        pytest.skip("no sandbox level here: auto is none")
    report = load.run(level, 64, 50, timeout=50)
    print("\n" + report.line())
    assert report.calls_ok == 64 * 50, report
    assert report.clean, report


@pytest.mark.timeout(400)
@pytest.mark.parametrize(("level", "executions"), [("none", 300), ("auto", 200)])
def test_the_full_load_targets(level, executions, high_fds):
    """Issue 11's targets on a 2-core machine: 300 concurrent executions x 50 calls at
    none, 200 at auto; 0 lost, misrouted, refused or leaked."""
    if level == "auto" and not any(detect().levels.get(lv) for lv in ("restricted",
                                                                       "isolated")):
        pytest.skip("no sandbox level here: auto is none")
    report = load.run(level, executions, 50, timeout=300)
    print("\n" + report.line())
    assert report.calls_ok == executions * 50, report
    assert report.clean, report
