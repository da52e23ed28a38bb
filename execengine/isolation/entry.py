"""Entering the sandbox: the code that runs in the spawner's forked children, before exec.

This module only runs inside the single-threaded spawner process (:mod:`._spawnserver`),
never in the threaded host, so forking and running Python between fork and exec is safe.

Entry happens in two phases, so that the slow part can be done *before* an execution is
asked for (a warm entry; see :mod:`._spawnserver`):

1. :func:`prepare` — everything that does not depend on the script: a new session, the
   execution's cgroup (a cgroup migration waits for an RCU grace period, 1-20 ms here),
   the namespaces and the forks, the fixed Landlock rules, and at ``isolated`` the fixed
   part of the root, entered with ``pivot_root``. The process that will become the
   workload then blocks on its control socket.
2. the plan arrives (argv, environment, paths, limits, and stdout/stderr/error/status/
   passed fds and the execution's binds as detached mounts, as ``SCM_RIGHTS``) —
   :func:`_await_plan` mounts the binds (``isolated``), places the fds, applies rlimits,
   the uid drop, no-new-privs, the rest of Landlock and seccomp, and execs. Only this
   phase is on the launch's critical path.

``restricted``::

    spawner ─fork─> workload: setsid, cgroup │ plan │ rlimits, uid drop, no-new-privs,
                                                    Landlock, seccomp, exec

``isolated``::

    spawner ─fork into new mnt|pid|net|ipc|uts─> init (pid 1): setsid, cgroup, root,
                                                  pivot_root; reaper
                                        └─fork─> workload: │ plan │ binds, then as above,
                                                                       exec
    The spawner unshares the namespaces, forks, and returns to its own
    (:func:`fork_isolated`). init builds and enters the root for the whole namespace,
    forwards SIGTERM to it and reaps everything. The workload hands init the host's status
    descriptor (which came with the plan) before exec. When the workload ends, init
    SIGKILLs whatever is left in the namespace, reaps until nothing is, then writes the
    wait status there as ``"<status> empty"`` (straight to the host, before the
    namespaces' slow teardown), and exits. It dies with the spawner (PR_SET_PDEATHSIG);
    killing it (pid 1) kills the whole namespace. With a template (:func:`exec_template`)
    there is no workload: init hands its namespaces to the template, which forks
    the interpreter into them.

Errors before the plan arrives are sent on the control socket; errors after it are written
to the plan's error fd (close-on-exec), which the spawner reads until EOF to tell a
started child from a failed one.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import json
import marshal
import os
import resource
import select
import signal
import socket
import time
import traceback
from typing import Any

from execengine._runtime import ZYGOTE_LOADER, zygote_program
from execengine.isolation import bridge as proxy_bridge
from execengine.isolation import landlock, mounts
from execengine.isolation import seccomp as seccomp_layer

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000

#: machine-wide /proc files a script may read without a pid namespace: what os, psutil
#: and multiprocessing read about the machine (not /proc/loadavg: it names the last pid)
PROC_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/uptime")

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


def own_network() -> None:
    """Enter a network namespace of our own (only a loopback, brought up), so that nothing
    but what is bridged in is reachable. As root a plain one; otherwise inside a user
    namespace of our own that maps our uid and gid to themselves (our capabilities there
    end at ``execve``: the uid is not 0 in it). Raises a clear :class:`OSError` when the
    host allows neither."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        if uid == 0:
            unshare(CLONE_NEWNET)
        else:
            unshare(CLONE_NEWUSER | CLONE_NEWNET)
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                               ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        proxy_bridge.loopback_up()
    except OSError as exc:
        raise OSError(exc.errno, "policy.network allowlist needs a network namespace of the "
                      "sandbox's own (the host is root, or allows unprivileged user "
                      f"namespaces): {exc.strerror or exc}") from exc


def die_with_parent(parent: int | None) -> None:
    """Die with the parent. ``parent=None``: the parent is outside our pid namespace (its
    pid reads as 0), so the classic re-check after prctl is impossible; that race leaves at
    worst an orphan that the cgroup or the spawner's shutdown kills."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(137)


def _place_fds(stdio: tuple[int, int], passed: list[int], targets: list[int]) -> None:
    """stdin=/dev/null, stdout/stderr, and each passed fd at its number in the host."""
    high = max([10, *targets]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, high) for fd in [*stdio, *passed]]
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(moved[0], 1)
    os.dup2(moved[1], 2)
    for fd, target in zip(moved[2:], targets, strict=False):
        os.dup2(fd, target)  # inheritable
    keep = {0, 1, 2, *targets}
    for fd in _open_fds():
        if fd not in keep and not _is_cloexec(fd):
            os.close(fd)
    for fd in moved:
        if fd not in keep:
            os.close(fd)
    if null not in keep:
        os.close(null)


def _open_fds() -> list[int]:
    try:
        return [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def _is_cloexec(fd: int) -> bool:
    try:
        return not os.get_inheritable(fd)
    except OSError:
        return True


def _default_signals() -> None:
    for sig in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)


def _exact_paths(plan: dict[str, Any]) -> dict[str, int]:
    """At ``restricted`` with binds over the host's view: the writable paths and the
    working directory, each opened (``O_PATH``, close-on-exec) through no symbolic link,
    for ``chdir`` and Landlock to use instead of the names. A script of another execution
    sharing a folder above one may rename it (it is a mount point in our view only) and
    leave a link in its place: by name, this sandbox would start in the link's target and
    be given Landlock rights there (a red team read and wrote a denied folder so)."""
    m = plan.get("mounts")
    if not plan.get("mntns") or m is None or m.get("new_root"):
        return {}
    out: dict[str, int] = {}
    for path in dict.fromkeys([*m.get("write", ()), plan["cwd"]]):
        fd = mounts.open_nofollow(path)
        if fd is None:
            raise OSError(f"{path} is gone, or a symbolic link now (it changed since it "
                          "was checked)")
        out[path] = fd
    return out


def exec_workload(plan: dict[str, Any], stdio: tuple[int, int], passed: list[int],
                  ruleset: landlock.Ruleset | None = None) -> None:
    """Drop privileges, apply every in-process layer, exec. Never returns. ``ruleset``:
    Landlock rules added ahead (see :func:`_prepare_landlock`)."""
    _default_signals()
    bridge = plan.get("proxy_bridge")
    if bridge:
        # the sandbox's own network namespace: loopback up, the host's proxy bridged in
        proxy_bridge.loopback_up()
        proxy_bridge.start(int(bridge["port"]), str(bridge["socket"]), plan.get("uid"),
                           plan.get("gid"), orphan=plan["level"] == "isolated")
    _place_fds(stdio, passed, plan["fd_targets"])
    exact = _exact_paths(plan)
    if plan["cwd"] in exact:
        os.fchdir(exact[plan["cwd"]])
    else:
        os.chdir(plan["cwd"])
    os.umask(int(plan.get("umask", 0o022)))  # the host's: what its file tools create with
    _drop(plan["rlimits"], plan.get("uid"), plan.get("gid"))
    ll = plan.get("landlock")
    if ll is not None:
        read = [f"/proc/self/fd/{exact[p]}" if p in exact else p for p in ll["read"]]
        if ll.get("proc_self"):
            # our own /proc/<pid> (what /proc/self and /proc/thread-self resolve to; the
            # pid survives exec): a rule on that directory opens no other process's.
            # Descendants get no such rule: their /proc/self stays denied.
            read += [f"/proc/{os.getpid()}", *PROC_FILES]
        write = [f"/proc/self/fd/{exact[p]}" if p in exact else p for p in ll["write"]]
        landlock.restrict_self(landlock.LandlockPolicy(
            read_paths=tuple(read), write_paths=tuple(write),
            deny_tcp=ll["deny_tcp"], scope=ll["scope"],
            connect_ports=tuple(ll.get("connect_ports", ()))), ruleset=ruleset)
    elif ruleset is not None:
        ruleset.close()
    _seccomp(plan.get("seccomp"))
    os.execve(plan["argv"][0], plan["argv"], plan["env"])


def _drop(rlimits: list[list[int]], uid: int | None, gid: int | None) -> None:
    """rlimits, the uid drop, the death signal, subreaper, no-new-privileges."""
    for res, soft, hard in rlimits:
        resource.setrlimit(res, (soft, hard))
    parent = os.getppid()
    if uid is not None and gid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    die_with_parent(parent)  # after the uid change, which clears the death signal
    # strays that setsid or double-fork reparent to the workload (kept across execve), so
    # the child's bootstrap need not import ctypes to ask for it
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def seccomp_program(sc: dict[str, Any] | None) -> bytes | None:
    """The compiled filter a plan's ``seccomp`` asks for (None: none); compiled once in the
    spawner, which calls it with every variant at start-up (its arguments are the cache
    key of :func:`.seccomp.compiled`)."""
    if sc is None:
        return None
    return seccomp_layer.compiled(bool(sc["allow_network"]), bool(sc.get("stream_only")))


def _seccomp(sc: dict[str, Any] | None) -> None:
    program = seccomp_program(sc)  # inherited through fork: only the load is left
    if program is not None:
        seccomp_layer.load_bpf(program)


#: control message: JSON up to this size, plus up to this many fds
MAX_PLAN = 1 << 20
MAX_FDS = 250  # SCM_MAX_FD is 253


def prepare(warm: dict[str, Any], ctl: int, spawner: int, close: tuple[int, ...] = ()
            ) -> None:
    """Body of the spawner's forked child (``close``: the spawner's own fds): phase 1, then
    wait on ``ctl`` for the plan (phase 2). Never returns."""
    # No garbage collection in here: this process lives until exec (or as the namespaces'
    # init, which allocates next to nothing), and a collection would walk the
    # whole heap inherited from the spawner, copying every page it touches (measured:
    # 5-20 ms on the launch's critical path, the first time the plan's objects were made)
    gc.disable()
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        # everything else the spawner holds too: other children's stdout/status pipes
        # (a warm entry lives long; a copy would keep the host from seeing their EOF)
        low = 3
        for keep in sorted({ctl, *([warm["fork_fd"]] if warm.get("fork_fd") else [])}):
            os.closerange(low, keep)
            low = keep + 1
        os.closerange(low, 1 << 20)
        os.setsid()
        # isolated: forked straight into the namespaces (fork_isolated), our parent's pid
        # reads as 0
        die_with_parent(spawner if warm["level"] != "isolated" else None)
        if _recycles(warm):
            # the namespaces' init outlives the execution (see _serve_again): it stays out
            # of the execution's cgroup (the interpreter joins it itself), and joins only
            # should it fork a workload (see _namespace_init)
            warm["cgroup_fds"] = [os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                                  for d in warm.get("cgroup_dirs", ())]
        else:
            for d in warm.get("cgroup_dirs", ()):
                with open(os.path.join(d, "cgroup.procs"), "w") as fh:
                    fh.write("0")  # ourselves (our pid reads 1 at isolated)
        if warm["level"] != "isolated":
            if os.geteuid() == 0:
                # SysV IPC and POSIX message queues of its own: what it makes is not seen
                # by other executions and goes with its last process. Without
                # CAP_SYS_ADMIN (a container) the launcher removes what the slot uid owns
                # when the execution ends instead (see .ipc)
                with contextlib.suppress(OSError):
                    unshare(CLONE_NEWIPC)
            if warm.get("mntns"):  # the plan's binds go over the host's view in it
                mounts.own_view()
            if warm.get("netns"):  # the allow-list proxy is bridged in (see .bridge)
                own_network()
            _await_plan(ctl, ruleset=_prepare_landlock(warm),
                        own_view=bool(warm.get("mntns")))
        _namespace_init(warm, ctl)
    except BaseException as exc:  # report anything, then die: we are a forked child
        _report_ctl(ctl, exc)
        os._exit(127)


def _await_plan(ctl: int, prepared: tuple[str, int] | None = None,
                handover: socket.socket | None = None,
                ruleset: landlock.Ruleset | None = None, own_view: bool = False) -> None:
    """Phase 2: receive the plan and its fds on ``ctl``, enter, exec. Never returns.
    ``prepared``: (new root, /tmp size) of the fixed part of the root, built and entered
    already (see :func:`.mounts.prepare_root`); the execution's binds come with the plan.
    ``handover``: where the host's status descriptor goes (the namespace's init, which
    reports the status; see :func:`_namespace_init`). ``ruleset``: the Landlock rules
    added ahead. ``own_view``: (``restricted``) we are in a mount namespace of our own
    (:func:`.mounts.own_view`), where the plan's binds go over the host's view."""
    sock = socket.socket(fileno=ctl)
    msg, fds, _, _ = socket.recv_fds(sock, MAX_PLAN, MAX_FDS)
    if not msg:
        os._exit(0)  # discarded before use
    with contextlib.suppress(OSError):  # tells a started entry from one that died waiting
        sock.send(b'{"received": true}')
    sock.close()
    req = json.loads(msg)
    plan: dict[str, Any] = req["plan"]
    # what we keep until exec (the error pipe, the ruleset) goes above every number a
    # passed descriptor is placed at (see _place_fds): a dup2 onto a number we hold would
    # replace ours silently (a host whose watchdog socket was 512 lost it, or had it
    # taken for the ruleset: landlock_add_rule EBADFD)
    floor = max([512, *plan["fd_targets"]]) + 1
    errfd = fcntl.fcntl(fds[2], fcntl.F_DUPFD_CLOEXEC, floor)
    os.close(fds[2])
    if ruleset is not None:
        ruleset.move_above(floor)
    try:
        rest = fds[3:]
        if req.get("status"):
            status, rest = rest[0], rest[1:]
            if handover is not None:
                socket.send_fds(handover, [b"s"], [status])
            os.close(status)  # never the workload's
        if handover is not None:
            handover.close()
        binds, mounted, passed = _split_binds(req, rest)
        if plan["level"] == "isolated":
            _attach_binds(plan, binds, mounted, prepared, cwd=plan["cwd"])
        elif binds:
            if not own_view:  # never over the spawner's (the host's) own mounts
                for fd in mounted:
                    os.close(fd)
                raise OSError("the plan has binds and the entry has no mount namespace")
            mounts.attach_over(binds, mounted)
        exec_workload(plan, (fds[0], fds[1]), passed, ruleset)
    except BaseException as exc:
        _report(errfd, exc)
    os._exit(127)


def _split_binds(req: dict[str, Any], rest: list[int]
                 ) -> tuple[list[mounts.Bind], list[int], list[int]]:
    """The plan's binds, their detached mounts and the passed descriptors, from the
    descriptors after stdout, stderr, error (and status)."""
    binds: list[mounts.Bind] = req.get("binds") or []
    count = sum(1 for b in binds if b["kind"] in mounts.WITH_MOUNT)
    return binds, rest[:count], rest[count:]


def _attach_binds(plan: dict[str, Any], binds: list[mounts.Bind], mounted: list[int],
                  prepared: tuple[str, int] | None, *, cwd: str | None) -> None:
    """Attach the binds in the root entered ahead, ``prepared`` (new root, /tmp size),
    if it is the plan's (else raise); their mounts' descriptors are closed either way."""
    m = plan["mounts"]
    if prepared is None or prepared[0] != m["new_root"]:
        for fd in mounted:
            os.close(fd)
        raise OSError(f"the entry's root is {prepared and prepared[0]}, not {m['new_root']}")
    mounts.attach(binds, mounted, cwd=cwd, tmp_mb=int(m["tmp_mb"]), prepared_tmp_mb=prepared[1])


def _prepare_landlock(warm: dict[str, Any], root: str | None = None
                      ) -> landlock.Ruleset | None:
    """The Landlock rules every execution of this entry gets (``warm["landlock"]``: the
    system, interpreter and device paths, and at ``isolated`` the root's own /tmp,
    /dev/shm and /proc), added ahead of the plan; the plan's own paths are added at launch
    (:func:`.landlock.restrict_self` checks that these are a subset of the plan's policy,
    else starts afresh). None when none was asked for or adding them failed.

    A rule names an inode. ``root``: the prepared root (``isolated``, before
    ``pivot_root``): a path present there (a file system of the root's own, a system bind,
    a device bind) is opened there; any other (the interpreter, bound at launch) at its
    host path, the very inode its bind will show."""
    ll = warm.get("landlock")
    if not ll:
        return None

    def inside(path: str) -> str | None:
        return root + path if root and os.path.lexists(root + path) else None

    try:
        ruleset = landlock.Ruleset(deny_tcp=bool(ll["deny_tcp"]), scope=bool(ll["scope"]))
    except OSError:
        return None
    try:
        ruleset.add_paths(ll["read"], write=False, opener=inside)
        ruleset.add_paths(ll["write"], write=True, opener=inside)
    except OSError:
        ruleset.close()
        return None
    return ruleset


def _report(errfd: int, exc: BaseException) -> None:
    msg = f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, OSError):
        msg += "\n" + "".join(traceback.format_exception(exc))
    with contextlib.suppress(OSError):
        os.write(errfd, msg.encode()[:4000])


def _report_ctl(ctl: int, exc: BaseException) -> None:
    msg = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(OSError):
        os.write(ctl, json.dumps({"error": msg[:4000]}).encode())


#: the namespaces an isolated entry gets of its own, by the flag that makes one
NAMESPACES = {CLONE_NEWNS: "mnt", CLONE_NEWPID: "pid", CLONE_NEWIPC: "ipc",
              CLONE_NEWUTS: "uts", CLONE_NEWNET: "net"}
#: the spawner's own namespaces (descriptors opened once), to come back to
_home: dict[int, int] = {}


def fork_isolated(netns: bool) -> int:
    """In the (single-threaded) spawner: fork the init of an ``isolated`` entry straight
    into new mount, pid, IPC and UTS namespaces (and network, ``netns``): unshare them
    here, fork, and return to ours with ``setns``. No process stands between us and the
    namespaces' init, which is pid 1 from its start (a holder forked to unshare them,
    which forked init and waited for it, took a tenth of the machine's CPU at 4 callers).
    0 in the child, as :func:`os.fork`. A spawner that cannot return to its own
    namespaces exits (the host starts another): it must never fork a later entry from
    inside this one's."""
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    if netns:
        flags |= CLONE_NEWNET  # a fresh net namespace: only a down loopback
    if not _home:
        for flag, name in NAMESPACES.items():
            _home[flag] = os.open(f"/proc/self/ns/{name}", os.O_RDONLY | os.O_CLOEXEC)
    unshare(flags)
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:
            for flag in NAMESPACES:
                if flags & flag and _libc.setns(_home[flag], flag) != 0:
                    err = ctypes.get_errno()
                    with contextlib.suppress(OSError):
                        os.write(2, f"execengine spawner: cannot return to its own "
                                    f"namespaces: {os.strerror(err)}\n".encode())
                    os._exit(70)
    return pid


def _namespace_init(warm: dict[str, Any], ctl: int) -> None:
    """As the namespaces' init (pid 1; see :func:`fork_isolated`): build and enter the
    root, start the interpreter (through the template, or a workload of ours),
    reap everything, report the execution's status to the host, exit. Never returns."""
    socket.sethostname("sandbox")

    def on_term(signum: int, frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGTERM)  # as pid 1: everyone in the namespace but us

    signal.signal(signal.SIGTERM, on_term)
    # the fixed part of the file-system view, ahead of the plan: built, its Landlock rules
    # added (the interpreter's at its host path), entered; by us, for the whole namespace
    # (pivot_root moves every process of it whose root was the old one)
    root, tmp_mb = str(warm["new_root"]), int(warm["tmp_mb"])
    zygote = warm.get("zygote")
    mounts.prepare_root(root, tmp_mb, zygote["interp"] if zygote else ())
    ruleset = _prepare_landlock(warm, root)
    mounts.enter_root(root)
    state = mounts.root_state() if _recycles(warm) else None
    # the interpreter reports to us on this pair (its start, then through the template its
    # end); without a template, the workload passes the host's status descriptor up on it
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    forked = _zygote_ready(warm, ruleset)
    workload: int | None = None
    if not (forked and warm.get("fork_fd") and _hand_over(warm, theirs, ruleset)):
        # no template forks the interpreter into our namespaces: a workload of ours
        # starts it (the plan then comes to us, as for the template's), or runs the plan
        _close_fork_fd(warm)
        state = None
        for fd in warm.pop("cgroup_fds", ()):  # the workload is the execution's
            _join_cgroup(fd)
        workload = os.fork()
        if workload == 0:
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                ours.close()
                if forked:
                    os.close(ctl)
                    exec_zygote(warm, theirs.detach(), ruleset)
                _await_plan(ctl, (root, tmp_mb), theirs, ruleset)
            except BaseException as exc:
                _report_ctl(ctl, exc)
            os._exit(127)
    theirs.close()
    if ruleset is not None:
        ruleset.close()
    for fd in warm.pop("cgroup_fds", ()):  # the interpreter joins the cgroup itself
        os.close(fd)
    if forked:
        host, pid = _forward_plan(warm, ctl, ours)
    else:
        host = _received_fd(ours)  # None: the workload died before the plan
        pid = workload
    if pid is None or pid == workload:
        # (None: nothing of a plan ran; an interpreter still waiting for one dies with
        # the namespace)
        ours.close()
        if workload is None:
            _kill_and_reap()
            status = 0
        else:
            status = _reap_until_empty(workload)
    else:  # an interpreter forked by the template: the template reports its end
        status = _await_keeper(ours, pid)
    # Only now, with nothing of the execution left, report the status to the host
    # straight away: exiting waits for the namespaces' teardown (the mount namespace's is
    # a synchronous RCU wait, ~1.5 ms), which then happens after the result is out. The
    # host takes "empty" as the kill-all's confirmation.
    if host is not None:
        with contextlib.suppress(OSError):
            os.write(host, f"{status} empty".encode())
        os.close(host)
        if state is not None and workload is None and pid is not None:
            _serve_again(warm, ctl, state)
    os._exit(0)


def _recycles(warm: dict[str, Any]) -> bool:
    """Whether this entry's namespaces and root serve more than one execution (see
    :func:`_serve_again`): asked for, at ``isolated``, with a cgroup (the host then kills
    an execution through it, never through us: the signal of a host that has not read an
    execution's status yet must not reach the next one's), the interpreter forked by the
    template (nothing of ours runs in the sandbox)."""
    return (bool(warm.get("recycle")) and warm["level"] == "isolated"
            and bool(warm.get("cgroup_dirs")) and bool((warm.get("zygote") or {}).get("fork"))
            and bool(warm.get("fork_fd")))


def _join_cgroup(fd: int) -> None:
    """Move ourselves into the cgroup of the directory ``fd`` (closed)."""
    try:
        procs = os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=fd)
        try:
            os.write(procs, b"0")
        finally:
            os.close(procs)
    finally:
        os.close(fd)


def _serve_again(warm: dict[str, Any], ctl: int, state: mounts.RootState) -> None:
    """As the namespaces' init, an execution over and reported: serve the next ones in
    the same namespaces and root, each after a reset that leaves nothing of the one
    before (see :func:`.mounts.reset_root`: its binds detached, the root's own file
    system as it was made, fresh ``/tmp`` and ``/dev/shm``; a fresh IPC namespace; the
    pid counter back to 1, so the interpreter is pid 2 again; fresh Landlock rules).
    Nothing of an execution's survives it (the kill-all before the report), and its
    cgroup and uid slot are the host's, made for each entry. Between executions we wait
    on ``ctl`` for the spawner: ``{"warm": W}`` with a socket to the template (the next
    entry's request, as :func:`prepare`'s), or EOF. Never returns: on anything else, or a
    reset that is not exact, we exit (the spawner makes new entries)."""
    sock = socket.socket(fileno=ctl)
    made = int(warm["tmp_mb"])  # /tmp's size
    try:
        while True:
            state = mounts.reset_root(state, made)
            for fd in (warm.pop("reporter", None), warm.pop("fork_fd", None)):
                if fd is not None:
                    os.close(fd)
            sock.send(b'{"recycled": true}')
            msg, fds, _, _ = socket.recv_fds(sock, MAX_PLAN, 1)
            if not msg or len(fds) != 1:
                break  # discarded, or the spawner is gone
            warm = {**json.loads(msg)["warm"], "fork_fd": fds[0]}
            if int(warm["tmp_mb"]) != made:
                made = int(warm["tmp_mb"])
                mounts.resize_tmp(made)
            unshare(CLONE_NEWIPC)  # SysV IPC and POSIX message queues of its own
            with open("/proc/sys/kernel/ns_last_pid", "w") as fh:
                fh.write("1")  # (nothing runs here but us: the next process is pid 2)
            ruleset = _prepare_landlock(warm)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            if not (_zygote_ready(warm, ruleset) and _hand_over(warm, theirs, ruleset)):
                break
            theirs.close()
            if ruleset is not None:
                ruleset.close()
            host, pid = _forward_plan(warm, ctl, ours)
            if pid is None:
                break  # nothing of a plan ran (an interpreter waiting dies with us)
            status = _await_keeper(ours, pid)
            if host is None:
                break
            with contextlib.suppress(OSError):
                os.write(host, f"{status} empty".encode())
            os.close(host)
    except BaseException:  # (reported nowhere: the spawner sees us exit)
        pass
    _kill_and_reap()
    os._exit(0)


def _received(sock: socket.socket) -> bytes:
    """One message on ``sock`` (empty at EOF or on an error)."""
    while True:
        try:
            return sock.recv(16)
        except InterruptedError:
            continue
        except OSError:
            return b""


def _forward_plan(warm: dict[str, Any], ctl: int, zygote: socket.socket
                  ) -> tuple[int | None, int | None]:
    """As the namespace's init, for a pre-started interpreter (see :func:`exec_zygote`
    and :func:`exec_template`): receive the plan, attach its binds (root is needed for
    that, and the interpreter runs as the sandbox's uid already), forward the rest to the
    interpreter. The host's status descriptor (None when the entry was discarded, or the
    interpreter was gone, before use) and the interpreter's pid (None: it never said it
    was ready)."""
    sock = socket.socket(fileno=ctl)
    try:
        msg, fds, _, _ = socket.recv_fds(sock, MAX_PLAN, MAX_FDS)
    finally:
        sock.detach()  # ctl stays open: an init that serves again waits on it (see
        # _serve_again); it goes with us otherwise
    if not msg:
        return None, None  # discarded before use
    sock = socket.socket(fileno=os.dup(ctl))
    req = json.loads(msg)
    plan: dict[str, Any] = req["plan"]
    stdio, errfd, status = fds[:2], fds[2], fds[3]
    binds, mounted, passed = _split_binds(req, fds[4:])
    # The binds wait for the interpreter's start-up to end (the spawner waits for it
    # anyway: the error descriptor is open until the interpreter takes the plan): what it
    # read (site's .pth entries, say) and what it noted as missing are the fixed root's,
    # not, by timing, the plan's. An interpreter that died starting or waiting takes
    # nothing (no "received", no error): the spawner gives the plan to a cold entry.
    taken = False
    ready = _received(zygote)
    pid = int(ready[6:]) if ready.startswith(b"ready ") and ready[6:].isdigit() else None
    if pid is not None and _ended(warm.get("reporter")):
        pid = None  # its parent, the template, died: nobody would report its end
    if pid is None:
        for fd in mounted:
            os.close(fd)
    else:
        try:  # the mounts' descriptors are closed there, whatever happens
            _attach_binds(plan, binds, mounted,
                          (str(warm["new_root"]), int(warm["tmp_mb"])), cwd=None)
        except BaseException as exc:
            _report(errfd, exc)
            taken = True  # an error of the plan's: reported, not retried
        else:
            with contextlib.suppress(OSError):
                socket.send_fds(zygote, [marshal.dumps(
                    {"plan": plan, "zygote": req.get("zygote")}, 4)], [*stdio, errfd, *passed])
                taken = True
    if taken:  # before our copy of the error descriptor closes (see _spawnserver._use)
        with contextlib.suppress(OSError):
            sock.send(b'{"received": true}')
    sock.close()
    for fd in [*stdio, errfd, *passed, *([] if taken else [status])]:
        with contextlib.suppress(OSError):
            os.close(fd)
    return (status if taken else None), pid


def _ended(pidfd: int | None) -> bool:
    """Whether the process of ``pidfd`` has exited (False for None)."""
    if pidfd is None:
        return False
    poller = select.poll()  # never select(): the descriptor may be above 1023
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _await_keeper(keeper: socket.socket, pid: int) -> int:
    """As the namespace's init, for an interpreter forked by the template (``pid``; its
    parent is the template, outside the namespace): wait for the template's report of its
    end, then SIGKILL everything else of the namespace and reap it (what the interpreter
    left was reparented to us). A template that died without a report (killed) leaves
    the interpreter to our SIGKILL; we wait for it to be gone. Its wait status."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except OSError:
        pidfd = None  # gone already
    status: int | None = None
    while True:
        msg = _received(keeper)
        if not msg or msg.startswith(b"exit "):
            break
    keeper.close()
    if msg[5:].isdigit():
        status = int(msg[5:])
    _kill_and_reap()
    if pidfd is not None:
        with contextlib.suppress(OSError):
            poller = select.poll()  # never select(): the descriptor may be above 1023
            poller.register(pidfd, select.POLLIN)
            poller.poll()  # readable once it has exited
        os.close(pidfd)
    _await_alone()
    return status if status is not None else int(signal.SIGKILL)


def _await_alone(timeout: float = 10.0) -> None:
    """As the namespace's init, after the kill: until the namespace's ``/proc`` shows no
    thread but ours that has not exited (or ``timeout``). A child the interpreter made
    with ``CLONE_PARENT`` has its parent, the template, outside the namespace, so ``waitpid``
    never sees it; killed, it may still be exiting (unmapping a large heap takes tens of
    ms) after the interpreter is gone, with its standard streams closed so the host's
    drain did not wait for it either."""
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while True:
        try:
            others = [e for e in os.listdir("/proc") if e.isdigit() and e != "1"]
        except OSError:
            return  # no /proc of ours: nothing to look at
        if not any(_alive(pid) for pid in others) or time.monotonic() >= deadline:
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _alive(pid: str) -> bool:
    """Whether a thread of process ``pid`` has not exited yet (is not a zombie): a leader
    that called ``exit`` is one while its other threads still run."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False  # gone meanwhile
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                state = fh.read().rpartition(b")")[2].split()[:1]
        except OSError:
            continue
        if state not in ([], [b"Z"], [b"X"]):
            return True
    return False


def _close_fork_fd(warm: dict[str, Any]) -> None:
    """Our copy of the socket to the template (only init hands over)."""
    fd = warm.pop("fork_fd", None)
    if fd:
        with contextlib.suppress(OSError):
            os.close(fd)


def _zygote_ready(warm: dict[str, Any], ruleset: landlock.Ruleset | None) -> bool:
    """Whether this entry pre-starts the interpreter: asked for, at ``isolated`` (before
    the plan it sees only the system's and its own folders; in the host's view, start-up
    code a sandbox could write would run before Landlock), and the Landlock rules added
    ahead when there are any (the interpreter can only add to them)."""
    return (bool(warm.get("zygote")) and warm["level"] == "isolated"
            and (ruleset is not None or not warm.get("landlock")))


#: the pre-started interpreter's program (``sandbox/zygote.py``), read by the spawner
ZYGOTE_SOURCE: str = ""


def exec_zygote(warm: dict[str, Any], ctl: int, ruleset: landlock.Ruleset | None) -> None:
    """Do the privileged part of :func:`exec_workload` with what the warm entry was made
    for (``warm["zygote"]``: rlimits, uid, gid, seccomp), then exec the interpreter with
    ``sandbox/zygote.py``, which waits on ``ctl`` for the plan (it gets the plan's
    descriptors, working directory, the rest of Landlock, the environment and the code).
    Never returns."""
    z = warm["zygote"]
    _default_signals()
    os.chdir("/")
    _drop(z["rlimits"], z.get("uid"), z.get("gid"))
    _seccomp(z.get("seccomp"))
    params: dict[str, Any] = {"ctl": ctl, "argv0": z["argv0"], "env": z["env"],
                              "ruleset": None, "landlock": None}
    os.set_inheritable(ctl, True)
    if ruleset is not None and ruleset.fd is not None:
        os.set_inheritable(ruleset.fd, True)
        params["ruleset"] = ruleset.fd
        params["landlock"] = {"read_access": landlock.READ, "write_access": ruleset.handled,
                              "file_rights": landlock.FILE_RIGHTS}
    _exec_loader(z["argv0"], z["env"], "main", params)


def _exec_loader(argv0: str, env: dict[str, str], function: str, params: dict[str, Any],
                 keep: int | None = None) -> None:
    """Exec ``argv0`` under ``env`` with :data:`ZYGOTE_LOADER` running ``sandbox/zygote.py``
    and then its ``function(params)``, whose result is the code the loader runs.
    ``keep``: a descriptor the program uses (made inheritable)."""
    program = zygote_program(ZYGOTE_SOURCE, function, params, argv0)
    if keep is not None:
        os.set_inheritable(keep, True)
    # the standard streams the interpreter makes at start-up must be what the plan's will
    # be (its stdout and stderr are pipes: not seekable, not a terminal): a pipe nobody
    # reads until then (a write that would block fails), stdin /dev/null as the plan's
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _, stdio = os.pipe2(os.O_NONBLOCK)  # the read end stays open: writes do not raise EPIPE
    os.dup2(stdio, 1)
    os.dup2(stdio, 2)
    os.close(stdio)
    r, w = os.pipe()
    data = memoryview(program)
    while data:
        data = data[os.write(w, data):]
    os.close(w)
    os.set_inheritable(r, True)
    os.execve(argv0, [argv0, "-c", ZYGOTE_LOADER, str(r)], env)


def _hand_over(warm: dict[str, Any], init: socket.socket, ruleset: landlock.Ruleset | None
               ) -> bool:
    """As the namespace's init of an entry served by a template (see
    :func:`exec_template`), in the root it entered: hand our namespaces (a pidfd of
    ourselves), our end of the interpreter's socket (``init``) and the Landlock rules
    made ahead to the template, which forks the interpreter into them. Whether it did;
    if not, the caller forks a workload that starts it. The template answers with a pidfd
    of itself, kept as ``warm["reporter"]``: it reports the interpreter's end, so a plan
    is not forwarded once it has died (see :func:`_forward_plan`)."""
    fd = warm.pop("fork_fd")
    sock = socket.socket(fileno=fd)
    try:
        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
        pidfd = os.pidfd_open(os.getpid())
        sent = [pidfd, init.fileno()]
        ll = None
        if ruleset is not None and ruleset.fd is not None:
            sent.append(ruleset.fd)
            ll = {"read_access": landlock.READ, "write_access": ruleset.handled,
                  "file_rights": landlock.FILE_RIGHTS}
        try:
            socket.send_fds(sock, [marshal.dumps({"ns": flags, "landlock": ll}, 4)], sent)
        finally:
            os.close(pidfd)
        msg, fds, _, _ = socket.recv_fds(sock, 4096, 1)
        if fds:
            warm["reporter"] = fds[0]
        return msg == b"ok"
    except OSError:
        return False
    finally:
        sock.close()


#: the template's program after ``sandbox/zygote.py``: serve the spawner, on the descriptor
#: ``TEMPLATE_CTL`` (its interpreter's own, at that number)
TEMPLATE_CTL = 3


def exec_template(template: dict[str, Any], ctl: int, spawner: int) -> None:
    """Become a template for the interpreter ``template["argv0"]`` (forked from the
    spawner): a mount namespace of our own with the fixed part of a sandbox's root
    (``template["new_root"]``: the system's and the interpreter's folders, read-only), as
    root, then exec the interpreter under ``template["env"]`` with ``sandbox/zygote.py``,
    which serves forks on ``ctl`` (see ``zygote.serve``). Its start-up (``site``, the
    ``.pth`` hooks) runs once here, not in every execution; it runs as root, so only an
    interpreter the host itself runs is used (see the launcher). Never returns."""
    try:
        gc.disable()
        signal.set_wakeup_fd(-1)
        os.dup2(ctl, TEMPLATE_CTL)  # the standard streams are replaced at exec
        os.closerange(TEMPLATE_CTL + 1, 1 << 20)
        os.setsid()
        die_with_parent(spawner)
        unshare(CLONE_NEWNS)
        root = str(template["new_root"])
        mounts.prepare_root(root, 1, template["interp"])
        mounts.enter_root(root)
        _default_signals()
        _exec_loader(template["argv0"], template["env"], "serve",
                     {"ctl": TEMPLATE_CTL, "argv0": template["argv0"], "env": template["env"]},
                     keep=TEMPLATE_CTL)
    finally:
        os._exit(127)


def _received_fd(sock: socket.socket) -> int | None:
    """The one descriptor sent on ``sock``, or None at EOF."""
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(sock, 16, 1)
        except InterruptedError:
            continue
        except OSError:
            return None
        return fds[0] if fds else None


def _reap_until_empty(workload: int) -> int:
    """As the namespace's init: reap until the workload has exited, then SIGKILL every
    other process of the namespace and reap until none is left; the workload's status.

    Why "none is left" is exact: ``kill(-1, SIGKILL)`` from pid 1 reaches every process of
    the namespace but init, and the kernel walks the task list under the lock that
    ``fork`` needs to add a task, so a fork either completed before (its child is killed
    too) or sees the pending SIGKILL and fails. A dying process's children are reparented
    (to init, or to a subreaper of the namespace that is itself dying) before it becomes
    reapable, so ``waitpid(-1)`` reporting no children means no process of the namespace
    but init exists (the workload is our child, so ``CLONE_PARENT`` still gives a parent
    inside the namespace, pid 1 itself may not use it, and only root on the host could
    join the namespace; an interpreter forked by the template is not our child: see
    :func:`_await_alone`).
    """
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 127 << 8  # not reached: the workload is our child
        except InterruptedError:
            continue
        if pid == workload:
            _kill_and_reap()
            return status


def _kill_and_reap() -> None:
    """As the namespace's init: SIGKILL everyone in the namespace but us, and reap until
    none is left (why that is exact: :func:`_reap_until_empty`)."""
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
