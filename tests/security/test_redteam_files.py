"""Red team: a script turns the host's file tools against the host itself.

* **A FIFO** the script makes in its working directory: ``read_file``, ``patch`` and
  ``search_files`` run on the host, and a plain ``open()`` of a FIFO with no writer blocks
  forever, holding a host tool worker after the execution ended (enough of them and no
  execution gets a tool call answered). Every tool must answer at once with an error.
* **A huge file** (a sparse one costs the script nothing; ``max_file_mb`` allows 1 GiB) or
  one endless line: the tools must not make the host hold the whole file (each of a
  script's parallel calls would). Measured with ``tracemalloc`` on the host process, where
  the tools run.

Every level runs, including ``none`` confined (``policy.confine_at_none``) and unconfined:
the tools' reading code is the same. The negative control is host-side: the probe really
made a FIFO with no writer (a blocking open would wait) and a file larger than the bound.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
import time
import tracemalloc

import pytest

from execengine.config import load_config
from execengine.engine.core import Engine

from .conftest import level_params

LEVEL = level_params()
CONFINED_AT_NONE = pytest.param("none", True, id="none-confined")


def _levels() -> list[object]:
    return [pytest.param(p.values[0], False, marks=p.marks, id=p.id) for p in LEVEL] + [
        CONFINED_AT_NONE]


def _engine(level: str, tmp_path, confine_at_none: bool, timeout: int = 30) -> Engine:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("approvals:\n  mode: allow\n")
    config = load_config(config_file).with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": timeout, "policy.confine_at_none": confine_at_none})
    return Engine(config)


def _last_json(output: str) -> dict:
    return json.loads([x for x in output.splitlines() if x.startswith("{")][-1])


def _tool_threads_busy() -> list[str]:
    return [t.name for t in threading.enumerate()
            if t.name.startswith("execengine-tool") and _in_open(t)]


def _in_open(thread: threading.Thread) -> bool:
    import sys
    import traceback

    frame = sys._current_frames().get(thread.ident or -1)
    return frame is not None and any(
        "checked_open" in line or "open_binary" in line
        for line in traceback.format_stack(frame))


FIFO_ATTACK = """
import json, os
from hermes_tools import read_file, patch, search_files
os.mkfifo("pipe")
os.mkdir("sub")
os.mkfifo("sub/inner")
res = {
    "read": read_file("pipe"),
    "patch": patch(mode="replace", path="pipe", old_string="a", new_string="b"),
    "search": search_files("anything", path="sub"),
}
print(json.dumps(res))
"""


@pytest.mark.parametrize(("level", "confine_at_none"), _levels())
def test_a_fifo_does_not_hold_a_host_worker(level, confine_at_none, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with _engine(level, tmp_path, confine_at_none, timeout=20) as engine:
        started = time.monotonic()
        result = engine.execute(FIFO_ATTACK, cwd=str(work))
        took = time.monotonic() - started
        busy = _tool_threads_busy()
    # negative control: the probe made FIFOs no one writes to, so a blocking open() of
    # them would wait for ever (a non-blocking open for writing finds no reader either)
    for name in ("pipe", "sub/inner"):
        assert stat.S_ISFIFO(os.lstat(work / name).st_mode)
        with pytest.raises(OSError) as info:
            os.open(work / name, os.O_WRONLY | os.O_NONBLOCK)
        assert info.value.errno == errno.ENXIO
    assert result.status == "success", (result.status, result.error, result.output)
    assert took < 15, took
    res = _last_json(result.output)
    assert "not a regular file" in res["read"]["error"], res
    assert "error" in res["patch"] or res["patch"].get("success") is False, res
    assert res["search"].get("matches", []) == [], res
    assert busy == [], busy


BIG_ATTACK = """
import json, os
from hermes_tools import read_file, patch, search_files
os.mkdir("sub")
with open("sparse.txt", "wb") as fh:
    fh.truncate({big})
with open("sub/line.txt", "wb") as fh:
    chunk = b"a" * (1 << 20)
    for _ in range({line_mb}):
        fh.write(chunk)
    fh.write(b"\\nneedle\\n")
res = {{
    "patch": patch(mode="replace", path="sparse.txt", old_string="x", new_string="y"),
    "read": read_file("sub/line.txt"),
    "search": search_files("needle", path="sub"),
}}
print(json.dumps(res)[:4000])
"""


@pytest.mark.parametrize(("level", "confine_at_none"), _levels())
def test_a_huge_file_does_not_fill_the_host(level, confine_at_none, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    big, line_mb = 256 << 20, 48
    with _engine(level, tmp_path, confine_at_none) as engine:
        tracemalloc.start()
        try:
            result = engine.execute(BIG_ATTACK.format(big=big, line_mb=line_mb),
                                    cwd=str(work))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    # negative control: the files are larger than the bound asserted below
    assert (work / "sparse.txt").stat().st_size == big
    assert (work / "sub" / "line.txt").stat().st_size > line_mb << 20
    assert result.status == "success", (result.status, result.error, result.output)
    res = _last_json(result.output)
    assert "too large" in res["patch"]["error"], res
    assert "line cut: 50331648 characters" in res["read"]["content"], res["read"]
    assert res["search"]["total_count"] == 1, res["search"]
    assert peak < 40 << 20, f"the host held {peak >> 20} MiB"
