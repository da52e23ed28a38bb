"""Red team: a script's ``search_files`` pattern that backtracks for ever.

The Python search backend (every confined search uses it) matched a script's regex with
``re`` in the engine process, holding the GIL: ``(a|aa)+$`` over one line of 60 ``a`` froze
every thread of the host — RPC, other executions, the script's own timeout — for longer
than anyone waits. The match must neither stall the host nor run unbounded.

Measured from the host: a heartbeat thread's largest gap while the execution runs. The
negative control is the pattern itself: plain ``re`` on that line does not finish in 2 s.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from execengine.config import load_config
from execengine.engine.core import Engine
from execengine.fileops.search import pysearch

from .conftest import level_params

LEVELS = [pytest.param(p.values[0], False, marks=p.marks, id=p.id) for p in level_params()]
LEVELS.append(pytest.param("none", True, id="none-confined"))
PATTERN, LINE = r"(a|aa)+$", "a" * 60 + "b"

SCRIPT = f"""
import json
from hermes_tools import write_file, search_files
write_file("evil.txt", {LINE!r} + "\\n")
print(json.dumps(search_files({PATTERN!r}, path=".")))
"""


GLOB = "*a" * 12 + "*b"
GLOB_SCRIPT = f"""
import json, os
from hermes_tools import search_files, write_file
write_file("a" * 200, "x\\n")
write_file(".gitignore", {GLOB!r} + "\\n")
print(json.dumps([search_files({GLOB!r}, path=".", target="files"),
                  search_files("x", path=".", file_glob={GLOB!r})]))
"""


def test_the_glob_is_catastrophic_for_re():
    """The negative control of the glob probe: ``re`` on its translation does not
    finish on a 200-character name in 2 s."""
    from execengine.fileops.search.globs import _translate

    code = (f"import re; re.compile({_translate(GLOB, braces=True)!r})"
            f".fullmatch({'a' * 200!r})")
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", code], timeout=2)


def test_the_pattern_is_catastrophic_for_re():
    """The negative control: ``re`` does not finish this match in 2 s."""
    code = f"import re; re.compile({PATTERN!r}).search({LINE!r})"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", code], timeout=2)


@pytest.mark.parametrize("probe", ["pattern", "glob"])
@pytest.mark.parametrize(("level", "confine_at_none"), LEVELS)
def test_a_backtracking_pattern_does_not_freeze_the_host(level, confine_at_none, probe,
                                                         tmp_path, monkeypatch):
    monkeypatch.setattr(pysearch, "SEARCH_SECONDS", 2.0)
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)
    config_file = tmp_path / "config.yaml"
    config_file.write_text("approvals:\n  mode: allow\n")
    config = load_config(config_file).with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 30, "policy.confine_at_none": confine_at_none})
    gaps: list[float] = []
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.is_set():
            before = time.monotonic()
            time.sleep(0.02)
            gaps.append(time.monotonic() - before)

    beat = threading.Thread(target=heartbeat, daemon=True)
    with Engine(config) as engine:
        beat.start()
        try:
            r = engine.execute(SCRIPT if probe == "pattern" else GLOB_SCRIPT,
                               cwd=str(work))
        finally:
            stop.set()
            beat.join(5)
    assert r.status == "success", (r.status, r.error, r.output)
    if probe == "pattern":
        # ripgrep (unconfined, when installed) matches in linear time; Python gives up
        assert "took longer" in r.output or '"total_count": 0' in r.output, r.output
    assert max(gaps) < 1.5, f"the host stalled for {max(gaps):.1f}s"
