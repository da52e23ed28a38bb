"""Leave processes behind: setsid + double fork, ignoring SIGTERM; then hang."""

import json
import os
import signal
import time

for how in ("setsid", "double", "pgrp"):
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if how == "setsid":
            os.setsid()
        elif how == "pgrp":
            os.setpgid(0, 0)
        else:
            if os.fork():
                os._exit(0)
            os.setsid()
        time.sleep(60)
        os._exit(0)
    if how == "double":
        os.waitpid(pid, 0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(json.dumps({"ready": True}), flush=True)
time.sleep(60)
