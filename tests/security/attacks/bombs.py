"""Self-capped bombs: fork, memory, cpu, disk, tmp. Prints progress as it goes."""

import json
import os
import sys
import time

args = json.loads(sys.argv[1])
kind, cap = args["kind"], args["cap"]


def say(**kw):
    print(json.dumps(kw), flush=True)


if kind == "fork":
    n, err = 0, None
    pids = []
    for _ in range(cap):
        try:
            pid = os.fork()
        except OSError as e:
            err = e.strerror
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
        pids.append(pid)
    say(forked=n, error=err)
    for p in pids:
        try:
            os.kill(p, 9)
            os.waitpid(p, 0)
        except OSError:
            pass
elif kind == "memory":
    chunks, mb = [], 0
    try:
        while mb < cap:
            chunks.append(bytearray(b"x" * (32 << 20)))
            mb += 32
            say(mb=mb)
        say(mb=mb, error=None)
    except MemoryError:
        say(mb=mb, error="MemoryError")
elif kind == "cpu":
    # CPU seconds, not wall seconds: on a loaded host a loop gets less CPU than wall time,
    # and would reach a wall cap before the CPU limit it is meant to hit
    start = time.process_time()
    while time.process_time() - start < cap:
        pass
    say(survived=True)
elif kind in ("disk", "tmp"):
    d = "." if kind == "disk" else (os.environ.get("TMPDIR") or "/tmp")
    written = 0
    try:
        if kind == "disk":
            with open(os.path.join(d, "big"), "wb") as fh:
                while written < cap:
                    fh.write(b"x" * (1 << 20))
                    fh.flush()
                    written += 1
        else:
            i = 0
            while written < cap:
                with open(os.path.join(d, f"fill{i}"), "wb") as fh:
                    for _ in range(4):
                        fh.write(b"x" * (1 << 20))
                        fh.flush()
                        written += 1
                i += 1
        say(mb=written, error=None)
    except OSError as e:
        say(mb=written, error=e.strerror)
