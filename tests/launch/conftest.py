from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

from execengine.launch.base import LaunchSpec

CHILDREN = Path(__file__).resolve().parent.parent / "children"


@pytest.fixture
def spec_for(tmp_path):
    def make(script: str, env: dict | None = None, **kw) -> LaunchSpec:
        token = secrets.token_hex(8)
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "EXECENGINE_RUN_TOKEN": token, **(env or {})}
        return LaunchSpec(argv=[sys.executable, str(CHILDREN / script)], env=base,
                          cwd=str(tmp_path), run_token=token, **kw)
    return make
