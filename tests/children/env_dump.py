"""Prints its environment, stdin and open fds as JSON."""
import json
import os
import sys

print(json.dumps({
    "env": dict(os.environ),
    "stdin": sys.stdin.read(),
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    "sid": os.getsid(0),
    "pid": os.getpid(),
    "cwd": os.getcwd(),
}))
