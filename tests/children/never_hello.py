"""Starts in place of the child runtime but never connects: the host must kill it."""
import time

print("started, not connecting", flush=True)
while True:
    time.sleep(1)
