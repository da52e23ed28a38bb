"""Write into a world-writable host directory; read a 0644 host file; write the workdir."""

import json
import os
import sys

args = json.loads(sys.argv[1])
res = {}
try:
    with open(os.path.join(args["canary_dir"], "pwned"), "w") as fh:
        fh.write("leak")
    res["write"] = "written"
except OSError as e:
    res["write"] = f"{type(e).__name__}: {e}"
try:
    with open(args["secret_file"]) as fh:
        res["read"] = fh.read()
except OSError as e:
    res["read"] = f"{type(e).__name__}: {e}"
# the same through our own /proc entry (readable at every level): /proc/self/root is a
# magic link to "/", and the checks must apply to where it leads
via = "/proc/self/root" + args["secret_file"]
try:
    with open(via) as fh:
        res["read_via_proc"] = fh.read()
except OSError as e:
    res["read_via_proc"] = f"{type(e).__name__}: {e}"
try:
    with open("/proc/self/root" + os.path.join(args["canary_dir"], "pwned2"), "w") as fh:
        fh.write("leak")
except OSError as e:
    res["write_via_proc"] = f"{type(e).__name__}: {e}"
with open("in-workdir.txt", "w") as fh:
    fh.write("ok")
with open("in-workdir.txt") as fh:
    res["workdir"] = fh.read()
print(json.dumps(res))
