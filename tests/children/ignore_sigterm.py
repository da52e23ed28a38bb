"""Ignores SIGTERM, says it is ready, then sleeps forever."""
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
sys.stderr.write("ignoring SIGTERM\n")
sys.stderr.flush()
while True:
    time.sleep(1)
