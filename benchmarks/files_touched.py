"""How many of the package's files run host code for one warm execution at level ``none``.

A profile hook on every thread of the host records the file of each function called while
one execution runs (the engine warmed by two before it), and until what it left to the
background (the next interpreter started ahead) is done: ``print(1)``, then a script making
one ``read_file`` call. The files are listed, so what a change adds to the path shows.

    python benchmarks/files_touched.py
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from _settle import settled

import execengine
from execengine import Engine
from execengine.config import Config

ROOT = str(Path(execengine.__file__).parent)


def files_run(code: str) -> dict[str, set[str]]:
    """``{file: {function names}}`` of the package's code run by one warm execution."""
    seen: dict[str, set[str]] = collections.defaultdict(set)
    on = threading.Event()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and on.is_set() and frame.f_code.co_filename.startswith(ROOT):
            seen[os.path.relpath(frame.f_code.co_filename, ROOT)].add(frame.f_code.co_name)

    # set before the engine exists: its threads (the RPC loop, the tool pool) take it too
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        config = Config().with_overrides({"code_execution.isolation": "none"})
        with Engine(config) as engine:
            for _ in range(2):
                engine.execute(code)
            settled(engine)
            on.set()
            result = engine.execute(code)
            settled(engine)  # what the execution left to the background (the next start)
            on.clear()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    if not result.ok:
        raise SystemExit(f"the measured execution failed: {result.error}")
    return dict(seen)


def main() -> int:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("one line\n")
    try:
        plain = files_run("print(1)")
        call = files_run(f"from hermes_tools import read_file\nread_file({f.name!r})")
    finally:
        os.unlink(f.name)
    print(f"warm print(1) at none: {len(plain)} files")
    for name in sorted(plain):
        print(f"  {name}")
    print(f"with one read_file call: {len(call)} files (+{len(set(call) - set(plain))})")
    for name in sorted(set(call) - set(plain)):
        print(f"  + {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
