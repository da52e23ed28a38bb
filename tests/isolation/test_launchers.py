"""RestrictedLauncher and IsolatedLauncher with plain child interpreters (no engine)."""

from __future__ import annotations

import os
import secrets
import signal
import sys
import tempfile
import time

import psutil
import pytest

from execengine.errors import SandboxError
from execengine.isolation.detect import detect
from execengine.launch.base import LaunchLimits, LaunchSpec
from execengine.launch.sandboxed import IsolatedLauncher, RestrictedLauncher

REPORT = detect()
LEVELS = [pytest.param(cls, marks=pytest.mark.skipif(
    not REPORT.levels.get(cls.level), reason=REPORT.reasons.get(cls.level, "")), id=cls.level)
    for cls in (RestrictedLauncher, IsolatedLauncher)]


@pytest.fixture(params=LEVELS)
def launcher(request):
    with request.param() as launcher:
        yield launcher


def spec(code: str, cwd, **kw) -> LaunchSpec:
    token = secrets.token_hex(8)
    env = {"PATH": "/usr/bin:/bin", "EXECENGINE_RUN_TOKEN": token, **kw.pop("env", {})}
    return LaunchSpec(argv=[sys.executable, "-I", "-c", code], env=env, cwd=str(cwd),
                      run_token=token, writable_paths=(str(cwd),), **kw)


def test_wait_times_out_while_the_child_runs_then_returns_its_status(launcher, tmp_path):
    code = ("import os, sys, time\nwhile not os.path.exists('go'):\n    time.sleep(0.01)\n"
            "sys.exit(7)")
    with launcher.launch(spec(code, tmp_path)) as child:
        assert child.wait(0.2) is None  # blocked until the file below exists
        assert child.poll() is None
        (tmp_path / "go").touch()
        assert child.wait(20) == 7
        assert child.wait(0) == 7 and child.wait(5) == 7 and child.poll() == 7


def test_output_exit_code_and_exact_environment(launcher, tmp_path):
    code = ("import os, sys; print(os.environ['X']); print('err', file=sys.stderr); "
            "print(sorted(k for k in os.environ if k.startswith('EXECENGINE'))); sys.exit(3)")
    with launcher.launch(spec(code, tmp_path, env={"X": "y"})) as child:
        assert child.wait(20) == 3
        assert child.poll() == 3
        assert child.stdout.read().split(b"\n")[:2] == [b"y", b"['EXECENGINE_RUN_TOKEN']"]
        assert child.stderr.read() == b"err\n"


def test_death_by_signal_is_negative(launcher, tmp_path):
    code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    with launcher.launch(spec(code, tmp_path)) as child:
        assert child.wait(20) == -signal.SIGSEGV


def _free_fd(start: int) -> int:
    fd = start
    while True:
        try:
            os.fstat(fd)
        except OSError:
            return fd
        fd += 1


def test_passed_fd_keeps_its_number(launcher, tmp_path):
    r, w = os.pipe()
    # a number no test infrastructure holds (dup2 onto a used fd would close it)
    target = os.dup2(w, _free_fd(max(r, w) + 7), inheritable=True)
    try:
        code = f"import os; os.write({target}, b'via-fd'); print(os.get_inheritable({target}))"
        with launcher.launch(spec(code, tmp_path, pass_fds=(target,))) as child:
            assert child.wait(20) == 0, child.stderr.read()
            assert os.read(r, 100) == b"via-fd"
    finally:
        for fd in {r, w, target}:
            os.close(fd)


def test_terminate_then_kill_and_close_is_idempotent(launcher, tmp_path):
    code = "import signal, time; print('up', flush=True); time.sleep(30)"
    child = launcher.launch(spec(code, tmp_path))
    assert child.stdout.readline() == b"up\n"
    assert child.poll() is None
    child.terminate()
    assert child.wait(5) == -signal.SIGTERM
    child.kill()
    child.close()
    child.close()


def test_bad_interpreter_is_a_clear_error_and_leaves_nothing(launcher, tmp_path, monkeypatch):
    tmproot = tmp_path / "tmproot"  # private tmp dirs of this test only
    tmproot.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmproot))
    with pytest.raises(SandboxError, match="absolute path"):
        launcher.launch(LaunchSpec(argv=["python3"], env={}, cwd=str(tmp_path), run_token="x"))
    bad = LaunchSpec(argv=[str(tmp_path / "nope")], env={}, cwd=str(tmp_path), run_token="x",
                     writable_paths=(str(tmp_path),))
    with pytest.raises(SandboxError, match="nope"):
        launcher.launch(bad)
    assert list(tmproot.iterdir()) == []
    # and the launcher still works afterwards
    with launcher.launch(spec("print('fine')", tmp_path)) as child:
        assert child.wait(20) == 0


def test_concurrent_children_run_as_distinct_uids(launcher, tmp_path):
    code = "import os, time; print(os.getuid(), flush=True); time.sleep(5)"
    a = launcher.launch(spec(code, tmp_path))
    b = launcher.launch(spec(code, tmp_path))
    with a, b:
        ua, ub = int(a.stdout.readline()), int(b.stdout.readline())
    if os.geteuid() == 0:
        assert ua != ub and 0 not in (ua, ub)


def test_launch_after_close_fails(tmp_path):
    cls = RestrictedLauncher if REPORT.levels.get("restricted") else None
    if cls is None:
        pytest.skip("restricted unavailable")
    launcher = cls()
    launcher.close()
    launcher.close()
    with pytest.raises(SandboxError, match="closed"):
        launcher.launch(spec("pass", tmp_path))


OWNER_PROBE = ("import os; open('existing.txt', 'w').write('new'); open('made.txt', 'w'); "
               "os.mkdir('folder'); print(os.getuid(), os.stat('existing.txt').st_uid)")


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only (slot uids, id-mapped binds)")
@pytest.mark.parametrize("owner", [0, 4242], ids=["root-owned", "user-owned"])
def test_the_sandbox_acts_in_its_working_directory_as_the_folders_owner(launcher, tmp_path,
                                                                         owner):
    """By default, at both levels: the owner's existing file is the slot's to change (it is
    shown as its own), and what it creates lands as the owner's, group included, with the
    host's umask; no ACL entry is added to the folder."""
    from execengine.isolation import acl
    from execengine.isolation.uids import SANDBOX_GID

    work = tmp_path / "work"
    work.mkdir()
    (work / "existing.txt").write_text("old")
    for path in (work, work / "existing.txt"):
        os.chown(path, owner, owner + 1)
    with launcher.launch(spec(OWNER_PROBE, work)) as child:
        assert child.wait(20) == 0, child.stderr.read()
        uid, owner_seen = child.stdout.read().split()
    assert uid == owner_seen and int(uid) not in (0, owner)  # a slot uid, the owner inside
    assert (work / "existing.txt").read_text() == "new"
    umask = os.umask(0o022)
    os.umask(umask)
    for name, mode in (("made.txt", 0o666), ("folder", 0o777)):
        st = (work / name).stat()
        assert (st.st_uid, st.st_gid) == (owner, owner + 1), name
        assert st.st_mode & 0o777 == mode & ~umask, name
    assert acl.group_perm(str(work), SANDBOX_GID) is None  # no grant was needed


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only (slot uids)")
def test_without_workdir_as_owner_the_sandbox_keeps_its_own_uid(launcher, tmp_path):
    """``workdir_as_owner: false`` (the behaviour before it was the default): the folder
    itself is granted (new files land, as the slot's), the owner's existing 0644 file
    stays read-only."""
    (tmp_path / "existing.txt").write_text("old")
    code = ("import os\ntry:\n    open('existing.txt', 'w')\nexcept PermissionError:\n"
            "    print('refused')\nopen('made.txt', 'w').write('x')\n"
            "print(os.getuid() == os.stat('existing.txt').st_uid)")
    own = spec(code, tmp_path, limits=LaunchLimits(workdir_as_owner=False))
    with launcher.launch(own) as child:
        assert child.wait(20) == 0, child.stderr.read()
        assert child.stdout.read().split() == [b"refused", b"False"]
    assert (tmp_path / "existing.txt").read_text() == "old"
    assert (tmp_path / "made.txt").read_text() == "x"
    assert (tmp_path / "made.txt").stat().st_uid != 0


@pytest.mark.skipif(not REPORT.levels.get("restricted") or os.geteuid() != 0,
                    reason="restricted as root only")
def test_restricted_workdir_grant_is_revoked_after_close(tmp_path):
    from execengine.isolation import acl
    from execengine.isolation.uids import SANDBOX_GID

    plain = LaunchLimits(workdir_as_owner=False)  # an id-mapped working directory needs none
    with RestrictedLauncher() as launcher:
        with launcher.launch(spec("open('new.txt', 'w').write('x')", tmp_path,
                                  limits=plain)) as child:
            assert child.wait(20) == 0, child.stderr.read()
            assert acl.group_perm(str(tmp_path), SANDBOX_GID) == 7
        assert acl.group_perm(str(tmp_path), SANDBOX_GID) is None
    assert (tmp_path / "new.txt").read_text() == "x"


@pytest.mark.skipif(not REPORT.levels.get("isolated") or os.geteuid() != 0,
                    reason="isolated as root only")
def test_isolated_workdir_grant_is_revoked_off_the_result_path(tmp_path):
    """isolated revokes on the background thread (no other sandbox can reach the path),
    never later than the launcher's close."""
    from execengine.isolation import acl
    from execengine.isolation.uids import SANDBOX_GID

    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o700)
    (outside / "data.txt").write_text("x")
    s = spec("print(open('data.txt').read())", outside,
             limits=LaunchLimits(workdir_as_owner=False))  # (id-mapped: no grant at all)
    with IsolatedLauncher() as launcher:
        with launcher.launch(s) as child:
            assert child.wait(20) == 0, child.stderr.read()
            assert acl.group_perm(str(outside), SANDBOX_GID) == 7
            assert child.stdout.read() == b"x\n"
        launcher._background.close()  # what the background thread had queued has run
        assert acl.group_perm(str(outside), SANDBOX_GID) is None
    with IsolatedLauncher() as launcher, launcher.launch(s) as child:
        assert child.wait(20) == 0, child.stderr.read()
    # closing the launcher right after the child: revoked before close() returned
    assert acl.group_perm(str(outside), SANDBOX_GID) is None


STRAY = """
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        open('stray-up', 'w').close()
        while True:  # keeps forking sleepers (the pids limit caps them)
            try:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
            except OSError:
                time.sleep(0.001)
    os._exit(0)
while not os.path.exists('stray-up'):
    time.sleep(0.005)
sys.exit(5)
"""


@pytest.mark.skipif(not REPORT.levels.get("isolated"), reason="isolated unavailable")
def test_isolated_status_is_reported_only_once_no_process_of_it_is_left(tmp_path):
    """The exit status arrives before the namespace's teardown, but never before every
    process of the execution (here a detached stray ignoring SIGTERM) is gone."""
    from execengine.proctree import RUN_TOKEN_VAR, carriers

    with IsolatedLauncher() as launcher:
        for _ in range(3):  # warm and cold entries
            (tmp_path / "stray-up").unlink(missing_ok=True)
            s = spec(STRAY, tmp_path)
            with launcher.launch(s) as child:
                assert child.wait(20) == 5, child.stderr.read()
                assert (tmp_path / "stray-up").exists()  # the stray did run
                assert carriers(RUN_TOKEN_VAR, s.run_token) == []
                child.kill()  # confirmed by the report: returns at once, nothing to do
            assert carriers(RUN_TOKEN_VAR, s.run_token) == []


@pytest.mark.skipif(not REPORT.levels.get("isolated"), reason="isolated unavailable")
def test_isolated_tmp_size_follows_each_launch_with_a_prebuilt_root(tmp_path):
    """The fixed part of the root is built ahead with the last size seen; a launch asking
    for another size gets its own, on /tmp and /dev/shm alike, and the system binds and
    /proc of the prebuilt part are in place."""
    from execengine.launch.base import LaunchLimits

    code = ("import os; print([os.statvfs(p).f_blocks * os.statvfs(p).f_frsize >> 20 "
            "for p in ('/tmp', '/dev/shm')], os.path.isdir('/usr/lib'), "
            "os.listdir('/proc/self/fd') != [], os.access('/usr', os.W_OK))")
    with IsolatedLauncher() as launcher:
        for i, mb in enumerate((16, 16, 32, 16)):
            deadline = time.monotonic() + 10
            while i and not len(launcher._pool) and time.monotonic() < deadline:
                time.sleep(0.01)  # a warm entry (prepared with the previous size)
            assert not i or len(launcher._pool)
            s = spec(code, tmp_path, limits=LaunchLimits(tmp_mb=mb))
            with launcher.launch(s) as child:
                assert child.wait(20) == 0, child.stderr.read()
                assert child.stdout.read().decode().split() == [
                    f"[{mb},", f"{mb}]", "True", "True", "False"]


def test_a_working_directory_reached_through_a_symbolic_link(launcher, tmp_path):
    """Granted (and written) where the link points, through a linked ancestor too."""
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    for cwd in (tmp_path / "link", tmp_path / "link" / "sub"):
        code = "open('made', 'w').write('x')"
        with launcher.launch(spec(code, cwd)) as child:
            assert child.wait(20) == 0, child.stderr.read()
        assert (real / os.path.relpath(cwd, tmp_path / "link") / "made").read_text() == "x"


@pytest.mark.skipif(os.geteuid() != 0, reason="uid slots are for a root host")
@pytest.mark.parametrize("cls", LEVELS)
def test_a_slot_another_process_held_since_is_swept_before_reuse(cls, tmp_path):
    """A host killed together with its spawner leaves its processes running as its slot's
    uid. A live launcher that swept the slot on its first use must sweep it again when it
    gets the slot back after another process held it, or its next sandbox shares the uid
    (its process limit, its signals) with the strays."""
    import subprocess

    from execengine.isolation.uids import BASE_UID, SANDBOX_GID, UidPool

    slots = tmp_path / "slots"
    # a pool of one slot of its own (no other engine's), no warm entries: each launch
    # acquires the slot then
    pool = UidPool(slot_dir=str(slots), base_uid=BASE_UID + 4000, size=1)
    work = tmp_path / "work"
    work.mkdir()
    with cls(uid_pool=pool, warm=0) as launcher:
        with launcher.launch(spec("import os; print(os.getuid())", work)) as child:
            assert child.wait(20) == 0, child.stderr.read()
            uid = int(child.stdout.read())
        assert uid == BASE_UID + 4000
        # what a dead host that held the slot since left: its tag in the lock file, a
        # process running as the slot's uid outside any of this launcher's sandboxes
        (slots / "0.lock").write_text("1-1")
        stray = subprocess.Popen(["sleep", str(secrets.randbelow(10**6) + 10**6)],
                                 user=uid, group=SANDBOX_GID, start_new_session=True)
        try:
            with launcher.launch(spec("print('next')", work)) as child:
                assert child.wait(20) == 0, child.stderr.read()
            assert stray.wait(10) == -signal.SIGKILL
        finally:
            if stray.poll() is None:
                stray.kill()
                stray.wait()


_NAMESPACES = ("mnt", "pid", "pid_for_children", "ipc", "uts", "net")


def _namespaces(pid: int | str) -> dict[str, str]:
    return {ns: os.readlink(f"/proc/{pid}/ns/{ns}") for ns in _NAMESPACES}


@pytest.mark.skipif(not REPORT.levels.get("isolated"), reason="isolated unavailable")
@pytest.mark.parametrize("netns", [False, True], ids=["host-net", "own-net"])
def test_isolated_entries_are_forked_into_their_namespaces_and_the_spawner_stays_home(
        tmp_path, netns):
    """The spawner unshares an entry's namespaces, forks the entry (pid 1 there: no
    holder process between them) and returns to its own: after any number of entries, warm
    and cold, it is in the host's namespaces, as its next entry's namespaces' parent."""
    limits = LaunchLimits(network=not netns)
    code = ("import os, time\nprint('up', flush=True)\nwhile not os.path.exists('go'):\n"
            "    time.sleep(0.005)")
    with IsolatedLauncher() as launcher:
        home = _namespaces("self")
        for _ in range(4):  # warm and cold entries
            (tmp_path / "go").unlink(missing_ok=True)
            with launcher.launch(spec(code, tmp_path, limits=limits)) as child:
                assert child.stdout.readline() == b"up\n", child.stderr.read()
                with open(f"/proc/{child.pid}/status") as fh:
                    ns_pid = [line.split()[1:] for line in fh if line.startswith("NSpid:")]
                # the launch's pid is the namespace's init, the spawner's own child
                assert ns_pid == [[str(child.pid), "1"]]
                assert psutil.Process(child.pid).ppid() == launcher.spawner.pid
                inner = _namespaces(child.pid)
                (tmp_path / "go").touch()
                assert child.wait(20) == 0, child.stderr.read()
            assert _namespaces(launcher.spawner.pid) == home
            assert all(inner[ns] != home[ns] for ns in ("mnt", "pid", "ipc", "uts"))
            assert (inner["net"] != home["net"]) is netns
