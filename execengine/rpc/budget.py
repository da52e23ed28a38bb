"""What the tool calls in flight may hold of the host's memory, and giving it back.

A call's arguments live in the host from the moment its message is read until its tool
returns: the frame, the decoded text, the argument objects, and whatever the tool makes of
them (a 15 MiB argument costs the host several times that). One script sending 20 such
calls at once raised the host's RSS by hundreds of MiB (about 1 GB on the machine the
issue was found on), and 60-450 MiB stayed after ``close()``. So:

* **A bound over all executions of one server** (``code_execution.max_inflight_bytes``):
  every call whose message is :data:`COUNTED` bytes or more takes its size from a
  :class:`ByteBudget` before it is admitted and gives it back when it ends, whichever way
  (answered, refused, dropped unstarted when its execution ended). A call that would pass
  the bound is answered with an error result at once; a call is never refused while
  nothing else is counted, so one call of up to ``max_message_bytes`` always runs. Small
  calls are not counted (the per-execution ``max_parallel_tool_calls`` bounds them, and
  the hot path stays lock-free).
* **Memory given back**: once the last counted call of at least :data:`TRIM_AFTER` bytes
  has ended, the C allocator is asked to return its free pages to the system
  (``malloc_trim``, glibc only; :func:`give_back`). Without it, glibc kept the freed
  buffers of the big messages (its mmap threshold grows after a big free, so the next big
  buffers come from the heap, which it never shrinks by itself).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading

#: messages this size or larger count against the bound
COUNTED = 64 * 1024
#: after a call of this size or larger, once no counted call is left, memory is given back
TRIM_AFTER = 1024 * 1024
MIB = 1024 * 1024

_libc: ctypes.CDLL | None = None
with contextlib.suppress(OSError):
    _libc = ctypes.CDLL(None)
_trim = getattr(_libc, "malloc_trim", None)  # glibc's; absent on musl and elsewhere


def give_back() -> bool:
    """Return the C allocator's free memory to the system; False where it cannot."""
    if _trim is None:
        return False
    _trim(0)
    return True


class ByteBudget:
    """Bytes held by counted calls in flight, at most ``limit`` (see the module)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        #: the largest counted call since the budget was last empty
        self._largest = 0
        self._lock = threading.Lock()
        #: times memory was given back (for tests and figures)
        self.trims = 0

    def take(self, size: int) -> str | None:
        """Count ``size`` bytes; the refusal text when the bound does not allow it."""
        with self._lock:
            if self.held and self.held + size > self.limit:
                held = self.held
            else:
                self.held += size
                self._largest = max(self._largest, size)
                return None
        return (f"Tool call refused: the tool calls in flight on this host already hold "
                f"{held / MIB:.1f} MiB of arguments, and this call's {size / MIB:.1f} MiB "
                f"would pass code_execution.max_inflight_bytes ({self.limit / MIB:.0f} MiB). "
                "Wait for calls to finish before sending more, or pass large data by file "
                "path instead of in the arguments.")

    def give(self, size: int) -> None:
        """Give ``size`` bytes back; the last big call out gives the memory back too."""
        with self._lock:
            self.held -= size
            trim = not self.held and self._largest >= TRIM_AFTER
            if not self.held:
                self._largest = 0
        if trim and give_back():
            self.trims += 1
