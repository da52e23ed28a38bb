from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator

import pytest
from _web_httpd import LocalServer


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Every web test leaves no open descriptors and no stray threads behind. The garbage
    collector runs only when something looks left over (a collection of the whole heap
    costs 0.2-0.5 s late in a full run: twice per test, it was two minutes of the suite),
    and what it frees then does not count as a leak."""
    fds = set(os.listdir("/proc/self/fd"))
    threads = set(threading.enumerate())
    yield
    for t in set(threading.enumerate()) - threads:
        t.join(5)
    if set(threading.enumerate()) - threads or set(os.listdir("/proc/self/fd")) - fds:
        gc.collect()
        for t in set(threading.enumerate()) - threads:
            t.join(5)
    leaked = [t.name for t in set(threading.enumerate()) - threads]
    assert not leaked, f"threads left running: {leaked}"
    extra = set(os.listdir("/proc/self/fd")) - fds
    assert not extra, f"descriptors left open: {extra}"
