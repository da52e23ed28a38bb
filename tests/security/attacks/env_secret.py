"""Look for the host's secret in our environment and in the host's /proc environ."""

import json
import os
import sys

args = json.loads(sys.argv[1])
name, found = args["name"], []
if name in os.environ:
    found.append("os.environ")
for label, path in (
    ("self", "/proc/self/environ"),
    ("ppid", f"/proc/{os.getppid()}/environ"),
    ("host", f"/proc/{args['host_pid']}/environ"),
):
    try:
        with open(path, "rb") as fh:
            if name.encode() + b"=" in fh.read():
                found.append(label)
    except OSError:
        pass
print(json.dumps({"found": found}))
