"""A session kernel: many cells in one persistent ``__main__`` (``python -c "{ENTRY}"``).

The host talks to the kernel over two pipes it passes in (``EXECENGINE_KERNEL_FDS`` =
``"<command read fd>,<reply write fd>"``, removed from the environment): one JSON object per
line each way. Stdout and stderr stay the process's own pipes, read by the host.

- ``{"op": "run", "cell": N, "code": ..., "end": E, "calls": C}`` runs ``code`` in the
  persistent ``__main__`` globals. When the cell ends, stdout and stderr are flushed, every
  process the cell left running is killed, the marker made from the end secret ``E``
  (``"\0execengine-cell-N-E\0"``) is written to fd 1 and fd 2 (the host cuts each stream
  there), then ``{"op": "done", "cell": N, "end": E, "status": ..., "code": ...}`` is sent.
  ``C`` is the cell's call credential: each tool call of a thread of the cell carries it.
  ``status`` is ``ok``, ``error`` (uncaught exception, printed to stderr as Python would),
  ``exit`` (``SystemExit``; ``code`` is its status) or ``interrupted``.
- ``{"op": "interrupt", "cell": N}`` raises ``KeyboardInterrupt`` in the main thread if cell
  ``N`` is still running (a real SIGINT to that thread, so blocking calls return early).
- End of file on the command pipe means the host is gone or closed the kernel: everything
  of the kernel is killed at once (the watchdog of :mod:`.bootstrap`).

At start the kernel becomes a child subreaper and answers ``{"op": "ready", "pid": P}``.
Cells find the project's modules (project mode; else the working directory's) last on
``sys.path`` (``ENTRY`` took the working directory out of the first place ``-c`` gives it,
before anything of the runtime was imported).

A thread a cell leaves running keeps running, but loses the cell's authority: its tool
calls are refused here (``client.call_gate``), and the host refuses any call that arrives
while no cell runs or without the running cell's call credential. The host decides: a
thread holds the credential of the cell that was running when it was started (the main
thread, the running cell's), so resetting ``call_gate`` does not make a leftover thread's
calls the next cell's; and only a ``done`` with the cell's end secret ends a cell. The
secrets of a cell are taken out of its command by the reader thread and kept in closures
(:func:`_secrets`), not in the frames a cell's code runs under; the end secret is taken
only after the cell's code returned. Code that searches the whole process for them (the
garbage collector's objects) can still find them: a kernel is one session's, and such code
only deceives its own session.
"""

from __future__ import annotations

import _thread
import contextlib
import json
import linecache
import os
import signal
import sys
import threading
import time
import traceback
import types

from . import bootstrap

TYPE_CHECKING = False  # no typing import at run time: the child starts fast
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

ENV_FDS = "EXECENGINE_KERNEL_FDS"
#: what the engine runs with ``python -c`` (no runpy at start-up)
ENTRY = ("import sys; sys.path[:1] == [''] and sys.path.pop(0); "
         "from _execengine.kernel import main; sys.exit(main())")


class _State:
    """What the reader thread and the main thread share (guarded by ``lock``)."""

    def __init__(self) -> None:
        # re-entrant: the SIGINT handler runs in the main thread, maybe while it holds it
        self.lock = threading.RLock()
        self.cell = 0  # the running cell, 0 between cells
        self.interrupt = False  # the host asked to interrupt the running cell
        self.pending = 0  # an interrupt that arrived before its cell started
        #: thread ident -> (the cell it outlived, its Thread object if it has one)
        self.stale = {}  # type: dict[int, tuple[int, threading.Thread | None]]


_state = _State()
_main_ident = threading.get_ident()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    with _state.lock:
        wanted = _state.cell and _state.interrupt
    if wanted:
        raise KeyboardInterrupt


def _reader(fd: int, cells: list[dict[str, Any]]) -> None:
    """Read commands; hand cells to the main thread, deliver interrupts; die on EOF."""
    buf = b""
    try:
        while True:
            data = os.read(fd, 1 << 16)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line.decode("utf-8"))
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                if msg.get("op") == "run":
                    _keep(msg.get("cell"), msg.pop("end", None), msg.pop("calls", None))
                    cells.append(msg)
                    _wake.release()
                elif msg.get("op") == "interrupt":
                    with _state.lock:
                        hit = _state.cell and _state.cell == msg.get("cell")
                        if hit:
                            _state.interrupt = True
                        elif isinstance(msg.get("cell"), int):
                            _state.pending = msg["cell"]
                    if hit:
                        signal.pthread_kill(_main_ident, signal.SIGINT)
    except OSError:
        pass
    bootstrap._kill_everything()


_wake = threading.Semaphore(0)


def _secrets() -> tuple[Any, ...]:
    """The cells' secrets, in closures: ``keep(cell, end, calls)`` (the reader),
    ``begin(cell)`` / ``finish(cell) -> end`` (the main thread, before and after the cell's
    code), ``credential()`` (the calling thread's call credential), ``bind(ident, cred)``
    / ``unbind(ident)`` (threads, as they start and end)."""
    lock = threading.Lock()
    ends = {}  # type: dict[int, str]
    calls = {}  # type: dict[int, str | None]
    threads = {}  # type: dict[int, str | None]
    running = [None]  # type: list[str | None]

    def keep(cell: Any, end: Any, call: Any) -> None:
        if isinstance(cell, int) and isinstance(end, str):
            with lock:
                ends[cell] = end
                calls[cell] = call if isinstance(call, str) else None

    def begin(cell: int) -> None:
        with lock:
            running[0] = calls.pop(cell, None)

    def finish(cell: int) -> str | None:
        with lock:
            running[0] = None
            return ends.pop(cell, None)

    def credential() -> str | None:
        ident = threading.get_ident()
        with lock:
            return running[0] if ident == _main_ident else threads.get(ident)

    def bind(ident: int, cred: str | None) -> None:
        with lock:
            threads[ident] = cred

    def unbind(ident: int) -> None:
        with lock:
            threads.pop(ident, None)

    return keep, begin, finish, credential, bind, unbind


_keep, _begin, _finish, _credential, _bind, _unbind = _secrets()


def _bind_new_threads() -> None:
    """A thread holds the call credential of the thread that started it, as it was then
    (the running cell's, for a thread a cell starts): ``threading.Thread.start`` and
    ``_thread.start_new_thread`` are wrapped."""
    original_start = threading.Thread.start
    raw_start = _thread.start_new_thread

    def bound(function: Any, cred: str | None) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            ident = threading.get_ident()
            _bind(ident, cred)
            try:
                return function(*args, **kwargs)
            finally:
                _unbind(ident)

        return run

    def start(self: threading.Thread) -> None:
        self.run = bound(self.run, _credential())  # type: ignore[method-assign]
        original_start(self)

    def start_new_thread(function: Any, args: Any, kwargs: Any = None) -> int:
        return raw_start(bound(function, _credential()), args, kwargs or {})

    threading.Thread.start = start  # type: ignore[method-assign]
    _thread.start_new_thread = start_new_thread


def _gate() -> None:
    """Refuse a tool call from a thread whose cell has ended (see ``client.call_gate``)."""
    ident = threading.get_ident()
    with _state.lock:
        running = _state.cell
        entry = _state.stale.get(ident)
    if entry is not None:
        cell, thread = entry
        current = threading.current_thread()
        if thread is None or thread is current:
            from .client import ToolCallError

            raise ToolCallError(
                f"tool call refused: this thread was started by cell {cell}, which has "
                "ended; a cell's tool calls belong to the cell")
    if not running:
        from .client import ToolCallError

        raise ToolCallError("tool call refused: no cell is running in this session")


def _mark_leftover_threads(cell: int) -> None:
    """Threads alive at the end of ``cell`` lose its authority."""
    objects = {t.ident: t for t in threading.enumerate()}
    with _state.lock:
        for ident in sys._current_frames():
            if ident != _main_ident and ident not in _state.stale:
                _state.stale[ident] = (cell, objects.get(ident))


def _forget_dead_threads() -> None:
    alive = sys._current_frames()
    with _state.lock:
        for ident in [i for i in _state.stale if i not in alive]:
            del _state.stale[ident]


def _children(pid: str) -> list[str]:
    """Direct children of ``pid`` from ``/proc/<pid>/task/*/children``."""
    out = []  # type: list[bytes]
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(f.read().split())
        except OSError:
            continue
    return [p.decode() for p in out]


def _descendants() -> list[int]:
    found, stack = [], [str(os.getpid())]  # type: list[int], list[str]
    while stack:
        for child in _children(stack.pop()):
            found.append(int(child))
            stack.append(child)
    return found


def kill_leftover_processes(seconds: float = 2.0) -> int:
    """Kill every descendant (a subreaper's orphans included) and reap them; how many.

    A descendant we cannot see yet (below a child whose ``/proc`` entry we may not read)
    is reparented to us when its parent dies, and seen on the next round."""
    pid_ = os.getpid()
    fast = os.path.exists(f"/proc/{pid_}/task/{pid_}/children")
    killed = set()  # type: set[int]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pids = _descendants() if fast else bootstrap._descendants(os.getpid())
        if not pids:
            break
        fresh = [pid for pid in pids if pid not in killed]
        for pid in fresh:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)  # no forking while we look
        for pid in fresh:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        _reap()
        if not fresh:
            time.sleep(0.001)  # killed ones still exiting
    return len(killed)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Kernel:
    def __init__(self, cmd_fd: int, reply_fd: int) -> None:
        self.cmd_fd = cmd_fd
        self.reply_fd = reply_fd
        self.cells = []  # type: list[dict[str, Any]]
        main = types.ModuleType("__main__")
        main.__dict__.update({"__builtins__": __builtins__, "__package__": None,
                              "__spec__": None, "__cached__": None})
        sys.modules["__main__"] = main
        self.globals = main.__dict__

    def send(self, msg: dict[str, Any]) -> None:
        data = (json.dumps(msg) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.reply_fd, data):]

    def serve(self) -> None:
        self.send({"op": "ready", "pid": os.getpid()})
        while True:
            _wake.acquire()
            msg = self.cells.pop(0)
            self.run(msg)

    def run(self, msg: dict[str, Any]) -> None:
        cell = int(msg.get("cell") or 0)
        code = msg.get("code") or ""
        _begin(cell)  # the main thread holds the cell's call credential while it runs
        _forget_dead_threads()
        signal.signal(signal.SIGINT, _on_sigint)  # a cell may have replaced it
        status, exit_code = "ok", 0
        with _state.lock:
            early = _state.pending == cell
            _state.cell, _state.interrupt = cell, early
        try:
            try:
                if early:  # interrupted before it started: it does not run
                    status, exit_code = "interrupted", 130
                else:
                    status, exit_code = self._exec(cell, code)
            finally:
                with _state.lock:
                    interrupted = _state.interrupt
                    _state.cell, _state.interrupt = 0, False
        except KeyboardInterrupt:  # arrived between the cell's end and the flag
            interrupted = True
        if interrupted and status != "ok":
            status = "interrupted"
        end = _finish(cell) or ""  # the cell's code has returned: now it may be known
        marker = f"\0execengine-cell-{cell}-{end}\0".encode()
        bootstrap._flush()
        kill_leftover_processes()
        _mark_leftover_threads(cell)
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                os.write(fd, marker)
        self.send({"op": "done", "cell": cell, "end": end, "status": status,
                   "code": exit_code})

    def _exec(self, cell: int, code: str) -> tuple[str, int]:
        filename = f"<cell {cell}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            compiled = compile(code, filename, "exec", dont_inherit=True)
            exec(compiled, self.globals)
        except SystemExit as exc:
            value = exc.code
            if value is None:
                return "ok", 0
            if isinstance(value, int):
                return ("ok" if value == 0 else "exit"), value
            sys.stderr.write(str(value) + "\n")
            return "exit", 1
        except BaseException as exc:
            tb = exc.__traceback__
            tb = tb.tb_next if tb is not None else tb  # this frame
            try:
                if sys.excepthook is sys.__excepthook__:
                    # the default hook reads source lines from files; cells live in linecache
                    traceback.print_exception(type(exc), exc, tb)
                else:
                    sys.excepthook(type(exc), exc.with_traceback(tb), tb)
            except BaseException:  # a broken hook must not take the kernel down
                pass
            return "error", (130 if isinstance(exc, KeyboardInterrupt) else 1)
        return "ok", 0


def _connect() -> None:
    try:
        from .client import get_client

        get_client().connect()
    except Exception:  # kept by the client; the first tool call reports it
        pass


def main() -> int:
    value = os.environ.pop(ENV_FDS, "")
    try:
        cmd_fd, reply_fd = (int(v) for v in value.split(","))
        os.fstat(cmd_fd)
        os.fstat(reply_fd)
    except (ValueError, OSError):
        sys.stderr.write(f"execengine kernel: bad {ENV_FDS}={value!r}\n")
        return 2
    for fd in (cmd_fd, reply_fd):
        os.set_inheritable(fd, False)
    os.environ.pop(bootstrap.ENV_WATCHDOG_FD, None)
    os.environ.pop(bootstrap.ENV_SUBREAPER, None)
    bootstrap.become_subreaper()  # at every level: a cell's orphans must come to us
    sys.argv[:] = [""]
    kernel = Kernel(cmd_fd, reply_fd)
    from . import client

    client.call_gate = _gate
    client.call_credential = _credential
    # cells import the project's (else the working directory's) modules as at a prompt,
    # but after everything else: a module left there by an earlier cell or execution
    # cannot stand in for the runtime, the stub, the standard library or a package
    bootstrap.project_path(None if getattr(sys.flags, "safe_path", False) else "")
    _thread.start_new_thread(_connect, ())  # the first cell's first tool call is fast
    _thread.start_new_thread(_reader, (cmd_fd, kernel.cells))
    _bind_new_threads()  # after the runtime's own threads: they hold no credential
    kernel.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
