"""Keeps making processes until it is killed (a slow fork bomb), reporting when it started.

MODE=grow: every process forks a child every 20 ms and lives on (every second child calls
setsid first, so the set spans many sessions); a tree of 121 processes at most.
MODE=hop: a chain that never stands still: each process forks one child, which calls setsid,
and exits at once, so the pid the host saw a moment ago is already gone; up to HOPS hops.

"ready" goes to stdout (or $CHILD_REPORT) once the first few processes exist.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import become_subreaper, report

if os.environ.get("SUBREAPER") == "1":
    become_subreaper()


def grow() -> None:
    """A tree 4 levels deep, 3 children per process (121 processes), one fork per 20 ms."""
    made, depth = 0, 0
    while True:
        time.sleep(0.02)
        if depth < 4 and made < 3:
            made += 1
            if os.fork() == 0:
                if made % 2 == 0:
                    os.setsid()
                depth, made = depth + 1, 0
                continue
            if depth == 0 and made == 2:
                report("CHILD_REPORT", "ready")


def hop() -> None:
    report("CHILD_REPORT", "ready")
    for _ in range(int(os.environ.get("HOPS", "100000"))):
        if os.fork() != 0:
            os._exit(0)
        os.setsid()
    while True:  # the end of the chain waits to be killed
        time.sleep(1)


if __name__ == "__main__":
    if os.environ.get("MODE", "grow") == "hop":
        if os.fork() == 0:
            hop()
        while True:  # the main process stays, as a script's would
            time.sleep(1)
    grow()
