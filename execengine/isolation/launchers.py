"""Launchers for levels ``restricted`` and ``isolated``, behind the launcher seam.

Both hand a *plan* (plain JSON) to the single-threaded spawner process, which forks and
enters the sandbox (:mod:`.entry`). The host side prepares what needs host privileges and
outlives the child: a uid slot, ACL grants so that uid can reach the interpreter, the
staging/socket/working directories, a private tmp (``restricted``) and a cgroup.

Kill-all, strongest first: the execution's cgroup (``cgroup.kill``); at ``isolated`` the
pid namespace (killing the holder kills its init, and with it every process in the
namespace); at ``restricted`` as root, every process of the slot uid (``kill(-1)`` from a
helper running as that uid). A non-root ``restricted`` host without cgroups falls back to
the process group plus the descendants still attached to the main process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import tempfile
import threading
import time
import uuid
from typing import IO, Any

from execengine.errors import SandboxError
from execengine.isolation import acl, cgroups, mounts
from execengine.isolation.detect import IsolationReport, detect
from execengine.isolation.rlimits import Rlimits
from execengine.isolation.spawner import Spawner
from execengine.isolation.uids import UidPool, UidSlot
from execengine.launch.base import Child, Launcher, LaunchSpec

log = logging.getLogger(__name__)

RUN_DIR = "/run/execengine"
NEW_ROOT = RUN_DIR + "/root"
KILL_WAIT = 3.0
DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
DEVICES_RO = ("/dev/random", "/dev/urandom")


class _Grants:
    """Reference-counted ACL grants to the sandbox group (thread-safe)."""

    def __init__(self, gid: int) -> None:
        self.gid = gid
        self._lock = threading.Lock()
        self._count: dict[str, int] = {}

    def add(self, paths: list[tuple[str, bool]]) -> list[str]:
        taken: list[str] = []
        with self._lock:
            for path, write in paths:
                if not os.path.exists(path):
                    continue
                try:
                    acl.grant_traverse(path, self.gid)
                    changed = acl.grant(path, self.gid, write=write)
                except OSError as exc:
                    raise SandboxError(f"cannot grant the sandbox uid access to {path}: "
                                       f"{exc}") from exc
                if changed or path in self._count:
                    self._count[path] = self._count.get(path, 0) + 1
                    taken.append(path)
        return taken

    def release(self, paths: list[str]) -> None:
        with self._lock:
            for path in paths:
                n = self._count.get(path, 0) - 1
                if n > 0:
                    self._count[path] = n
                    continue
                self._count.pop(path, None)
                with contextlib.suppress(OSError):
                    acl.revoke(path, self.gid)


def _interpreter_paths(argv0: str) -> list[str]:
    real = os.path.realpath(argv0)
    out = [os.path.dirname(os.path.dirname(os.path.abspath(argv0)))]
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
        self._closed = False
        self._lock = threading.Lock()

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
                ready, _, _ = select.select([self._status_fd], [], [], left)
                if not ready:
                    return None
                data = os.read(self._status_fd, 64)
                if data:
                    self._status_buf += data
                    continue
                os.close(self._status_fd)
                self._status_fd = None
                text = self._status_buf.decode().strip()
                self.returncode = (os.waitstatus_to_exitcode(int(text)) if text
                                   else -signal.SIGKILL)
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
            if self.returncode is None:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL if sig == signal.SIGKILL else sig)
            return
        if self._slot is not None and (self._group is None or sig != signal.SIGKILL):
            self._launcher.spawner.kill_uid(self._slot.uid, sig)
        elif self._group is None:
            # non-root host without cgroups: the group, then whatever still carries the
            # run token (descendants that left the session; best effort)
            if self.returncode is None:
                with contextlib.suppress(OSError):
                    os.killpg(self.pid, sig)
            from execengine.launch.local import processes_with_token

            for proc in processes_with_token(self.run_token):
                with contextlib.suppress(Exception):
                    proc.send_signal(sig)

    def terminate(self) -> None:
        # at isolated the holder ignores SIGTERM; its init forwards it to the namespace
        if (self._launcher.level == "isolated" and self.returncode is None
                and self._group is None):
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGTERM)
        self._signal_all(signal.SIGTERM)

    def kill(self) -> None:
        if self._group is not None:
            self._group.kill(KILL_WAIT)
        self._signal_all(signal.SIGKILL)
        if self.wait(KILL_WAIT) is None:
            log.warning("sandboxed child %d not reaped after SIGKILL", self.pid)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.kill()
        finally:
            for pipe in (self.stdout, self.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()
            with self._lock:
                if self._status_fd is not None:
                    os.close(self._status_fd)
                    self._status_fd = None
            if self._group is not None:
                self._group.close()
            self._launcher._grants.release(self._grants)
            if self._slot is not None:
                self._slot.release()
            if self._tmpdir is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)


class SandboxLauncher(Launcher):
    """Common machinery of :class:`RestrictedLauncher` and :class:`IsolatedLauncher`."""

    level = "restricted"

    def __init__(self, report: IsolationReport | None = None, *,
                 use_cgroups: bool | None = None, uid_pool: UidPool | None = None) -> None:
        self.report = report or detect()
        if not self.report.levels.get(self.level):
            from execengine.errors import IsolationError

            raise IsolationError(f"isolation level {self.level!r} is not available here: "
                                 f"{self.report.reasons.get(self.level, 'unknown reason')}")
        self.root = os.geteuid() == 0
        self.uid_pool = uid_pool or (UidPool() if self.root else None)
        self._grants = _Grants(self.uid_pool.gid if self.uid_pool else -1)
        if use_cgroups is None:
            # restricted kills by slot uid and limits by rlimits; a cgroup would add a
            # migration (an RCU grace period, 1-20 ms here) to every launch
            use_cgroups = self.level == "isolated" or not self.root
        cg = self.report.has("cgroups") and use_cgroups
        self._cg_layout = cgroups.discover() if cg else None
        self.spawner = Spawner()
        self._swept: set[int] = set()
        self._closed = False

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

    def _plan(self, spec: LaunchSpec, slot: UidSlot | None, group: cgroups.ExecCgroup | None,
              tmp: str, interp: list[str]) -> dict[str, Any]:
        limits = spec.limits
        read, write = self._landlock_paths(spec, tmp, interp)
        if self.level == "isolated":
            read += ["/proc", "/dev/shm"]
            write += ["/dev/shm"]
        env = dict(spec.env)
        for name in ("TMPDIR", "TMP", "TEMP"):
            env[name] = tmp
        network = bool(limits.network) and self.level == "isolated"
        plan: dict[str, Any] = {
            "level": self.level,
            "argv": list(spec.argv),
            "env": env,
            "cwd": spec.cwd,
            "uid": slot.uid if slot else None,
            "gid": slot.gid if slot else None,
            "rlimits": Rlimits.from_limits(limits, nproc=slot is not None).pairs(),
            "landlock": {"read": read, "write": write, "deny_tcp": not network,
                         "scope": True},
            "seccomp": {"allow_network": network},
            "cgroup_dirs": list(group.dirs) if group else [],
            "network": network,
            "fd_targets": list(spec.pass_fds),
        }
        if self.level == "isolated":
            plan["mounts"] = {
                "new_root": NEW_ROOT,
                "read": [*interp, *spec.readable_paths,
                         *([] if spec.cwd in spec.writable_paths else [spec.cwd])],
                "write": list(spec.writable_paths),
                "socket_dir": spec.socket_dir,
                "tmp_mb": limits.tmp_mb,
            }
            if slot is not None:
                # the working directory's owner appears as the slot uid in the sandbox
                st = os.stat(spec.cwd)
                plan["idmap"] = [st.st_uid, st.st_gid]
        return plan

    @staticmethod
    def _grant_sockets(socket_dir: str, gid: int) -> None:
        """Sockets already bound in the (private, per-execution) socket directory: the
        slot uid needs write permission to connect. Later ones inherit the default ACL."""
        try:
            for name in os.listdir(socket_dir):
                path = os.path.join(socket_dir, name)
                if not os.path.islink(path):
                    acl.grant(path, gid, write=True)
        except OSError as exc:
            raise SandboxError(f"cannot grant the sandbox uid access to {socket_dir}: "
                               f"{exc}") from exc

    # -- launch -----------------------------------------------------------------------
    def launch(self, spec: LaunchSpec) -> SandboxChild:
        if self._closed:
            raise SandboxError("launcher is closed")
        if not spec.argv or not os.path.isabs(spec.argv[0]):
            raise SandboxError(f"the child's interpreter must be an absolute path, got "
                               f"{spec.argv[0] if spec.argv else None!r}")
        os.makedirs(NEW_ROOT, mode=0o755, exist_ok=True)
        slot = self.uid_pool.acquire() if self.uid_pool else None
        group: cgroups.ExecCgroup | None = None
        grants: list[str] = []
        tmp: str | None = None
        fds: list[int] = []
        try:
            if slot is not None and slot.uid not in self._swept:
                # leftovers of a host that crashed while using this slot
                self.spawner.kill_uid(slot.uid, signal.SIGKILL)
                self._swept.add(slot.uid)
            if self._cg_layout is not None:
                group = cgroups.ExecCgroup.create(
                    self._cg_layout, f"{spec.run_token[:16]}-{uuid.uuid4().hex[:8]}",
                    memory_mb=spec.limits.memory_mb, max_processes=spec.limits.max_processes)
            if self.level == "isolated":
                tmp = None
                tmp_path = "/tmp"
            else:
                tmp = tempfile.mkdtemp(prefix="execengine-tmp-")
                tmp_path = tmp
            interp = _interpreter_paths(spec.argv[0])
            if slot is not None:
                wanted = [(p, False) for p in (*interp, *spec.readable_paths, spec.cwd)]
                wanted += [(p, True) for p in spec.writable_paths]
                if spec.socket_dir:
                    wanted.append((spec.socket_dir, True))
                if tmp:
                    wanted.append((tmp, True))
                grants = self._grants.add(wanted)
                if spec.socket_dir:
                    self._grant_sockets(spec.socket_dir, slot.gid)
            plan = self._plan(spec, slot, group, tmp_path, interp)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            st_r, st_w = os.pipe()
            fds = [out_r, out_w, err_r, err_w, st_r, st_w]
            pid = self.spawner.spawn(plan, [out_w, err_w, st_w, *spec.pass_fds])
        except BaseException:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if group is not None:
                group.close()
            self._grants.release(grants)
            if slot is not None:
                with contextlib.suppress(SandboxError):
                    self.spawner.kill_uid(slot.uid, signal.SIGKILL)
                slot.release()
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        for fd in (out_w, err_w, st_w):
            os.close(fd)
        return SandboxChild(self, pid, open(out_r, "rb"), open(err_r, "rb"), st_r,
                            slot=slot, group=group, grants=grants, tmpdir=tmp,
                            run_token=spec.run_token)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.spawner.close()

    def __enter__(self) -> SandboxLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RestrictedLauncher(SandboxLauncher):
    """Level ``restricted``: slot uid, no-new-privs, rlimits, Landlock, seccomp (and the
    execution's cgroup where available); no namespaces."""

    level = "restricted"


class IsolatedLauncher(SandboxLauncher):
    """Level ``isolated``: ``restricted`` plus mount/pid/net/ipc/uts namespaces, a minimal
    read-only root with a size-limited private /tmp, and a cgroup where available."""

    level = "isolated"
