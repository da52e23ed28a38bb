"""Cheap start-up probes of every isolation layer, each with a reason when it is missing.

:func:`detect` runs them once per process (cached) and picks the highest level this host
supports. Probes that could disturb a threaded host (forking to try ``unshare``) run in a
short-lived child interpreter instead.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from execengine.isolation import cgroups, landlock, seccomp

LEVELS = ("none", "restricted", "isolated")


@dataclass(frozen=True)
class Layer:
    name: str
    available: bool
    detail: str  # what was found, or why it is missing


@dataclass(frozen=True)
class IsolationReport:
    layers: tuple[Layer, ...]
    levels: dict[str, bool] = field(default_factory=dict)
    #: why each unavailable level is unavailable
    reasons: dict[str, str] = field(default_factory=dict)
    root: bool = False

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def has(self, name: str) -> bool:
        return self.layer(name).available

    @property
    def best(self) -> str:
        return max((lv for lv in LEVELS if self.levels.get(lv)), key=LEVELS.index)

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "auto": self.best, "levels": self.levels,
                "reasons": self.reasons, "layers": [asdict(x) for x in self.layers]}


def probe_landlock() -> Layer:
    if sys.platform != "linux":
        return Layer("landlock", False, "Landlock is Linux-only")

    abi = landlock.abi_version()
    if abi < 1:
        return Layer("landlock", False, "kernel without Landlock, or it is disabled (lsm=)")
    extra = []
    if abi < 4:
        extra.append("no TCP rules before ABI 4 (seccomp covers sockets)")
    if abi < 6:
        extra.append("no abstract-socket/signal scoping before ABI 6")
    return Layer("landlock", True, f"ABI {abi}" + (": " + "; ".join(extra) if extra else ""))


def probe_seccomp() -> Layer:
    if sys.platform != "linux":
        return Layer("seccomp", False, "seccomp is Linux-only")
    try:

        sc = seccomp.load_module()
        seccomp.build_filter()
    except ImportError as exc:
        return Layer("seccomp", False, f"pyseccomp is not installed ({exc})")
    except (OSError, RuntimeError, AttributeError) as exc:
        return Layer("seccomp", False, f"libseccomp is not usable ({exc})")
    return Layer("seccomp", True, f"libseccomp API {sc.get_api()}")


_NS_PROBE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
flags = 0x00020000 | 0x20000000 | 0x40000000 | 0x08000000 | 0x04000000
if libc.unshare(flags) != 0:
    print("unshare:", os.strerror(ctypes.get_errno())); sys.exit(1)
pid = os.fork()
if pid == 0:
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    if libc.mount(None, b"/", None, (1 << 18) | 16384, None) != 0:
        print("mount:", os.strerror(ctypes.get_errno())); os._exit(1)
    if libc.mount(b"proc", sys.argv[1].encode(), b"proc", 0, None) != 0:
        print("mount proc:", os.strerror(ctypes.get_errno())); os._exit(1)
    os._exit(0)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
"""


def probe_namespaces() -> Layer:
    if sys.platform != "linux":
        return Layer("namespaces", False, "namespaces are Linux-only")
    if os.geteuid() != 0:
        return Layer("namespaces", False,
                     "needs root (entering namespaces through a user namespace is not "
                     "implemented)")
    target = f"/run/execengine/probe-{uuid.uuid4().hex[:8]}"
    try:
        os.makedirs(target, mode=0o700)
    except OSError as exc:
        return Layer("namespaces", False, f"cannot create {target}: {exc}")
    try:
        res = subprocess.run([sys.executable, "-I", "-S", "-c", _NS_PROBE, target],
                             capture_output=True, text=True, timeout=10, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Layer("namespaces", False, f"probe failed: {exc}")
    finally:
        os.rmdir(target)
    if res.returncode != 0:
        return Layer("namespaces", False, (res.stdout or res.stderr).strip()[-300:])
    return Layer("namespaces", True, "mount, pid, net, ipc, uts; proc mountable")


def probe_cgroups() -> Layer:
    if sys.platform != "linux":
        return Layer("cgroups", False, "cgroups are Linux-only")

    try:
        layout = cgroups.discover()
    except OSError as exc:
        return Layer("cgroups", False, str(exc))
    if not layout.can_kill or not layout.can_limit:
        return Layer("cgroups", False, f"memory/pids controllers or kill not usable ({layout})")
    try:
        group = cgroups.ExecCgroup.create(layout, "probe-" + uuid.uuid4().hex[:8],
                                          memory_mb=64, max_processes=8)
    except OSError as exc:
        return Layer("cgroups", False, f"cannot create a child cgroup: {exc}")
    group.close()
    kind = "v2" if layout.v2_controllers else ("hybrid v1+v2" if layout.v2_parent else "v1")
    return Layer("cgroups", True, f"{kind}: memory, pids, kill")


def probe_uid_drop() -> Layer:
    if not hasattr(os, "setresuid"):
        return Layer("uid_drop", False, "no setresuid on this platform")
    if os.geteuid() != 0:
        return Layer("uid_drop", True, "host is not root: scripts run as the host's uid "
                                       "(nothing to drop)")
    return Layer("uid_drop", True, "one unprivileged uid per concurrent sandbox")


def probe_rlimits() -> Layer:
    try:
        import resource  # noqa: F401
    except ImportError:
        return Layer("rlimits", False, "no resource module")
    nproc = ("NPROC per sandbox uid" if os.geteuid() == 0
             else "NPROC relative to the host uid's tasks")
    return Layer("rlimits", True, f"DATA, CPU, FSIZE, NOFILE, CORE; {nproc}")


def _compute() -> IsolationReport:
    layers = (probe_rlimits(), probe_uid_drop(), probe_landlock(), probe_seccomp(),
              probe_namespaces(), probe_cgroups())
    have = {x.name: x.available for x in layers}
    by = {x.name: x for x in layers}
    levels = {"none": os.name == "posix"}
    reasons: dict[str, str] = {}
    need_r = [n for n in ("rlimits", "uid_drop", "landlock", "seccomp") if not have[n]]
    levels["restricted"] = not need_r
    if need_r:
        reasons["restricted"] = "; ".join(f"{n}: {by[n].detail}" for n in need_r)
    need_i = need_r + ([] if have["namespaces"] else ["namespaces"])
    levels["isolated"] = not need_i
    if need_i:
        reasons["isolated"] = "; ".join(f"{n}: {by[n].detail}" for n in need_i)
    return IsolationReport(layers, levels, reasons, root=os.geteuid() == 0)


@functools.lru_cache(maxsize=1)
def detect() -> IsolationReport:
    """What this host supports (probed once per process)."""
    return _compute()
