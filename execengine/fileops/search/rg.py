"""ripgrep search backend: ``rg --json`` with flags that make it walk like :mod:`.walk`."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache

from execengine.errors import FileOpError, PatternUnsupported
from execengine.fileops.search.query import SKIPPED_NAMES, Hit, Query

#: seconds one ripgrep run may take
TIMEOUT = 60.0

_COMMON = (
    "--no-config", "--hidden", "--no-require-git", "--no-ignore-dot", "--no-ignore-global",
    "--no-ignore-exclude", "--no-mmap", "--no-messages", "--sort", "path",
    *(arg for name in SKIPPED_NAMES for arg in ("--glob", f"!{name}")),
)


@cache
def _pcre2_available(exe: str) -> bool:
    try:
        done = subprocess.run([exe, "--pcre2-version"], capture_output=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_rg() -> str | None:
    return shutil.which("rg")


class RipgrepBackend:
    name = "ripgrep"

    def __init__(self, exe: str) -> None:
        self.exe = exe

    def files(self, query: Query, max_hits: int) -> list[str]:
        out: list[str] = []
        for raw in self._lines([self.exe, "--files", *_COMMON, "--", str(query.root)]):
            out.append(os.path.abspath(os.fsdecode(raw.rstrip(b"\n"))))
            if len(out) >= max_hits:
                break
        return out

    def grep(self, query: Query, max_hits: int) -> list[Hit]:
        # file_glob is applied afterwards, not with --glob: rg's globs override .gitignore
        args = [self.exe, "--json", *_COMMON]
        try:
            return self._grep([*args, "-e", query.pattern, "--", str(query.root)], max_hits)
        except PatternUnsupported:
            if not _pcre2_available(self.exe):
                raise
            return self._grep([*args, "--pcre2", "-e", query.pattern, "--", str(query.root)],
                              max_hits)

    def _grep(self, argv: list[str], max_hits: int) -> list[Hit]:
        hits: list[Hit] = []
        pending: list[Hit] = []  # this file's hits, kept unless the file turns out binary
        for raw in self._lines(argv):
            msg = json.loads(raw)
            kind, data = msg.get("type"), msg.get("data", {})
            if kind == "begin":
                pending = []
            elif kind == "match":
                line = _text(data["lines"])
                line = line[:-1] if line.endswith("\n") else line
                pending.append(Hit(os.path.abspath(_path(data["path"])),
                                   data["line_number"], line))
            elif kind == "end":
                if data.get("binary_offset") is None:
                    hits.extend(pending)
                pending = []
                if len(hits) >= max_hits:
                    return hits[:max_hits]
        return hits

    def _lines(self, argv: list[str]) -> Iterator[bytes]:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={**os.environ, "LC_ALL": "C"})
        try:
            assert proc.stdout is not None
            yield from proc.stdout
            _, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise FileOpError(f"search took longer than {TIMEOUT:.0f}s; narrow the path "
                              "or the pattern") from None
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        if proc.returncode == 2 and b"regex" in err.lower():
            raise PatternUnsupported(err.decode("utf-8", "replace").strip())
        if proc.returncode not in (0, 1, 2):
            raise FileOpError(f"ripgrep failed ({proc.returncode}): "
                              f"{err.decode('utf-8', 'replace').strip()[:500]}")


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode("utf-8", errors="replace")


def _path(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return os.fsdecode(base64.b64decode(field["bytes"]))
