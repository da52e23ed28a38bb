"""Serving the file operations over a byte stream: the remote end of the ``ssh`` backend.

One JSON object per line in, one per line out, in order::

    {"id": 7, "op": "read_file", "args": {...}, "cwd": "/home/u/proj",
     "denied": ["~/.ssh", ...], "settings": {"max_read_chars": 100000, ...}}
    {"id": 7, "result": {...}}          or          {"id": 7, "error": "..."}

The operations are :mod:`.ops`' (the same code as the engine runs locally); paths resolve
on the machine this runs on (``~`` is its user's home). It uses the standard library and
this package only, so it can be shipped to a remote (Python >= 3.10) and run there.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from execengine.fileops.ops import OPERATIONS, FileSettings
from execengine.fileops.paths import PathGuard, Scope

#: the largest request line accepted
MAX_REQUEST = 256 * 1024 * 1024


class Server:
    def __init__(self) -> None:
        self._guards: dict[tuple[str, ...], PathGuard] = {}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = OPERATIONS.get(str(request.get("op")))
        if op is None:
            raise ValueError(f"unknown operation {request.get('op')!r}")
        args, cwd = request.get("args"), request.get("cwd")
        if not isinstance(args, dict) or not isinstance(cwd, str):
            raise ValueError("a request needs args (an object) and cwd (a string)")
        denied = tuple(str(d) for d in request.get("denied") or ())
        guard = self._guards.get(denied)
        if guard is None:  # denied paths are resolved once per list (they rarely change)
            guard = self._guards[denied] = PathGuard(denied)
        settings = FileSettings(**(request.get("settings") or {}))
        return op(Scope(os.path.expanduser(cwd), guard), args, settings)

    def serve(self, inp: IO[bytes], out: IO[bytes]) -> None:
        while True:
            line = inp.readline(MAX_REQUEST)
            if not line:
                return
            rid: Any = None
            try:
                request = json.loads(line.decode("utf-8", "surrogatepass"))
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
                rid = request.get("id")
                reply: dict[str, Any] = {"id": rid, "result": self.handle(request)}
            except Exception as exc:  # one reply per request, whatever happened
                reply = {"id": rid, "error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(reply, ensure_ascii=False).encode("utf-8", "surrogatepass")
                      + b"\n")
            out.flush()


def main() -> int:
    Server().serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0
