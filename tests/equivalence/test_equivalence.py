"""One table of behavioural cases through every entry point (see ``cases.py``).

The same case gives the same status, output text and notices through ``Engine.execute``,
a session cell, the ``execute_code`` tool, ``execengine mcp``, ``execengine batch`` and the
SSH host, at the default isolation level; the differences on purpose are listed in
``cases.DOCUMENTED``. Each column runs all its cases once (module scope) and every
(case, column) pair is then one test.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from execengine.engine.spill import SPILL_PREFIX, SPILL_SUFFIX
from tests.remote.sshd import available as sshd_available
from tests.remote.sshd import loopback_remote

from . import columns
from .cases import (
    CASES,
    COLUMNS,
    DOCUMENTED,
    MODEL_COLUMNS,
    ONE_SHOT_COLUMNS,
    SLEEP_SECONDS,
    TIMEOUT,
    Case,
    Observed,
    normalise,
)

pytestmark = pytest.mark.timeout(600)


def _sleepers() -> list[psutil.Process]:
    """This run's background child (the "left running" case), wherever it ended up."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if (p.info["cmdline"] == ["sleep", SLEEP_SECONDS]
                    and p.info["status"] != psutil.STATUS_ZOMBIE):
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module", autouse=True)
def _spill_as_found() -> Iterator[None]:
    """The child CLIs' spill files (the "output over the cap" case) land in the real
    per-user spill folder, not in pytest's (monkeypatched here only): removed after, as
    the folder itself when this module made it."""
    folder = os.path.join(tempfile.gettempdir(), f"execengine-output-{os.getuid()}")
    existed = os.path.isdir(folder)
    before = set(os.listdir(folder)) if existed else set()
    yield
    if not os.path.isdir(folder):
        return
    for name in set(os.listdir(folder)) - before:
        if name.startswith(SPILL_PREFIX) and name.endswith(SPILL_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
    if not existed:
        with contextlib.suppress(OSError):  # not empty: another engine's meanwhile
            os.rmdir(folder)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> columns.World:
    return columns.make_world(tmp_path_factory.mktemp("equivalence"))


@pytest.fixture(scope="module")
def remote() -> Iterator[object]:
    if not sshd_available():
        if os.environ.get("CI"):
            pytest.fail("the ssh column needs root and sshd (.ci/run installs openssh-server)")
        pytest.skip("the ssh column needs root and an sshd binary")
    with loopback_remote() as r:
        yield r


_observed: dict[str, dict[str, Observed]] = {}


def _cases_of(column: str) -> list[Case]:
    return [c for c in CASES if c.where == "all" or column in MODEL_COLUMNS]


@pytest.fixture(scope="module")
def observe(world: columns.World, request: pytest.FixtureRequest
            ) -> Callable[[str], dict[str, Observed]]:
    def run(column: str) -> dict[str, Observed]:
        if column not in _observed:
            runner = (columns.ssh_runner(request.getfixturevalue("remote")) if column == "ssh"
                      else getattr(columns, f"run_{column}"))
            _observed[column] = runner(_cases_of(column), world)
            # nothing the cases started is left (the background child included)
            deadline = time.monotonic() + 10
            while _sleepers() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _sleepers(), f"{column}: the background child outlived its execution"
        return _observed[column]

    yield run
    _observed.clear()


@pytest.mark.parametrize("column", list(COLUMNS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_through_entry_point(case: Case, column: str, observe) -> None:
    if case.where == "model" and column not in MODEL_COLUMNS:
        pytest.skip(f"not an entry point a model's call arrives at ({COLUMNS[column]})")
    observed = observe(column)[case.name]
    reason = DOCUMENTED.get((case.name, column))
    if reason is not None:
        # documented: it differs, and the suite checks that it still does (a difference
        # that went away must leave the list)
        assert (observed.status, normalise(observed.output)) != (case.status, case.output), \
            f"{case.name} through {column} no longer differs: remove it from DOCUMENTED"
        return
    assert observed.status == case.status, (column, observed)
    if case.output is not None:
        assert normalise(observed.output) == case.output, (column, observed)
    if case.check is not None:
        case.check(observed, column)
    if case.name == "timeout after printing":
        second = ("killed." if column in ONE_SHOT_COLUMNS
                  else "interrupted (KeyboardInterrupt). The session's state was kept.")
        assert observed.output == f"start\n\n⏰ Script timed out after {TIMEOUT}s and was " \
                                  + second, observed
    assert not observed.notice, observed  # nothing was reset, replaced or lost


def test_the_documented_differences_name_real_cases_and_columns() -> None:
    names = {c.name for c in CASES}
    for case, column in DOCUMENTED:
        assert case in names and column in COLUMNS, (case, column)


def test_every_entry_point_has_a_runner() -> None:
    for column in COLUMNS:
        assert column == "ssh" or callable(getattr(columns, f"run_{column}", None)), column
    assert Path(columns.__file__).exists()
