"""Writes $FLOOD_BYTES bytes to stdout: ANSI colours, invalid UTF-8, then a tail marker."""
import os
import sys

total = int(os.environ.get("FLOOD_BYTES", "2000000"))
out = sys.stdout.buffer
out.write(b"HEAD-MARK \x1b[31mred\x1b[0m \xff\xfe bad bytes\n")
line = b"x" * 99 + b"\n"
written = 0
while written < total:
    out.write(line)
    written += len(line)
out.write(b"TAIL-MARK\n")
out.flush()
sys.stderr.buffer.write(b"e" * 50_000)
