"""Nothing a script printed is lost: ``execengine run --timeout`` shows what the script
printed before it was killed, at every isolation level (the child's stdout used to be
block-buffered and died with it: only the timeout line came back)."""

from __future__ import annotations

import pytest
from _cli import cli

from execengine.isolation.detect import detect

REPORT = detect()
LEVELS = [pytest.param(lv, id=lv, marks=pytest.mark.skipif(
    not REPORT.levels.get(lv), reason=f"level {lv}: {REPORT.reasons.get(lv)}"))
    for lv in ("none", "restricted", "isolated")]

#: prints without a newline or flush, then outlives its timeout
SLEEPER = "import time\nprint('start')\nprint('no newline', end='')\ntime.sleep(60)\n"


@pytest.mark.parametrize("level", LEVELS)
def test_what_was_printed_before_the_timeout_is_printed(level, tmp_path):
    done = cli(tmp_path, "run", "--isolation", level, "--timeout", "4", "-c", SLEEPER)
    assert done.returncode == 124, done.stderr
    assert done.stdout.startswith("start\nno newline\n"), done.stdout
    assert "Script timed out after 4s and was killed." in done.stdout
    assert "[timeout]" in done.stderr
