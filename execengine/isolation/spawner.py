"""Host side of the spawner process (see :mod:`._spawnserver`): start it, ask it to spawn.

:class:`Spawner` is thread-safe and a context manager; closing it makes the spawner SIGKILL
whatever it still runs and exit. Requests from several threads are in flight at once: each
carries an id, and the spawner answers a launch once its entry has started it (serving
other requests meanwhile), so replies come in any order; whichever waiting thread reads a
reply hands it to the thread that asked.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from execengine.errors import HandshakeError, SandboxError

#: the folder holding this very ``execengine`` package: the spawner runs the host's own
#: code (``-m`` under ``-I`` would import whichever copy the interpreter's site-packages
#: names, an editable install's checkout, say, not the one the host runs)
READY_TIMEOUT = 30.0
REPLY_TIMEOUT = 30.0
#: the spawner's program: the host's own copy of execengine (``-I`` ignores PYTHONPATH, so
#: ``-m`` would import whichever copy is installed, which need not be the one running)
_MAIN = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r}); "
         "from execengine.isolation._spawnserver import main; sys.exit(main(sys.argv))")


class Spawner:
    """``sweep_gid``: the sandbox group whose ACL grants the spawner revokes, with the
    private tmp folders, should this process die (see :mod:`._spawnserver`)."""

    def __init__(self, python: str = sys.executable, *, sweep_gid: int | None = None
                 ) -> None:
        self.python = python
        self._sweep = json.dumps({"tmp": tempfile.gettempdir(), "gid": sweep_gid})
        self._lock = threading.RLock()  # starting, sending, stopping
        self._replies = threading.Condition(threading.Lock())
        #: request id -> the socket it was sent on and its reply (None: not yet), for the
        #: requests in flight
        self._waiting: dict[int, tuple[socket.socket, dict[str, Any] | None]] = {}
        self._reading: set[socket.socket] = set()  # sockets a waiting thread reads
        self._ids = itertools.count(1)
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        self.pid: int | None = None

    def _start(self) -> socket.socket:
        if self._closed:
            raise SandboxError("the spawner is closed")
        if self._sock is not None:
            if self._proc is not None and self._proc.poll() is None:
                return self._sock
            self._stop()  # it died: start a fresh one
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [self.python, "-I", "-c", _MAIN, str(theirs.fileno()), self._sweep],
                pass_fds=[theirs.fileno()], env={}, cwd="/", stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise SandboxError(f"cannot start the sandbox spawner: {exc}") from exc
        finally:
            theirs.close()
        self._sock = ours
        ours.settimeout(READY_TIMEOUT)
        try:
            hello = json.loads(ours.recv(4096) or b"{}")
        except (OSError, ValueError) as exc:
            self._stop()
            raise HandshakeError(f"the sandbox spawner did not say ready: {exc}") from exc
        if not hello.get("ready"):
            self._stop()
            raise HandshakeError("the sandbox spawner did not say ready (see stderr)")
        self.pid = int(hello["pid"])
        ours.settimeout(REPLY_TIMEOUT)
        return ours

    def request(self, obj: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        rid = next(self._ids)
        with self._lock:
            sock = self._start()
            with self._replies:
                self._waiting[rid] = (sock, None)
            try:
                socket.send_fds(sock, [json.dumps({**obj, "rid": rid}).encode()], list(fds))
            except OSError as exc:
                self._fail(sock, f"the sandbox spawner failed: {exc}")
        try:
            return self._reply(sock, rid)
        finally:
            with self._replies:
                self._waiting.pop(rid, None)

    def _reply(self, sock: socket.socket, rid: int) -> dict[str, Any]:
        """Wait for the reply to ``rid``, reading ``sock`` while no other thread does."""
        with self._replies:
            while True:
                reply = self._waiting[rid][1]
                if reply is not None:
                    if reply.get("_failed"):
                        raise SandboxError(reply["_failed"])
                    return reply
                if sock not in self._reading:
                    break
                self._replies.wait()
            self._reading.add(sock)
        try:
            while True:
                try:
                    data = sock.recv(1 << 20)
                except OSError as exc:
                    self._fail(sock, f"the sandbox spawner failed: {exc}")
                if not data:
                    self._fail(sock, "the sandbox spawner exited unexpectedly")
                got: dict[str, Any] = json.loads(data)
                if got.get("rid") == rid:
                    return got
                with self._replies:
                    if got.get("rid") in self._waiting:
                        self._waiting[got["rid"]] = (sock, got)
                        self._replies.notify_all()
        finally:
            with self._replies:
                self._reading.discard(sock)
                self._replies.notify_all()

    def _fail(self, sock: socket.socket, why: str) -> NoReturn:
        """The spawner is gone: every request in flight on ``sock`` fails, with ``why``."""
        with self._lock:
            if self._sock is sock:
                self._stop()
        with self._replies:
            for rid, (on, reply) in list(self._waiting.items()):
                if on is sock and reply is None:
                    self._waiting[rid] = (on, {"_failed": why})
            self._replies.notify_all()
        raise SandboxError(why)

    def spawn(self, plan: dict[str, Any], fds: Sequence[int], warm: str | None = None,
              cold: dict[str, Any] | None = None) -> int:
        """Start ``plan``, through the warm entry ``warm`` when given (a cold one when that
        entry is gone); the child's pid once it has exec'd. ``cold``: how a cold entry may
        fork its interpreter from a template (see :mod:`._spawnserver`)."""
        reply = self.request({"op": "spawn", "plan": plan, "warm": warm, "cold": cold}, fds)
        if not reply.get("ok"):
            raise SandboxError(f"cannot start the sandboxed child: {reply.get('error')}")
        return int(reply["pid"])

    def prepare(self, wid: str, warm: dict[str, Any]) -> int:
        """Start a warm entry (see :mod:`._spawnserver`); returns at once."""
        reply = self.request({"op": "prepare", "id": wid, "warm": warm})
        if not reply.get("ok"):
            raise SandboxError(f"cannot prepare a sandbox entry: {reply.get('error')}")
        return int(reply["pid"])

    def discard(self, wid: str) -> None:
        """Kill an unused warm entry (a no-op when it is gone or the spawner is not running)."""
        with self._lock:
            if self._sock is None:
                return
        self.request({"op": "discard", "id": wid})

    def kill_uid(self, uid: int, sig: int) -> None:
        self.request({"op": "kill_uid", "uid": uid, "sig": sig})

    def _stop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):  # not a death: nothing for it to sweep
                sock.send(b'{"op": "bye"}')
            sock.close()
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop()

    def __enter__(self) -> Spawner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(Exception):
                warnings.warn("unclosed sandbox spawner", ResourceWarning, stacklevel=1)
