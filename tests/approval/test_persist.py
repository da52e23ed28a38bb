from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from execengine.approval.persist import add_entry, persist_allowlist
from execengine.config import parse_config as parse
from execengine.errors import ConfigError

CASES = [
    "",
    "# only a comment\n",
    "terminal:\n  timeout: 5  # keep\n",
    "approvals:\n  mode: ask  # c\n# trailing comment\nweb:\n  timeout: 3\n",
    'approvals:\n  command_allowlist:\n    - "git force push"  # first\n  mode: ask\n',
    "approvals:\n  command_allowlist: ['git force push']  # flow\n",
    "approvals:\n  command_allowlist: []\n",
    "approvals:\n  command_allowlist:\n  mode: deny\n",
    "approvals:\n",
    "approvals:\n    command_allowlist:\n    - a\n    - b\n    mode: ask\n",
    "web:\n  timeout: 3",  # no final newline
]


@pytest.mark.parametrize("text", CASES)
def test_add_entry_keeps_the_rest(text: str) -> None:
    new = add_entry(text, "recursive delete")
    try:
        before = parse(text) if text.strip() else None
    except ConfigError:  # an empty key the loader refuses is filled in
        before = None
    after = parse(new)
    assert after.approvals.command_allowlist[-1] == "recursive delete"
    if before is not None:
        assert after.approvals.command_allowlist[:-1] == before.approvals.command_allowlist
        assert after.approvals.mode == before.approvals.mode
        assert after.web.timeout == before.web.timeout
    for line in text.splitlines():
        if "command_allowlist" not in line and line.strip() != "approvals:":
            assert line in new.splitlines(), (line, new)


def test_persist_is_atomic_idempotent_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# hi\napprovals:\n  mode: ask\n")
    os.chmod(path, 0o640)
    assert persist_allowlist(path, "git force push") is True
    assert persist_allowlist(path, "git force push") is False
    assert parse(path.read_text()).approvals.command_allowlist == ("git force push",)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_text().startswith("# hi\n")
    assert os.listdir(tmp_path) == ["config.yaml"]


def test_persist_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.yaml"
    assert persist_allowlist(path, "SQL DROP")
    assert parse(path.read_text()).approvals.command_allowlist == ("SQL DROP",)


def test_bad_files_are_left_alone(tmp_path: Path) -> None:
    for bad in ("approvals: [1, 2]\n", "approvals:\n  command_allowlist: 5\n", "- a\n- b\n",
                "approvals: {mode: ask}\n"):
        path = tmp_path / "config.yaml"
        path.write_text(bad)
        with pytest.raises(ConfigError):
            persist_allowlist(path, "x")
        assert path.read_text() == bad
