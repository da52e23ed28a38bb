"""Leaves descendants behind: one that called setsid and one double-forked orphan.

Both keep stdout open and sleep forever. Their pids are written to $CHILD_REPORT.
With SUBREAPER=1 the main process first becomes a subreaper (as the bootstrap does).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import become_subreaper, report

if os.environ.get("SUBREAPER") == "1":
    become_subreaper()

if os.fork() == 0:  # setsid'ed descendant
    os.setsid()
    report("CHILD_REPORT", f"setsid {os.getpid()}")
    while True:
        time.sleep(1)

if os.fork() == 0:  # double fork: the grandchild is orphaned at once
    os.setsid()
    if os.fork() == 0:
        report("CHILD_REPORT", f"orphan {os.getpid()}")
        while True:
            time.sleep(1)
    os._exit(0)

time.sleep(0.3)
print("main done", flush=True)
if os.environ.get("MAIN_STAYS") == "1":
    while True:
        time.sleep(1)
