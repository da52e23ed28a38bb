"""Launchers for levels ``restricted`` and ``isolated``, behind the launcher seam.

Both hand a *plan* (plain JSON) to the single-threaded spawner process, which forks and
enters the sandbox (:mod:`.entry`). The host side prepares what needs host privileges and
outlives the child: a uid slot, ACL grants so that uid can reach the interpreter, the
staging/socket/working directories, a private tmp (``restricted``) and a cgroup.

Fast path (see :mod:`.warm`): the slot, the cgroup and the spawner's phase-1 entry are
prepared *before* the launch, on a background thread, so a launch only writes the limits,
grants the execution's paths and sends the plan. Interpreter grants are made once per
launcher (they expose only the interpreter, read-only) and revoked when it closes; the
execution's own grants are revoked, its cgroup directories removed and its tmp deleted
after the child is closed, off the result's path, and always before the launcher's
``close()`` returns.

Kill-all, strongest first: the execution's cgroup (``cgroup.kill``); at ``isolated`` the
pid namespace (killing its init, the spawner's child, kills every process in the
namespace); at ``restricted`` as root without cgroups, every process of the slot uid
(``kill(-1)`` from a helper running as that uid). A non-root ``restricted`` host without
cgroups falls back to the process group plus the descendants still attached to the main
process. A slot whose processes could not be confirmed dead is never handed out again.
At ``isolated`` a script that ends by itself needs none of that: the namespace's init
SIGKILLs and reaps whatever is left before it reports the status (``"<status> empty"``),
so that report is the confirmation, and the namespaces' teardown happens off the result's
path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import select
import shutil
import signal
import stat
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, TypeVar

from execengine._runtime import runtime_module
from execengine.errors import IsolationError, SandboxError
from execengine.hostdirs import owner_tag
from execengine.isolation import acl, cgroups, ipc, leftovers, mounts, owner
from execengine.isolation.detect import IsolationReport, detect
from execengine.isolation.rlimits import PLAN_RLIMITS, Rlimits, tasks_of_uid
from execengine.isolation.spawner import Spawner
from execengine.isolation.uids import UidPool, UidSlot
from execengine.launch.base import (
    Background,
    Child,
    Launcher,
    LaunchLimits,
    LaunchSpec,
    WarmEntry,
    WarmPool,
)
from execengine.proctree import RUN_TOKEN_VAR, ProcessSet
from execengine.workdirs import real_paths

if TYPE_CHECKING:
    from typing_extensions import Self

    from execengine.config import Config

log = logging.getLogger(__name__)
T = TypeVar("T")

RUN_DIR = "/run/execengine"
NEW_ROOT = RUN_DIR + "/root"
KILL_WAIT = 3.0
TEARDOWN_GRACE = 0.5
DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
DEVICES_RO = ("/dev/random", "/dev/urandom")


def _zygote_for(plan: dict[str, Any], interp: list[str]) -> dict[str, Any] | None:
    """What a warm entry needs to start the interpreter of ``plan`` ahead (None: it cannot,
    see :func:`.._spawnserver.zygote_extras`): how (the interpreter, the environment
    without the per-execution variables) and the privileged part it applies first (the
    rlimits but :data:`.rlimits.PLAN_RLIMITS`, which the interpreter sets from each plan)."""
    if plan.get("proxy_bridge") or (plan.get("landlock") or {}).get("connect_ports"):
        return None
    late = set(runtime_module("zygote").LATE_VARS)
    return {"argv0": plan["argv"][0],
            "env": {k: v for k, v in plan["env"].items() if k not in late},
            "rlimits": [r for r in plan["rlimits"] if r[0] not in PLAN_RLIMITS],
            "seccomp": plan["seccomp"], "interp": interp}


def _overlaps(paths: list[str], interp: list[str]) -> bool:
    """Whether one of ``paths`` contains, or lies inside, one of the interpreter's
    folders (a sandbox that may write there could change what an interpreter runs when
    it starts, before the plan's Landlock rules). ``paths``: resolved (see _resolve)."""
    real = [os.path.abspath(p) for p in paths]
    folders = real_paths(tuple(interp))
    return any(p == i or mounts.beneath(p, i) or mounts.beneath(i, p)
               for p in real for i in folders)


def _resolve(spec: LaunchSpec) -> LaunchSpec:
    """``spec`` with its writable paths and working directory resolved, once: what is
    granted and bound from here on (each bind reached through no symbolic link, see
    :func:`.mounts._clone`). A ``resolved`` spec's paths must resolve to themselves: one
    that does not has had a symbolic link swapped in since the caller checked it."""
    named = [*spec.writable_paths, spec.cwd]
    try:
        real = [os.path.realpath(p) for p in named]
    except OSError as exc:  # realpath's readlink, of a link swapped in and out meanwhile
        raise SandboxError(f"cannot resolve the paths of the launch: {exc}") from exc
    if spec.resolved:
        for p, r in zip(named, real, strict=True):
            if r != os.path.abspath(p):
                raise SandboxError(f"refusing to launch in {p}: it leads to {r} now (a "
                                   "symbolic link on the way changed since it was checked)")
    return dataclasses.replace(spec, writable_paths=tuple(dict.fromkeys(real[:-1])),
                               cwd=real[-1])


def _exactly(path: str, act: Callable[[int], T]) -> T:
    """``act`` on a descriptor of the file or folder at ``path`` reached through no
    symbolic link: a grant by name would follow a link another execution swapped in
    (OSError when one lies on the way)."""
    at = mounts.open_nofollow(path)
    if at is None:
        raise OSError(f"{path} is gone, or a symbolic link lies on the way")
    try:
        # the very inode, opened for its attributes (an O_PATH descriptor has none to set)
        fd = os.open(f"/proc/self/fd/{at}", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
                     | os.O_CLOEXEC)
    finally:
        os.close(at)
    try:
        return act(fd)
    finally:
        os.close(fd)


class _Grants:
    """Reference-counted ACL grants to the sandbox group (thread-safe)."""

    def __init__(self, gid: int, ledger: leftovers.GrantLedger | None = None) -> None:
        self.gid = gid
        self._lock = threading.Lock()
        self._count: dict[str, int] = {}
        #: what we hold, on disk: swept if this host dies, and honoured by other engines
        self._ledger = ledger

    def add(self, paths: list[tuple[str, bool]], *, resolved: bool = False) -> list[str]:
        """Grant each of ``paths`` (``resolved``: as named, never resolved again; a link
        swapped in since fails the grant)."""
        taken: list[str] = []
        with self._lock:
            for named, write in paths:
                if not resolved and not os.path.exists(named):
                    continue  # (a resolved one that is gone fails the grant)
                # a path through a symbolic link: the grant is on what it points to, and
                # both ways there are traversed
                path = os.path.abspath(named) if resolved else os.path.realpath(named)
                try:
                    for way in dict.fromkeys((named, path)):
                        acl.grant_traverse(way, self.gid)
                    changed = _exactly(path, functools.partial(
                        acl.grant, gid=self.gid, write=write))
                except OSError as exc:
                    raise SandboxError(f"cannot grant the sandbox uid access to {path}: "
                                       f"{exc}") from exc
                # an entry we did not add (another engine's) is held too, so the ledgers
                # show it in use until the last holder releases it
                if (changed or path in self._count
                        or acl.group_perm(path, self.gid) is not None):
                    self._count[path] = self._count.get(path, 0) + 1
                    taken.append(path)
            if taken and self._ledger is not None:
                self._ledger.record(self._count)
        return taken

    def release(self, paths: list[str]) -> None:
        with self._lock:
            gone = []
            for path in paths:
                n = self._count.get(path, 0) - 1
                if n > 0:
                    self._count[path] = n
                    continue
                self._count.pop(path, None)
                gone.append(path)
            if not gone:
                return
            # another live engine (here or in another process) may need the same path
            held = self._ledger.held_elsewhere() if self._ledger is not None else set()
            for path in gone:
                if path not in held:
                    with contextlib.suppress(OSError):
                        _exactly(path, lambda at: acl.revoke(at, self.gid))
            if self._ledger is not None:
                self._ledger.record(self._count)


def _interpreter_paths(argv0: str) -> list[str]:
    """The folders a program needs to read to run: its prefix as named and as resolved
    (never ``/``: a program in ``/bin`` is under a system directory already)."""
    real = real_paths((argv0,))[0]
    out = []
    named = os.path.dirname(os.path.dirname(os.path.abspath(argv0)))
    if named != "/":
        out.append(named)
    prefix = os.path.dirname(os.path.dirname(real))
    if prefix not in ("/usr", "/"):
        out.append(prefix)
    return out


class SandboxChild(Child):
    def __init__(self, launcher: SandboxLauncher, pid: int, stdout: IO[bytes],
                 stderr: IO[bytes], status_fd: int, *, slot: UidSlot | None,
                 group: cgroups.ExecCgroup | None, grants: list[str],
                 tmpdir: str | None, run_token: str = "") -> None:
        self._launcher = launcher
        self.run_token = run_token
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self._status_fd: int | None = status_fd
        self._status_buf = b""
        self.returncode: int | None = None
        self._slot = slot
        self._group = group
        self._grants = grants
        self._tmpdir = tmpdir
        self._dead = False
        self._empty = False
        self._lock = threading.Lock()
        # only a non-root host without cgroups kills by process tree and run token
        self._processes = (ProcessSet(pid, root_reaped=lambda: self.returncode is not None,
                                      var=RUN_TOKEN_VAR, token=run_token)
                           if slot is None and group is None else None)

    @property
    def uid(self) -> int | None:
        """The slot uid the execution runs as (None when the host is not root)."""
        return self._slot.uid if self._slot is not None else None

    # -- status -----------------------------------------------------------------------
    def _read_status(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is not None or self._status_fd is None:
                return self.returncode
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                # poll(), never select(): descriptor numbers above 1023 are normal here
                poller = select.poll()
                poller.register(self._status_fd, select.POLLIN)
                if not poller.poll(None if left is None else left * 1000):
                    return None
                data = os.read(self._status_fd, 64)
                if data:
                    self._status_buf += data
                    continue
                os.close(self._status_fd)
                self._status_fd = None
                words = self._status_buf.decode().split()
                self.returncode = (os.waitstatus_to_exitcode(int(words[0])) if words
                                   else -signal.SIGKILL)
                # "<status> empty": the namespace's init reported it after reaping every
                # process of the execution (see entry._reap_until_empty)
                self._empty = words[1:] == ["empty"]
                return self.returncode

    def poll(self) -> int | None:
        return self._read_status(0)

    def wait(self, timeout: float | None = None) -> int | None:
        return self._read_status(timeout)

    # -- signals ----------------------------------------------------------------------
    def _signal_all(self, sig: int) -> None:
        if self._group is not None:
            for pid in self._group.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        if self._launcher.level == "isolated":
            # the pid is the namespaces' init: with a cgroup, the execution is its members
            # (the interpreter and all it started) and init is left alone, since it may
            # serve the next execution once it has reported this one's status (see
            # entry._serve_again): a signal sent before we read that status would reach it
            if self.returncode is None and self._group is None:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL if sig == signal.SIGKILL else sig)
            return
        if self._slot is not None and (self._group is None or sig != signal.SIGKILL):
            self._launcher.spawner.kill_uid(self._slot.uid, sig)
        elif self._processes is not None:
            # non-root host without cgroups: the group, the descendants and whatever still
            # carries the run token (descendants that left the session; best effort)
            if sig == signal.SIGKILL:
                self._processes.kill()
            else:
                self._processes.signal(sig)

    def terminate(self) -> None:
        # at isolated the child is the namespace's init, which forwards it to the namespace
        if (self._launcher.level == "isolated" and self.returncode is None
                and self._group is None):
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGTERM)
        self._signal_all(signal.SIGTERM)

    def kill(self) -> None:
        if self._dead:
            return  # a confirmed kill-all: nothing of the execution can run any more
        if self.poll() is not None and self._empty:
            # isolated: the namespace's init confirmed that no process of the execution is
            # left; only init (our code, exiting) remains, and the deferred
            # teardown kills and removes the cgroup anyway
            self._dead = True
            return
        empty = self._group.kill(KILL_WAIT) if self._group is not None else None
        self._signal_all(signal.SIGKILL)
        if self.wait(KILL_WAIT) is None:
            log.warning("sandboxed child %d not reaped after SIGKILL", self.pid)
            return
        # confirmed: the cgroup is empty, or the pid namespace is gone with its init,
        # or every process of the slot uid was killed (restricted, no cgroup)
        self._dead = bool(empty) or (empty is None and self._slot is not None)

    def oom_kills(self) -> int:
        # the cgroup outlives close() only on the background thread: read it before
        if self._closed or self._group is None:
            return 0
        return self._group.oom_kills()

    @property
    def cgroup_dirs(self) -> tuple[str, ...]:
        return tuple(self._group.dirs) if self._group is not None else ()

    def release(self) -> None:
        with self._lock:
            if self._status_fd is not None:
                os.close(self._status_fd)
                self._status_fd = None
        # after the init's report only the namespace's init is left in the cgroup,
        # exiting by itself: give it a moment before a cgroup.kill
        self._launcher.retire(self._slot, confirmed_dead=self._dead, grants=self._grants,
                              group=self._group, tmp=self._tmpdir,
                              grace=TEARDOWN_GRACE if self._empty else 0.0)


class SandboxLauncher(Launcher):
    """Common machinery of :class:`RestrictedLauncher` and :class:`IsolatedLauncher`."""

    level = "restricted"

    def __init__(self, report: IsolationReport | None = None, *,
                 use_cgroups: bool | None = None, uid_pool: UidPool | None = None,
                 warm: int = 2, fork_server: bool = True, recycle: bool = True) -> None:
        self.report = report or detect()
        if not self.report.levels.get(self.level):
            raise IsolationError(f"isolation level {self.level!r} is not available here: "
                                 f"{self.report.reasons.get(self.level, 'unknown reason')}")
        self.root = os.geteuid() == 0
        self.uid_pool = uid_pool or (UidPool() if self.root else None)
        self._grants = _Grants(self.uid_pool.gid if self.uid_pool else -1,
                               leftovers.GrantLedger() if self.uid_pool else None)
        if use_cgroups is None:
            # a cgroup migration costs an RCU grace period (1-20 ms here), but with warm
            # entries it happens before the launch; the cgroup then gives restricted a
            # memory limit for the whole tree and a kill-all without a helper fork
            use_cgroups = True
        cg = self.report.has("cgroups") and use_cgroups
        self._cg_layout = cgroups.discover() if cg else None
        # what killed hosts left: their cgroups, ACL grants and private tmp folders
        leftovers.sweep(self._cg_layout, self.uid_pool.gid if self.uid_pool else None)
        self.spawner = Spawner(sweep_gid=self.uid_pool.gid if self.uid_pool else None)
        self._swept: set[int] = set()
        self._lasting: dict[str, list[str]] = {}  # interpreter path -> grants held
        self._quarantined: list[UidSlot] = []
        self._background = Background()
        # an entry for the other kind of launch (a script's interpreter started ahead, or a
        # program exec'd at launch) is kept for it; one for another network or an older
        # generation is discarded
        self._pool = WarmPool(self._make_warm, self._discard_warm, self._background, warm,
                              stale=lambda have, want: have[:2] != want[:2])
        self._limits_seen = LaunchLimits()
        #: the interpreter paths of the last launch (its Landlock rules are added ahead)
        self._interp_seen: list[str] = []
        #: how the last launch that may run in a pre-started interpreter (``spec.prestart``)
        #: started it: what warm entries start ahead (see :func:`.entry.exec_zygote`)
        self._zygote_seen: dict[str, Any] | None = None
        #: interpreters whose folders a plan made writable: never started ahead again
        self._zygote_refused: set[str] = set()
        #: counts refusals: entries of an older generation are discarded, not used (one may
        #: have started its interpreter while that plan's script wrote its folders)
        self._zygote_generation = 0
        #: at ``isolated``, as root: pre-started interpreters are forked from one started
        #: once (see :func:`.entry.exec_template`), not each started on its own
        self._fork_server = fork_server
        #: at ``isolated`` with cgroups: an entry's namespaces and root serve the next
        #: executions after a reset (see :func:`.entry._serve_again`)
        self._recycle = recycle and self.level == "isolated"
        #: at ``restricted`` as root: every entry has a mount namespace of its own, where
        #: the plan's binds go over the host's view (the writable roots id-mapped to their
        #: owners, the protected paths read-only: see :func:`.mounts.attach_over`)
        self._own_view = (self.level == "restricted" and self.root
                          and self.report.has("namespaces"))
        if self._own_view:
            os.makedirs(mounts.MASK_DIR, mode=0o755, exist_ok=True)
        #: what a sandbox's new files are created with: the engine's own umask
        self._umask = owner.host_umask()
        self._closed = False

    @classmethod
    def from_config(cls, config: Config, report: IsolationReport | None = None) -> Self:
        ce = config.code_execution
        return cls(report, warm=ce.warm_entries, fork_server=ce.fork_server,
                   recycle=ce.recycle_entries)

    # -- plan -------------------------------------------------------------------------
    def _landlock_paths(self, spec: LaunchSpec, tmp: str, interp: list[str]
                        ) -> tuple[list[str], list[str]]:
        read = [*mounts.SYSTEM_DIRS, *interp, *spec.readable_paths, *DEVICES_RO]
        if spec.socket_dir:
            read.append(spec.socket_dir)
        write = [*spec.writable_paths, tmp, *DEVICES_RW]
        if spec.cwd not in spec.writable_paths:
            read.append(spec.cwd)
        return read, write

    def _fixed_rules(self, interp: list[str], limits: LaunchLimits) -> dict[str, Any]:
        """The Landlock rules that do not depend on the execution (its plan lists them
        too): a warm entry adds them ahead (see :func:`.entry._prepare_landlock`)."""
        read = [*mounts.SYSTEM_DIRS, *interp, *DEVICES_RO]
        write = list(DEVICES_RW)
        if self.level == "isolated":
            read += ["/proc", "/dev/shm"]
            write += ["/tmp", "/dev/shm"]
        network = bool(limits.network) and self.level == "isolated"
        return {"read": read, "write": write, "deny_tcp": not network, "scope": True}

    def _owned(self, spec: LaunchSpec, slot: UidSlot | None) -> dict[str, owner.Owner]:
        """The writable paths (as ``spec`` names them) the sandbox acts in as their owner:
        as root (a slot uid), with ``workdir_as_owner``, where an id-mapped bind can show
        the folder (see :mod:`..isolation.owner`) and the level has the view to put it in
        (``isolated``'s root, ``restricted``'s own mount namespace)."""
        if (slot is None or not spec.limits.workdir_as_owner
                or (self.level == "restricted" and not self._own_view)):
            return {}
        # the paths are resolved (see _resolve); one that resolves elsewhere by now is
        # not looked up there (its bind, made through no link, will fail)
        # the paths are resolved (see _resolve): each owner is read from the path itself,
        # never through a link swapped in since (whose bind then fails anyway)
        out: dict[str, owner.Owner] = {}
        for p in spec.writable_paths:
            fd = mounts.open_nofollow(p)
            if fd is None:
                if not os.path.lexists(p):
                    continue  # nothing there: nothing to bind (as before)
                raise SandboxError(f"refusing to launch in {p}: a symbolic link lies on "
                                   "the way now (it changed since it was checked)")
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode) and owner.can_map(f"/proc/self/fd/{fd}")[0]:
                    out[p] = owner.Owner(st.st_uid, st.st_gid)
            finally:
                os.close(fd)
        return out

    def _plan(self, spec: LaunchSpec, slot: UidSlot | None, group: cgroups.ExecCgroup | None,
              tmp: str, interp: list[str], owned: dict[str, owner.Owner] | None = None
              ) -> dict[str, Any]:
        limits = spec.limits
        read, write = self._landlock_paths(spec, tmp, interp)
        if self.level == "isolated":
            read += ["/proc", "/dev/shm"]
            write += ["/dev/shm"]
        env = dict(spec.env)
        for name in ("TMPDIR", "TMP", "TEMP"):
            env[name] = tmp
        network = bool(limits.network) and self.level == "isolated"
        proxy = limits.proxy_port if not network else None
        plan: dict[str, Any] = {
            "level": self.level,
            "argv": list(spec.argv),
            "env": env,
            "cwd": spec.cwd,
            "uid": slot.uid if slot else None,
            "gid": slot.gid if slot else None,
            "rlimits": Rlimits.from_limits(limits, nproc=self._nproc(slot, limits)).pairs(),
            "landlock": {"read": read, "write": write, "deny_tcp": not network,
                         "connect_ports": [proxy] if proxy is not None else [],
                         "scope": True, "proc_self": self.level != "isolated"},
            # isolated, bridged: an empty namespace of its own is the boundary; restricted
            # (bridged too) and the host's network: stream sockets only, connects to the
            # proxy's port only
            "seccomp": {"allow_network": network or (self._bridged(limits)
                                                     and self.level == "isolated"),
                        "stream_only": proxy is not None and self.level != "isolated"},
            "cgroup_dirs": list(group.dirs) if group else [],
            "netns": self._own_net(limits),
            "mntns": self._own_view,
            "fd_targets": list(spec.pass_fds),
            "umask": self._umask,
            "recycle": self._recycle,  # (a cold entry's)
        }
        owned = owned or {}
        if self._bridged(limits):
            assert limits.proxy_socket is not None
            plan["proxy_bridge"] = {"port": limits.proxy_port, "socket": limits.proxy_socket}
        if self.level == "isolated":
            proxy_dir = ([os.path.dirname(limits.proxy_socket)]
                         if self._bridged(limits) and limits.proxy_socket else [])
            plan["mounts"] = {
                "new_root": NEW_ROOT,
                "read": [*interp, *spec.readable_paths, *proxy_dir,
                         *([] if spec.cwd in spec.writable_paths else [spec.cwd])],
                "write": list(spec.writable_paths),
                "socket_dir": spec.socket_dir,
                "tmp_mb": limits.tmp_mb,
                "protect": [os.path.realpath(p) for p in spec.protected_paths],
                # the same denied paths every launch (as the file tools' guard resolves them)
                "hide": list(real_paths(tuple(spec.hidden_paths))),
            }
            # each such writable root's owner appears as the slot uid in the sandbox
            plan["owners"] = [[os.path.abspath(p), o.uid, o.gid] for p, o in owned.items()]
        elif self._own_view:
            # no root of its own: binds over the host's view, at the real paths (reached
            # with no symbolic link on the way, see mounts.attach_over)
            plan["mounts"] = {
                # resolved already (see _resolve): resolving again would follow a link
                # swapped in since
                "write": list(spec.writable_paths),
                "read": [os.path.realpath(p) for p in spec.readable_paths],
                "socket_dir": spec.socket_dir,
                "protect": [os.path.realpath(p) for p in spec.protected_paths],
                "hide": list(real_paths(tuple(spec.hidden_paths))),
            }
            plan["owners"] = [[p, o.uid, o.gid] for p, o in owned.items()]
        return plan

    def _host_net(self, limits: LaunchLimits) -> bool:
        """True when an ``isolated`` sandbox keeps the host's network namespace: network
        on, or the allow-list proxy reached on the host's loopback (no Unix socket to
        bridge it into a namespace of its own)."""
        return self.level == "isolated" and (
            bool(limits.network)
            or (limits.proxy_port is not None and limits.proxy_socket is None))

    def _bridged(self, limits: LaunchLimits) -> bool:
        """The proxy bridged into the sandbox's own network namespace (see :mod:`..isolation.
        bridge`): at ``restricted`` too, where Landlock's port rule alone would let a script
        reach any address on the proxy's port."""
        return (not limits.network and limits.proxy_port is not None
                and limits.proxy_socket is not None)

    def _own_net(self, limits: LaunchLimits) -> bool:
        """The entry gets a network namespace of its own (what a warm entry must match)."""
        if self.level == "isolated":
            return not self._host_net(limits)
        return self._bridged(limits)

    @staticmethod
    def _nproc(slot: UidSlot | None, limits: LaunchLimits) -> int | None:
        """RLIMIT_NPROC: exact with a slot uid; relative to the host uid's tasks without one
        (see :mod:`.rlimits`); root without a slot would ignore it anyway."""
        if slot is not None:
            return limits.max_processes
        if os.geteuid() == 0:
            return None
        return tasks_of_uid(os.getuid()) + limits.max_processes

    @staticmethod
    def _grant_sockets(socket_dir: str, slot: UidSlot) -> None:
        """The (private, per-execution) socket directory and the sockets bound in it, to
        the slot's uid alone (search on the folder, write to connect): slots share the
        sandbox group, so a group grant would open this socket to every other sandbox.
        The folder is removed with the channel, taking the entries with it."""
        try:
            acl.grant_traverse(socket_dir, slot.gid)
            acl.grant_user(socket_dir, slot.uid, acl.X)
            for name in os.listdir(socket_dir):
                path = os.path.join(socket_dir, name)
                if not os.path.islink(path):
                    acl.grant_user(path, slot.uid, acl.R | acl.W)
        except OSError as exc:
            raise SandboxError(f"cannot grant the sandbox uid access to {socket_dir}: "
                               f"{exc}") from exc

    # -- resources of one entry ---------------------------------------------------------
    def _acquire(self, limits: LaunchLimits, name: str
                 ) -> tuple[UidSlot | None, cgroups.ExecCgroup | None]:
        slot = self.uid_pool.acquire() if self.uid_pool else None
        try:
            # leftovers of a host that crashed while using this slot (first use here, or
            # another process held it since)
            if slot is not None and (slot.take_over(owner_tag()) or slot.uid not in self._swept):
                self.spawner.kill_uid(slot.uid, signal.SIGKILL)
                self._swept.add(slot.uid)
            group = None
            if self._cg_layout is not None:
                group = cgroups.ExecCgroup.create(
                    self._cg_layout, leftovers.cgroup_name(f"{name}-{uuid.uuid4().hex[:8]}"),
                    memory_mb=limits.memory_mb, max_processes=limits.max_processes)
        except BaseException:
            if slot is not None:
                slot.release()
            raise
        return slot, group

    def _make_warm(self, key: tuple[bool, int, bool]) -> WarmEntry:
        """A warm entry for ``key``: (a network namespace of its own, the generation of
        what it may start ahead (see :meth:`_learn_zygote`), for a script: whether it
        starts the interpreter ahead)."""
        own_net, generation, script = key
        limits = self._limits_seen
        slot, group = self._acquire(limits, "warm")
        wid = uuid.uuid4().hex
        try:
            warm: dict[str, Any] = {"level": self.level, "netns": own_net,
                                    "mntns": self._own_view, "recycle": self._recycle,
                                    "cgroup_dirs": list(group.dirs) if group else []}
            if self.level == "isolated":
                # the fixed part of the root is built ahead, with this /tmp size (a launch
                # with another size resizes it)
                os.makedirs(NEW_ROOT, mode=0o755, exist_ok=True)
                warm.update(new_root=NEW_ROOT, tmp_mb=limits.tmp_mb)
            if self._interp_seen:
                warm["landlock"] = self._fixed_rules(self._interp_seen, limits)
            zygote = self._zygote_with(slot, group)
            if (script and zygote is not None and self._own_net(limits) == own_net
                    and generation == self._zygote_generation):
                warm["zygote"] = zygote
            pid = self.spawner.prepare(wid, warm)
        except BaseException:
            self._release(slot, group)
            raise
        return WarmEntry(wid, key, (slot, group), pid, prestarted="zygote" in warm)

    def _learn_zygote(self, spec: LaunchSpec, plan: dict[str, Any], interp: list[str]
                      ) -> None:
        """Remember how to start ``spec``'s interpreter ahead, for the next warm entries;
        only at ``isolated``: before the plan the interpreter sees only the system's and
        its own folders, read-only, and the namespaces. (At ``restricted`` it would start
        in the host's view, where start-up code that a script left in a site directory
        it may write would run before Landlock.) Never again for an interpreter whose
        folders a plan could write: what it runs at start-up is then the sandbox's."""
        argv0 = real_paths((spec.argv[0],))[0]
        if argv0 in self._zygote_refused or _overlaps(list(spec.writable_paths), interp):
            if argv0 not in self._zygote_refused:
                self._zygote_refused.add(argv0)
                self._zygote_generation += 1
            self._zygote_seen = None
            return
        self._zygote_seen = _zygote_for(plan, interp)
        if self._zygote_seen is not None:
            # forked from a template, whose start-up runs as root: only the interpreter
            # the host itself runs (its start-up code is the host's already)
            self._zygote_seen["fork"] = (
                self._fork_server and self.root
                and os.path.abspath(spec.argv[0]) == os.path.abspath(sys.executable))

    def _zygote_with(self, slot: UidSlot | None, group: cgroups.ExecCgroup | None
                     ) -> dict[str, Any] | None:
        """The interpreter to start ahead (:meth:`_learn_zygote`), for an entry with ``slot``;
        None when nothing was learnt, or the entry has neither a slot uid nor a cgroup (not
        where the run token finds an execution's processes: a process forked from a
        pre-started interpreter lacks it)."""
        if self._zygote_seen is None or (slot is None and group is None):
            return None
        return {**self._zygote_seen, "uid": slot.uid if slot else None,
                "gid": slot.gid if slot else None}

    def _cold_fork(self, script: bool, slot: UidSlot | None,
                   group: cgroups.ExecCgroup | None, interp: list[str], limits: LaunchLimits
                   ) -> dict[str, Any] | None:
        """What a cold entry needs to fork a script's interpreter from the template, as a
        warm entry would (the spawner checks that it can serve the plan): the zygote just
        learnt from this launch, for its slot, and the fixed Landlock rules."""
        zygote = self._zygote_with(slot, group)
        if not script or zygote is None or not zygote.get("fork"):
            return None
        return {"zygote": zygote, "landlock": self._fixed_rules(interp, limits)}

    def _discard_warm(self, entry: WarmEntry) -> None:
        slot, group = entry.resources
        with contextlib.suppress(SandboxError):
            self.spawner.discard(entry.id)
        self._release(slot, group)

    def _release(self, slot: UidSlot | None, group: cgroups.ExecCgroup | None) -> None:
        if group is not None:
            group.close()  # kills what is in it, then removes it
        if slot is not None:
            ipc.remove_owned(slot.uid)  # before the uid is reused (no IPC namespace: .ipc)
            slot.release()

    def retire(self, slot: UidSlot | None, *, confirmed_dead: bool, grants: list[str],
               group: cgroups.ExecCgroup | None, tmp: str | None, grace: float) -> None:
        """Take back what a closed child held. The uid slot returns to the pool only when
        every process of the execution was confirmed dead (else it is quarantined: never
        handed out again); at ``restricted`` the grants are revoked now (the execution's
        paths must not stay open to the sandbox group); the cgroup (after ``grace``) and the
        private tmp are removed on the background thread, before :meth:`close` returns. At
        ``isolated`` the grants go there too: a sandbox reaches no host path but the binds
        of its own mount namespace, so they open nothing to any other one."""
        if slot is not None:
            if confirmed_dead:
                ipc.remove_owned(slot.uid)  # before the uid is reused (see .ipc)
                slot.release()
            else:  # something of it may still run as that uid: never reuse the slot
                log.warning("uid %d quarantined: its processes were not confirmed dead",
                            slot.uid)
                self._quarantined.append(slot)
        if self.level != "isolated":
            self._grants.release(grants)
            grants = []
        self._background.submit(lambda: self._teardown(group, tmp, grace, grants))

    def _teardown(self, group: cgroups.ExecCgroup | None, tmp: str | None,
                  grace: float = 0.0, grants: list[str] | None = None) -> None:
        """What a closed child leaves to do; runs on the background thread."""
        if grants:
            self._grants.release(grants)
        if group is not None:
            group.close(grace)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def _grant_interpreter(self, interp: list[str]) -> None:
        """Interpreter paths: granted once, held until the launcher closes."""
        for path in interp:
            if path not in self._lasting:
                self._lasting[path] = self._grants.add([(path, False)])

    # -- launch -----------------------------------------------------------------------
    def launch(self, spec: LaunchSpec) -> SandboxChild:
        if self._closed:
            raise SandboxError("launcher is closed")
        if not spec.argv or not os.path.isabs(spec.argv[0]):
            raise SandboxError(f"the child's interpreter must be an absolute path, got "
                               f"{spec.argv[0] if spec.argv else None!r}")
        # an entry made before what it starts ahead was last refused is never used; one
        # that starts a script's interpreter ahead is kept for a script (a terminal
        # command would leave that interpreter unused)
        spec = _resolve(spec)
        script = spec.prestart and self.level == "isolated"
        key = (self._own_net(spec.limits), self._zygote_generation, script)
        self._limits_seen = spec.limits
        warm = self._pool.take(key)
        if warm is None and self.level == "isolated":
            os.makedirs(NEW_ROOT, mode=0o755, exist_ok=True)  # a warm entry's is made
        if self._own_view:  # where the masks' tmpfs goes (see mounts.attach_over)
            os.makedirs(mounts.MASK_DIR, mode=0o755, exist_ok=True)
        slot: UidSlot | None = None
        group: cgroups.ExecCgroup | None = None
        grants: list[str] = []
        tmp: str | None = None
        fds: list[int] = []
        try:
            if warm is not None:
                slot, group = warm.resources
                if group is not None:
                    group.set_limits(spec.limits.memory_mb, spec.limits.max_processes)
            else:
                slot, group = self._acquire(spec.limits, spec.run_token[:16])
            if self.level == "isolated":
                tmp_path = "/tmp"
            else:
                tmp = leftovers.make_tmp()
                tmp_path = tmp
            interp = _interpreter_paths(spec.argv[0])
            self._interp_seen = interp
            owned = self._owned(spec, slot)
            if slot is not None:
                self._grant_interpreter(interp)
                # a writable root shown id-mapped to its owner is the sandbox's own there:
                # only the folders on the way to it need a grant (they stay, see .acl)
                for path in owned:  # resolved (see _resolve): never resolved again
                    acl.grant_traverse(path, slot.gid)

                def theirs(p: str) -> bool:  # not in a root shown as its owner's
                    return not any(p == r or mounts.beneath(p, r) for r in owned)

                grants = self._grants.add([(p, False) for p in spec.readable_paths
                                           if theirs(os.path.realpath(p))])
                wanted = [(spec.cwd, False), *((p, True) for p in spec.writable_paths)]
                if tmp:
                    wanted.append((tmp, True))
                grants += self._grants.add([(p, w) for p, w in wanted if theirs(p)],
                                           resolved=True)
                if spec.socket_dir:
                    # to this slot's uid only: another sandbox must not reach the socket
                    self._grant_sockets(spec.socket_dir, slot)
                if spec.limits.proxy_socket and self._bridged(spec.limits):
                    self._grant_sockets(os.path.dirname(spec.limits.proxy_socket), slot)
            plan = self._plan(spec, slot, group, tmp_path, interp, owned)
            if self.level == "isolated" and spec.prestart:
                self._learn_zygote(spec, plan, interp)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            st_r, st_w = os.pipe()
            fds = [out_r, out_w, err_r, err_w, st_r, st_w]
            pid = self.spawner.spawn(plan, [out_w, err_w, st_w, *spec.pass_fds],
                                     warm=warm.id if warm is not None else None,
                                     cold=self._cold_fork(script, slot, group, interp,
                                                          spec.limits))
        except BaseException as exc:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if slot is not None:
                # whatever the entry got to start runs as the slot uid, in the cgroup
                with contextlib.suppress(SandboxError):
                    self.spawner.kill_uid(slot.uid, signal.SIGKILL)
            self._release(slot, group)
            self._grants.release(grants)
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, OSError):
                # a path of the launch that changed meanwhile (realpath's readlink, a
                # folder gone): the caller's error, not the engine's breakage
                raise SandboxError(f"cannot launch the sandbox: {exc}") from exc
            raise
        for fd in (out_w, err_w, st_w):
            os.close(fd)
        self._pool.refill((key[0], self._zygote_generation, script))
        return SandboxChild(self, pid, open(out_r, "rb"), open(err_r, "rb"), st_r,
                            slot=slot, group=group, grants=grants, tmpdir=tmp,
                            run_token=spec.run_token)

    def close(self) -> None:
        """Discard warm entries, finish deferred teardown, stop the spawner, revoke the
        interpreter grants. Idempotent; children should be closed first."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        self._background.close()
        self.spawner.close()
        for grants in self._lasting.values():
            self._grants.release(grants)
        self._lasting.clear()

class RestrictedLauncher(SandboxLauncher):
    """Level ``restricted``: slot uid, no-new-privs, rlimits, Landlock, seccomp (and the
    execution's cgroup where available); no namespaces."""

    level = "restricted"


class IsolatedLauncher(SandboxLauncher):
    """Level ``isolated``: ``restricted`` plus mount/pid/net/ipc/uts namespaces, a minimal
    read-only root with a size-limited private /tmp, and a cgroup where available."""

    level = "isolated"
