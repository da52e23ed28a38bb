"""See, signal and ptrace a host process; read its /proc cmdline."""

import ctypes
import json
import os
import signal
import sys

args = json.loads(sys.argv[1])
pid, res = args["victim"], {}
try:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        res["cmdline"] = fh.read().replace(b"\0", b" ").decode()
except OSError as e:
    res["cmdline"] = f"{type(e).__name__}: {e}"
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
if libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0:
    res["ptrace"] = "attached"
    libc.ptrace(PTRACE_DETACH, pid, None, None)
else:
    res["ptrace"] = os.strerror(ctypes.get_errno())
try:
    os.kill(pid, signal.SIGKILL)
    res["kill"] = "sent"
except OSError as e:
    res["kill"] = f"{type(e).__name__}: {e}"
print(json.dumps(res))
