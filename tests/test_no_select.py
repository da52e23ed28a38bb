"""No ``select.select`` on the host: descriptor numbers above 1023 are normal with many
concurrent executions (``ValueError: filedescriptor out of range in select()``)."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "execengine"


def test_no_select_select_in_the_host_package():
    offenders = [f"{path.relative_to(PACKAGE)}:{n}"
                 for path in PACKAGE.rglob("*.py")
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\bselect\.select\(|\bfrom select import select\b", line)]
    assert offenders == []
