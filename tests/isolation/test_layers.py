"""Each layer on its own, in real child processes (a fresh interpreter per probe, since the
layers are irreversible for the process that applies them)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from execengine.isolation import acl, cgroups, landlock
from execengine.isolation.detect import detect
from execengine.isolation.rlimits import Rlimits
from execengine.isolation.uids import UidPool
from execengine.launch.base import LaunchLimits

linux = pytest.mark.skipif(sys.platform != "linux", reason="Linux only")


def run_py(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=30)


@linux
@pytest.mark.skipif(not detect().has("landlock"), reason="no Landlock")
def test_landlock_confines_reads_writes_and_tcp(tmp_path):
    allowed, other = tmp_path / "rw", tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    (other / "f").write_text("secret")
    r = run_py(f"""
        import ctypes, socket, sys
        from execengine.isolation import landlock
        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)
        landlock.restrict_self(landlock.LandlockPolicy(
            read_paths=tuple(sys.path[1:]) + ("/usr", "/lib", "/lib64", "/etc"),
            write_paths=({str(allowed)!r},)))
        open({str(allowed / 'ok')!r}, "w").write("x")
        for what, fn in (("read", lambda: open({str(other / 'f')!r}).read()),
                         ("write", lambda: open({str(other / 'g')!r}, "w")),
                         ("tcp", lambda: socket.create_connection(("127.0.0.1", 9), 1))):
            try:
                fn(); print(what, "allowed")
            except OSError as e:
                print(what, e.errno)
    """)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split() for line in r.stdout.splitlines())
    assert lines["read"] == "13" and lines["write"] == "13"
    if landlock.abi_version() >= 4:
        assert lines["tcp"] == "13"
    assert (allowed / "ok").read_text() == "x"
    assert not (other / "g").exists()


@linux
@pytest.mark.skipif(not detect().has("landlock"), reason="no Landlock")
def test_landlock_ruleset_built_ahead_is_used_only_when_the_policy_lists_its_paths(tmp_path):
    """A warm entry adds the fixed rules ahead; at launch the policy's own paths join them.
    A ruleset holding a path the policy does not list (stale: made for another execution)
    is discarded, never enforced: the path stays denied."""
    fixed, own, stale = tmp_path / "fixed", tmp_path / "own", tmp_path / "stale"
    for d in (fixed, own, stale):
        d.mkdir()
        (d / "f").write_text(d.name)
    r = run_py(f"""
        import ctypes, sys
        from execengine.isolation import landlock
        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)
        system = tuple(sys.path[1:]) + ("/usr", "/lib", "/lib64", "/etc")
        ahead = landlock.Ruleset()
        ahead.add_paths(system + ({str(fixed)!r},), write=False)
        if sys.argv[-1] == "stale":
            ahead.add_paths([{str(stale)!r}], write=False)
        policy = landlock.LandlockPolicy(read_paths=system + ({str(fixed)!r},),
                                         write_paths=({str(own)!r},))
        landlock.restrict_self(policy, ruleset=ahead)
        assert ahead.fd is None  # used or discarded: closed either way
        for name in ("fixed", "own", "stale"):
            try:
                print(name, open({str(tmp_path)!r} + "/" + name + "/f").read())
            except OSError as e:
                print(name, e.errno)
    """)
    assert r.returncode == 0, r.stderr
    assert dict(line.split() for line in r.stdout.splitlines()) == {
        "fixed": "fixed", "own": "own", "stale": "13"}
    code = r.args[-1]
    r = subprocess.run([sys.executable, "-c", code, "stale"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert dict(line.split() for line in r.stdout.splitlines()) == {
        "fixed": "fixed", "own": "own", "stale": "13"}


@linux
@pytest.mark.skipif(not detect().has("seccomp"), reason="no seccomp")
def test_seccomp_allows_unix_sockets_only_and_denies_namespaces():
    r = run_py("""
        import ctypes, errno, os, socket, subprocess
        from execengine.isolation import seccomp
        seccomp.apply()
        socket.socket(socket.AF_UNIX).close()
        for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):
            try:
                socket.socket(fam); print("LEAK", fam)
            except OSError as e:
                assert e.errno == errno.EAFNOSUPPORT, e
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.unshare(0x10000000) == -1 and ctypes.get_errno() == errno.EPERM
        assert libc.ptrace(0x4206, os.getppid(), None, None) == -1
        print(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["sub"]


def test_tasks_of_uid_counts_threads_of_that_uid(tmp_path):
    # a /proc of our own: the host's changes under our feet (other processes of the same
    # uid come and go), so counting it cannot be asserted exactly
    from execengine.isolation.rlimits import tasks_of_uid

    def task(pid: str, uid: int, threads: int) -> None:
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "status").write_text(
            f"Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nThreads:\t{threads}\n")

    task("10", 1234, 5)
    task("11", 1234, 1)
    task("12", 4321, 7)
    (tmp_path / "self").mkdir()  # not a pid
    (tmp_path / "13").mkdir()  # gone meanwhile: no status
    assert tasks_of_uid(1234, proc=str(tmp_path)) == 6
    assert tasks_of_uid(4321, proc=str(tmp_path)) == 7
    assert tasks_of_uid(2_000_000_123, proc=str(tmp_path)) == 0


@linux
def test_tasks_of_uid_reads_the_real_proc():
    # this process is a task of our uid with at least one thread; a uid nobody has has none
    from execengine.isolation.rlimits import tasks_of_uid

    assert tasks_of_uid(os.getuid()) >= 1
    assert tasks_of_uid(2_000_000_123) == 0


@linux
def test_rlimits_pairs_and_apply():
    lim = Rlimits.from_limits(LaunchLimits(memory_mb=64, cpu_seconds=3, max_file_mb=2,
                                           max_processes=10), nproc=10)
    import resource

    pairs = {res: (soft, hard) for res, soft, hard in lim.pairs()}
    assert pairs[resource.RLIMIT_DATA] == (64 << 20, 64 << 20)
    assert pairs[resource.RLIMIT_CPU] == (3, 4)
    assert pairs[resource.RLIMIT_NPROC] == (10, 10)
    assert pairs[resource.RLIMIT_CORE] == (0, 0)
    assert resource.RLIMIT_NPROC not in {r for r, _, _ in Rlimits.from_limits(
        LaunchLimits(), nproc=None).pairs()}
    r = run_py("""
        from execengine.isolation.rlimits import Rlimits
        from execengine.launch.base import LaunchLimits
        Rlimits.from_limits(LaunchLimits(memory_mb=64), nproc=None).apply()
        try:
            b = bytearray(200 << 20); print("LEAK")
        except MemoryError:
            print("MemoryError")
    """)
    assert r.stdout.strip() == "MemoryError", r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the engine grants ACLs only when the host is "
                    "root (for its sandbox uids)")
def test_acl_grant_and_revoke_round_trip(tmp_path):
    d = tmp_path / "d"
    d.mkdir(mode=0o700)
    gid = 1_870_999_999
    try:
        assert acl.grant(str(d), gid, write=True)
    except OSError as exc:  # a file system without POSIX ACLs
        pytest.skip(f"no ACL support: {exc}")
    assert acl.group_perm(str(d), gid) == 7
    assert acl.read(str(d), acl.DEFAULT)  # new files inherit the grant
    assert not acl.grant(str(d), gid, write=True)  # idempotent
    os.chmod(d, 0o700)  # chmod rewrites the mask and voids the grant: noticed
    assert acl.group_perm(str(d), gid) == 0
    assert acl.grant(str(d), gid, write=True)
    acl.revoke(str(d), gid)
    acl.revoke(str(d), gid)
    assert acl.group_perm(str(d), gid) is None
    assert acl.read(str(d), acl.DEFAULT) == []
    assert os.stat(d).st_mode & 0o777 == 0o700


def test_acl_traverse_grants_only_search(tmp_path):
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    outer.chmod(0o700)
    os.chmod(tmp_path, 0o755)
    try:
        changed = acl.grant_traverse(str(inner), 1_870_999_998)
    except OSError as exc:
        pytest.skip(f"no ACL support: {exc}")
    assert str(outer) in changed
    assert acl.group_perm(str(outer), 1_870_999_998) == acl.X


@pytest.mark.skipif(os.geteuid() != 0, reason="uid slots are for a root host")
def test_uid_slots_are_distinct_and_exclusive_across_pools(tmp_path):
    a = UidPool(slot_dir=str(tmp_path), size=3)
    b = UidPool(slot_dir=str(tmp_path), size=3)  # a second engine on the same host
    s1, s2 = a.acquire(), b.acquire()
    assert s1.uid != s2.uid and s1.gid == s2.gid
    s3 = a.acquire()
    with pytest.raises(OSError):
        b.acquire()
    s1.release()
    s1.release()
    assert b.acquire().uid == s1.uid
    for s in (s2, s3):
        s.release()


@pytest.mark.skipif(os.geteuid() != 0, reason="uid slots are for a root host")
def test_a_slot_says_whether_another_process_held_it_since(tmp_path):
    pool = UidPool(slot_dir=str(tmp_path), size=2)
    first = pool.acquire()
    assert first.take_over("1-1")  # nobody known held it: whatever ran as its uid may run
    first.release()
    again = pool.acquire()
    assert again.slot == first.slot and not again.take_over("1-1")  # only this owner since
    again.release()
    another = pool.acquire()  # another process takes the slot and lets it go
    assert another.take_over("2-2")
    another.release()
    after = pool.acquire()
    assert after.slot == first.slot and after.take_over("1-1")
    after.release()
    assert not pool.acquire().take_over("1-1")


@linux
@pytest.mark.skipif(not detect().has("cgroups"), reason="no usable cgroups")
def test_cgroup_limits_and_kill_all():
    layout = cgroups.discover()
    with cgroups.ExecCgroup.create(layout, f"test-{os.getpid()}", memory_mb=64,
                                   max_processes=8) as group:
        procs = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
        for p in procs:
            group.enter(p.pid)
        assert set(group.pids()) == {p.pid for p in procs}
        assert group.kill()
        assert [p.wait(5) for p in procs] == [-9, -9, -9]
        assert group.pids() == [] and group.kill()  # empty: confirmed at once
    assert all(not os.path.exists(d) for d in group.dirs)


@linux
@pytest.mark.skipif(not detect().has("cgroups"), reason="no usable cgroups")
def test_cgroup_close_waits_for_members_exiting_on_their_own_then_kills_the_rest():
    """``close(grace)``: a member that ends within the grace ends on its own (no kill);
    one that does not is killed when the grace is over. On cgroup v2 the wait is woken
    by the kernel (``cgroup.events``), not by reading ``cgroup.procs`` in a loop."""
    layout = cgroups.discover()
    group = cgroups.ExecCgroup.create(layout, f"test-grace-{os.getpid()}", memory_mb=64,
                                      max_processes=8)
    quick = subprocess.Popen(["sleep", "0.3"])
    try:
        group.enter(quick.pid)
        reads = []
        real_pids = group.pids
        group.pids = lambda: reads.append(1) or real_pids()  # type: ignore[method-assign]
        started = time.monotonic()
        group.close(grace=20)
        assert time.monotonic() - started < 20
        assert quick.wait(5) == 0  # it ended on its own
        if layout.v2_parent is not None:
            assert len(reads) <= 2, reads  # the kill()'s check, not a polling loop
    finally:
        quick.kill()
        quick.wait()
    assert all(not os.path.exists(d) for d in group.dirs)

    group = cgroups.ExecCgroup.create(layout, f"test-grace2-{os.getpid()}", memory_mb=64,
                                      max_processes=8)
    slow = subprocess.Popen(["sleep", "30"])
    try:
        group.enter(slow.pid)
        started = time.monotonic()
        group.close(grace=0.3)
        assert time.monotonic() - started >= 0.3
        assert slow.wait(5) == -9
    finally:
        slow.kill()
        slow.wait()
    assert all(not os.path.exists(d) for d in group.dirs)


@pytest.mark.parametrize("read, write", [(("/",), ()), ((), ("/",)), (("/usr/..",), ())])
def test_a_bind_of_the_root_itself_is_refused(read, write):
    """A path that contains the system directories (``/`` above all) would hide them
    behind the host's own: refused before any mount is made."""
    from execengine.isolation import mounts

    plan = mounts.MountPlan(new_root="/nonexistent", read_paths=read, write_paths=write,
                            socket_dir=None, tmp_mb=16, cwd="/tmp")
    with pytest.raises(OSError, match="contains system directories"):
        mounts.clone_binds(plan)


@linux
@pytest.mark.skipif(not detect().levels.get("isolated"), reason="no level isolated here")
def test_a_bind_of_an_ordinary_folder_is_made(tmp_path):
    """The control for the refusal above: the same call with a folder of the host."""
    from execengine.isolation import mounts

    plan = mounts.MountPlan(new_root="/nonexistent", read_paths=(str(tmp_path),),
                            write_paths=(), socket_dir=None, tmp_mb=16, cwd="/tmp")
    binds, fds = mounts.clone_binds(plan)
    try:
        assert [b["path"] for b in binds] == [str(tmp_path)]
    finally:
        for fd in fds:
            os.close(fd)


def test_masks_hide_only_denied_paths_the_root_shows_and_never_what_it_needs(tmp_path):
    """Which denied paths get a mask: shown (at or below a system directory or a bind),
    existing, and with no bind at or below them; a folder by a tmpfs, a file by a file."""
    from execengine.isolation import mounts

    work = tmp_path / "work"
    (work / "vault").mkdir(parents=True)
    (work / "key").write_text("k")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "link"
    link.symlink_to(work / "vault")
    hide = [str(work / "vault"), str(work / "key"), str(work / "missing"), str(elsewhere),
            str(tmp_path), "/", str(link)]
    got = mounts.masks(hide, shown={"/usr", str(work)}, needed={str(work)})
    # tmp_path holds the working directory (needed); elsewhere and / are not shown or
    # would hide everything; the link's target is masked once
    assert got == [{"path": str(work / "key"), "kind": "maskfile"},
                   {"path": str(work / "vault"), "kind": "maskdir"}]
    assert mounts.masks(["/usr"], shown={"/usr"}, needed={"/usr/lib/python3"}) == []
    assert mounts.masks(["/usr/share"], shown={"/usr"}, needed=set()) == [
        {"path": "/usr/share", "kind": "maskdir"}]
