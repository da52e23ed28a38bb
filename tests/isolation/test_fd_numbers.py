"""A passed descriptor placed at its host number never lands on a descriptor the entry
still holds (issue 40: at 200 concurrent executions one launch in a few thousand failed
with "ignoring bad EXECENGINE_WATCHDOG_FD='512'", another with landlock_add_rule EBADFD).

The cause: the entry and the pre-started interpreter kept their error pipe and their
Landlock ruleset at the first free number from 512 up, and then placed each passed
descriptor at its number in the host with ``dup2``; a host whose watchdog socket had
number 512 or 513 (a busy host: hundreds of descriptors open) got its error pipe or its
ruleset silently replaced. Here the host's numbers are chosen on purpose, at every level
and by every way a launch starts (an entry that execs, an interpreter started ahead)."""

from __future__ import annotations

import os
import resource
import secrets
import sys

import pytest

from execengine.launch.base import LaunchSpec
from execengine.launch.local import LocalLauncher

from ._prestart import teach
from .test_launchers import LEVELS

#: the numbers the entry's own descriptors took (and the next few)
NUMBERS = (512, 513, 514, 515)


def spec(code: str, cwd, target: int) -> LaunchSpec:
    token = secrets.token_hex(8)
    return LaunchSpec(argv=[sys.executable, "-c", code],
                      env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                           "EXECENGINE_RUN_TOKEN": token},
                      cwd=str(cwd), run_token=token, writable_paths=(str(cwd),),
                      pass_fds=(target,), prestart=True)


@pytest.fixture
def at_number():
    """``place(n)``: a pipe whose write end has number ``n`` here (and is closed after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1024:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    made: list[int] = []

    def place(n: int) -> tuple[int, int]:
        try:
            os.fstat(n)
            pytest.fail(f"descriptor {n} is in use here: the test would close it")
        except OSError:
            pass
        r, w = os.pipe()
        os.dup2(w, n, inheritable=True)
        os.close(w)
        made.extend((r, n))
        return r, n

    yield place
    for fd in made:
        os.close(fd)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("way", ["exec", "prestarted"])
@pytest.mark.parametrize("cls", LEVELS)
def test_a_passed_descriptor_at_any_number_arrives_intact(cls, way, tmp_path, at_number):
    if way == "prestarted" and cls.level != "isolated":
        pytest.skip("restricted starts no interpreter ahead (none: below)")
    with cls(fork_server=(way == "prestarted")) as launcher:
        for n in NUMBERS:
            r, target = at_number(n)
            code = f"import os; os.write({target}, b'intact {target}')"
            s = spec(code, tmp_path, target)
            if way == "prestarted":
                teach(launcher, s)
            with launcher.launch(s) as child:
                rc = child.wait(30)
                err = child.stderr.read().decode(errors="replace")
            assert rc == 0, f"passed at {target}: {err}"
            assert os.read(r, 100) == f"intact {target}".encode()


def test_at_none_an_interpreter_started_ahead_gets_it_intact(tmp_path, at_number):
    launcher = LocalLauncher(warm=2)
    try:
        for n in NUMBERS:
            r, target = at_number(n)
            s = spec(f"import os; os.write({target}, b'intact {target}')", tmp_path, target)
            entry = teach(launcher, s)
            with launcher.launch(s) as child:
                rc = child.wait(30)
                err = child.stderr.read().decode(errors="replace")
            assert child.pid == entry  # it ran in the interpreter started ahead
            assert rc == 0, f"passed at {target}: {err}"
            assert os.read(r, 100) == f"intact {target}".encode()
    finally:
        launcher.close()
