"""The licence pyproject declares is the one the repository ships (the wheel carries the
file: hatchling adds ``LICENSE`` to ``*.dist-info/licenses/``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_license_file_is_the_mit_licence_pyproject_declares():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) the execengine authors\n")
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = "MIT"$', pyproject, re.M)
    sdist = pyproject[pyproject.index("[tool.hatch.build.targets.sdist]"):]
    assert '"LICENSE"' in sdist.split("\n\n")[0]
