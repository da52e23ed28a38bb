"""Suite-wide: no test reads the user's own configuration, or leaves spill files behind,
or the engine's runtime directory where there was none.

``$EXECENGINE_CONFIG`` is unset and the home default (``~/.execengine/config.yaml``) points
into an empty temporary directory, so a developer's config cannot change what a test sees
(the CLI commands load the config; they used to pick up the user's). Tests of the search
order set both themselves. The full outputs of truncated executions go under pytest's own
temporary directory instead of the per-user ``execengine-output-<uid>`` in ``/tmp``.

A root host's engines keep their runtime state in ``/run/execengine`` (uid slot lock files,
grant ledgers, the mount point of isolated roots). Where the run found none, it is taken
away again at the end when nothing holds it: every slot lock free, no ledger left, no
folder but empty ones (``rmdir``, never a recursive removal: nothing mounted there is
touched).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _slow import mark as _mark_slow

from execengine import _configload
from execengine.engine import spill
from execengine.launch.sandboxed import RUN_DIR


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _mark_slow(items)  # what the fast command leaves out: see tests/_slow.py


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[None]:
    monkeypatch.delenv(_configload.ENV_VAR, raising=False)
    home = tmp_path_factory.getbasetemp() / "no-user-home"
    monkeypatch.setattr(_configload, "default_config_path",
                        lambda: Path(home) / ".execengine" / "config.yaml")
    yield


@pytest.fixture(autouse=True)
def _spill_in_pytest_temp(monkeypatch: pytest.MonkeyPatch,
                          tmp_path_factory: pytest.TempPathFactory) -> None:
    where = str(tmp_path_factory.getbasetemp() / "spill")
    monkeypatch.setattr(spill, "spill_dir", lambda: where)


#: noted before any test module is collected (collecting some probes the isolation levels)
_RUN_DIR_EXISTED = os.path.lexists(RUN_DIR)


@pytest.fixture(autouse=True, scope="session")
def _engine_runtime_dir_as_found() -> Iterator[None]:
    yield
    if not _RUN_DIR_EXISTED and os.path.isdir(RUN_DIR) and not os.path.islink(RUN_DIR):
        _remove_if_unused(RUN_DIR)


def _remove_if_unused(run_dir: str) -> None:
    slots = os.path.join(run_dir, "slots")
    names = os.listdir(slots) if os.path.isdir(slots) else []
    held: list[int] = []
    try:
        for name in names:  # all of them ours until unlinked: a launch meanwhile skips them
            path = os.path.join(slots, name)
            if not name.endswith(".lock") or os.path.islink(path) or not os.path.isfile(path):
                return
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            held.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # an engine still lives: leave it all
        for name in names:
            os.unlink(os.path.join(slots, name))
    finally:
        for fd in held:
            os.close(fd)
    folders = sorted((os.path.join(run_dir, n) for n in os.listdir(run_dir)), reverse=True)
    for folder in [*folders, run_dir]:
        with contextlib.suppress(OSError):  # not empty (a ledger, a leftover): kept
            os.rmdir(folder)
