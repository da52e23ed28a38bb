"""Helpers for the scripted children (standard library only)."""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """What the child runtime's bootstrap does: orphans below us reparent to us."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def report(path_var: str, text: str) -> None:
    path = os.environ.get(path_var)
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def say_ready() -> None:
    """What the child runtime's bootstrap does first: the start-up handshake (a child
    that ends without it is reported as a runtime that never started)."""
    fd = os.environ.get("EXECENGINE_WATCHDOG_FD")
    if fd:
        os.write(int(fd), b"R")
