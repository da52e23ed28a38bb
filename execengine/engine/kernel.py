"""The host's handle on one session kernel (the child runs :mod:`sandbox.kernel`).

A :class:`KernelProcess` wraps a started :class:`~execengine.launch.base.Child` and the two
pipes of the kernel protocol (commands in, replies out; one JSON object per line). It runs
one cell at a time (:meth:`KernelProcess.run`): it sends the code with a fresh random end
secret, reads stdout and stderr into the cell's captures until the kernel has written the
marker made from it to both, and enforces the cell's deadline and interrupt in place:
``KeyboardInterrupt`` in the kernel's main thread, ``grace`` seconds, then, only if the cell
did not stop, the kernel is killed (its state is lost). The caller serializes cells; this
class does not.

The end of a cell is the host's to decide: only a ``done`` reply carrying the cell's own end
secret ends it (a cell's code could always find its marker in the kernel's frames, write it
and a ``done`` early, and keep running to answer for the next cell). The runtime keeps the
secret out of the cell's frames and takes it only once the cell's code has returned; the
call ``credential`` (see :meth:`execengine.rpc.channel.Channel.open_cell`) travels the same
way.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import select
import selectors
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

from execengine.engine import cellsweep
from execengine.launch.base import Child
from execengine.launch.supervise import OutputCapture

#: how often a running cell looks at its interrupt flag
TICK = 0.05
#: bound on waiting for the end markers once the kernel said a cell is done
DRAIN_SECONDS = 2.0
#: bytes after a cell's end marker kept for the next cell's output (the rest is dropped)
MAX_CARRY = 1 << 20
#: a reply line longer than this is a protocol violation (the kernel is killed)
MAX_REPLY_BYTES = 1 << 20
#: lines on the reply pipe that are not replies (a cell can write to it) ignored in a
#: kernel's life; one more is a protocol violation: parsing a flood of them cost the host
#: seconds of CPU per megabyte
MAX_GARBAGE_LINES = 1000
#: how long close() lets a kernel exit by itself (EOF on its command pipe) before killing
EXIT_WAIT = 1.0

Reason = Literal["done", "timeout", "interrupted", "died"]


@dataclass(frozen=True)
class CellOutcome:
    """How a cell ended. ``reason`` is ``done`` (it ran to its end, well or not), ``timeout``
    or ``interrupted`` (stopped in place when ``state_lost`` is false, by killing the kernel
    otherwise) or ``died`` (the kernel exited during the cell; ``exit_code`` is its status)."""

    reason: Reason
    status: str = "ok"  # the kernel's word: ok, error, exit, interrupted
    exit_code: int | None = 0
    state_lost: bool = False
    #: when it died: processes of the kernel the OOM killer ended (where counted)
    oom_kills: int = 0


class _Cut:
    """Feeds one stream into a capture up to the cell's end marker."""

    def __init__(self, marker: bytes, capture: OutputCapture, carry: bytes) -> None:
        self.marker = marker
        self.capture = capture
        self.buf = b""
        self.found = False
        self.rest = b""  # bytes after the marker: they belong to the next cell
        if carry:
            self.feed(carry)

    def feed(self, data: bytes) -> None:
        if self.found:
            # a cell can write its own marker early (it is in the kernel's frame) and
            # flood: keep a bounded head for the next cell, drop the rest
            room = MAX_CARRY - len(self.rest)
            if room > 0:
                self.rest += data[:room]
            return
        buf = self.buf + data
        i = buf.find(self.marker)
        if i >= 0:
            self.capture.feed(buf[:i])
            self.rest = buf[i + len(self.marker):][:MAX_CARRY]
            self.buf, self.found = b"", True
            return
        keep = len(self.marker) - 1  # a marker may be split across reads
        self.capture.feed(buf[:-keep] if len(buf) > keep else b"")
        self.buf = buf[-keep:] if len(buf) > keep else buf

    def end(self) -> None:
        """The stream closed (or we stop waiting): what is held back is output too."""
        if not self.found:
            self.capture.feed(self.buf)
            self.buf, self.found = b"", True


class KernelProcess:
    """One started kernel. :meth:`close` is idempotent and thread-safe."""

    def __init__(self, child: Child, cmd_fd: int, reply_fd: int) -> None:
        self.child = child
        self._cmd = cmd_fd
        self._reply = reply_fd
        self._reply_buf = bytearray()
        self._garbage = 0
        self._replies: list[dict[str, Any]] = []
        self._carry = {"out": b"", "err": b""}
        self._cell = 0
        self._close_lock = threading.Lock()
        self.closed = False
        self.pid: int | None = None
        self._sandbox: frozenset[cellsweep.Process] = frozenset()
        self._sel = selectors.DefaultSelector()
        self._fds = {child.stdout.fileno(): "out", child.stderr.fileno(): "err",
                     reply_fd: "reply"}
        for fd in self._fds:
            os.set_blocking(fd, False)
            self._sel.register(fd, selectors.EVENT_READ)
        os.set_blocking(cmd_fd, False)  # a kernel that stops reading cannot block us
        self._eof: set[str] = set()

    # -- start-up -------------------------------------------------------------------------

    def wait_ready(self, timeout: float) -> str | None:
        """The start-up handshake: None when the kernel said ready within ``timeout``
        seconds, else why not (with what it wrote to stderr)."""
        err = OutputCapture(4096, name="stderr")
        end = time.monotonic() + timeout
        while not self._replies:
            left = end - time.monotonic()
            if left <= 0 or "reply" in self._eof:
                break
            self._pump(min(left, TICK), {"err": _Sink(err), "out": _Sink(None)})
        msg = self._replies.pop(0) if self._replies else None
        if not msg or msg.get("op") != "ready":
            text = err.result().text.strip()
            why = "exited" if "reply" in self._eof else f"did not start within {timeout:g}s"
            return (f"The session's kernel {why} (code_execution.hello_timeout) and was "
                    "killed" + (f"; it said: {text}" if text else "."))
        pid = msg.get("pid")
        self.pid = pid if isinstance(pid, int) else None
        # what the sandbox is made of, before any cell ran (see .cellsweep)
        self._sandbox = cellsweep.snapshot(getattr(self.child, "cgroup_dirs", ()))
        return None

    # -- cells ----------------------------------------------------------------------------

    @property
    def closed_streams(self) -> list[str]:
        """``stdout``/``stderr`` when a cell closed them (their output is lost since)."""
        return [f"std{n}" for n in ("out", "err") if n in self._eof]

    def alive(self) -> bool:
        return not self.closed and "reply" not in self._eof and self.child.poll() is None

    def run(self, code: str, *, stdout: OutputCapture, stderr: OutputCapture,
            timeout: float, grace: float,
            interrupt: threading.Event | None = None,
            credential: str | None = None) -> CellOutcome:
        """Run one cell; see the module docstring. Never raises for what the cell does.
        ``credential``: the cell's call credential, given to the channel's ``open_cell``
        too (its tool calls must carry it)."""
        self._cell += 1
        cell = self._cell
        end = secrets.token_hex(16)
        marker = cell_marker(cell, end)
        cuts = {"out": _Cut(marker.encode(), stdout, self._carry["out"]),
                "err": _Cut(marker.encode(), stderr, self._carry["err"])}
        for name in self._eof & {"out", "err"}:
            cuts[name].end()
        start = time.monotonic()
        deadline = start + timeout
        why: Reason | None = None
        grace_end = 0.0
        done: dict[str, Any] | None = None
        done_by = 0.0
        try:
            command: dict[str, Any] = {"op": "run", "cell": cell, "code": code, "end": end}
            if credential is not None:
                command["calls"] = credential
            sent = self._send(command, deadline)
        except OSError:
            return self._died(cuts)
        if not sent:  # the kernel does not read its commands (a thread holding the GIL)
            self.kill()
            self._drain(cuts)
            return CellOutcome("timeout", "killed", self.child.poll(), state_lost=True)
        while True:
            if done is None:
                for msg in self._take_replies():
                    if (msg.get("op") == "done" and msg.get("cell") == cell
                            and _same(msg.get("end"), end)):
                        done, done_by = msg, time.monotonic() + DRAIN_SECONDS
            if done is not None:
                if all(c.found for c in cuts.values()) or time.monotonic() >= done_by:
                    break
            elif "reply" in self._eof:
                return self._died(cuts)
            now = time.monotonic()
            if done is None and why is None:
                if interrupt is not None and interrupt.is_set():
                    why = "interrupted"
                elif now >= deadline:
                    why = "timeout"
                if why is not None:
                    grace_end = now + grace
                    with contextlib.suppress(OSError):
                        self._send({"op": "interrupt", "cell": cell}, grace_end)
            if done is None and why is not None and now >= grace_end:
                self.kill()  # it did not stop: the state goes with the kernel
                self._drain(cuts)
                return CellOutcome(why, "killed", self.child.poll(), state_lost=True)
            if done is not None:
                wait = done_by - now
            elif why is not None:
                wait = grace_end - now
            else:
                wait = deadline - now
            self._pump(max(0.0, min(wait, TICK)), cuts)
        for name, cut in cuts.items():
            cut.end()
            self._carry[name] = cut.rest
        status = str(done.get("status"))
        code_ = done.get("code")
        exit_code = code_ if isinstance(code_, int) else 1
        if why is not None:  # stopped in place (or it caught the interrupt and ended)
            return CellOutcome(why, "interrupted", exit_code)
        return CellOutcome("done", status, exit_code)

    def _died(self, cuts: dict[str, _Cut]) -> CellOutcome:
        self._drain(cuts)
        status = self.child.wait(EXIT_WAIT)
        return CellOutcome("died", "died", status, state_lost=True,
                           oom_kills=self.child.oom_kills())

    def _drain(self, cuts: dict[str, _Cut]) -> None:
        end = time.monotonic() + DRAIN_SECONDS
        while not {"out", "err"} <= self._eof and time.monotonic() < end:
            self._pump(min(TICK, end - time.monotonic()), cuts)
        for cut in cuts.values():
            cut.end()

    # -- pipes ----------------------------------------------------------------------------

    def _send(self, msg: dict[str, Any], deadline: float) -> bool:
        """Write one command; False if the kernel did not take it by ``deadline``."""
        data = (json.dumps(msg) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._cmd, view):]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                # poll, not select: descriptor numbers above 1023 are normal on a busy host
                poller = select.poll()
                poller.register(self._cmd, select.POLLOUT)
                poller.poll(min(left, TICK) * 1000)
        return True

    def _take_replies(self) -> list[dict[str, Any]]:
        out, self._replies = self._replies, []
        return out

    def _pump(self, timeout: float, sinks: dict[str, Any]) -> None:
        try:
            if self.closed:
                raise ValueError("closed")
            ready = self._sel.select(timeout)
        except (OSError, ValueError):  # closed under a running cell (engine close)
            self._eof |= {"out", "err", "reply"}
            for sink in sinks.values():
                sink.end()
            return
        for key, _ in ready:
            name = self._fds[key.fd]
            try:
                data = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self._sel.unregister(key.fd)
                self._eof.add(name)
                if name in sinks:
                    sinks[name].end()
                continue
            if name == "reply":
                self._on_reply(data)
            else:
                sinks[name].feed(data)

    def _on_reply(self, data: bytes) -> None:
        self._reply_buf += data  # a bytearray: a long line grows without copies
        if b"\n" in data:
            *lines, rest = self._reply_buf.split(b"\n")
            self._reply_buf = bytearray(rest)
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                if isinstance(msg, dict):
                    self._replies.append(msg)
                    continue
                # garbage from the cell (it can write to the fd): a little is ignored
                self._garbage += 1
                if self._garbage > MAX_GARBAGE_LINES:
                    self._reply_buf = bytearray()
                    self.kill()
                    return
        if len(self._reply_buf) > MAX_REPLY_BYTES:
            self._reply_buf = bytearray()
            self.kill()

    # -- ending -----------------------------------------------------------------------------

    def kill(self) -> None:
        """Kill the kernel and everything it started (bounded)."""
        self.child.kill()

    def sweep(self) -> int:
        """Kill what the last cell left running, from the host (see :mod:`.cellsweep`:
        the kernel's own sweep runs where a cell can replace it); how many."""
        if self.closed:
            return 0
        return cellsweep.sweep(getattr(self.child, "cgroup_dirs", ()), self._sandbox)

    def close(self) -> None:
        """End the kernel: EOF on its command pipe (it kills its own tree and exits), a
        bounded wait, then the launcher's kill; pipes released."""
        with self._close_lock:
            if self.closed:
                return
            self.closed = True
        self.begin_close()
        try:
            self.child.wait(EXIT_WAIT)
        finally:
            try:
                self.child.close()
            finally:
                self._sel.close()
                with contextlib.suppress(OSError):
                    os.close(self._reply)

    def begin_close(self) -> None:
        """Close the command pipe: the kernel starts dying now (see :meth:`close`)."""
        fd, self._cmd = self._cmd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def cell_marker(cell: int, end: str) -> str:
    """What the kernel writes to stdout and stderr when ``cell`` ends (``sandbox/kernel.py``
    makes the same from the end secret)."""
    return f"\0execengine-cell-{cell}-{end}\0"


def _same(given: Any, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(
        given.encode("utf-8", "replace"), expected.encode("ascii"))


class _Sink:
    """A stream during start-up: fed to a capture (or dropped)."""

    def __init__(self, capture: OutputCapture | None) -> None:
        self.capture = capture

    def feed(self, data: bytes) -> None:
        if self.capture is not None:
            self.capture.feed(data)

    def end(self) -> None:
        pass
