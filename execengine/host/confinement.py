"""What confines an execution beyond its policy's rules: the working directories no sandbox
is given, and the allow-list proxy that enforces the network rule
(:meth:`execengine.host.base.Host.execution_policy`).

Both a one-shot execution and a session's kernel hold one
:class:`~execengine.confine.policy.ExecutionPolicy` for the script and every tool call it
makes; with ``network: allowlist`` a host-side proxy serves that execution on the loopback
and on a Unix socket in a private folder (bridged into an ``isolated`` sandbox's own network
namespace).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil

from execengine.confine.beneath import is_beneath
from execengine.confine.domains import DomainPolicy
from execengine.confine.policy import ExecutionPolicy
from execengine.confine.proxy import AllowListProxy
from execengine.confine.workdir import refuse_home
from execengine.errors import SandboxError
from execengine.fileops.paths import PathGuard
from execengine.rpc.channel import make_socket_dir

#: the levels whose sandbox is granted access to its working directory
CONFINING_LEVELS = frozenset({"restricted", "isolated"})
#: folders a sandbox is never given as its working directory: the engine would grant the
#: sandbox's uid write access to the folder itself (an ACL for the execution), and with
#: ``/etc`` that is ``/etc/ld.so.preload``, with ``/`` renaming ``/usr``
SYSTEM_FOLDERS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                  "/home", "/opt", "/proc", "/run", "/sbin", "/srv", "/sys", "/usr", "/var")
#: ... nor anything beneath these (under /var and /run: what root runs or trusts later, a
#: red team's working directory /var/lib/dpkg/info let the script, acting there as root,
#: rewrite the maintainer scripts the next apt run executes; a deny-list: other folders
#: root's services read stay the caller's to keep out of a sandbox's reach)
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                "/proc", "/sbin", "/sys", "/usr", "/run", "/var/spool", "/var/lib/dpkg",
                "/var/lib/apt", "/var/lib/rpm", "/var/lib/dnf", "/var/lib/yum",
                "/var/lib/pacman", "/var/lib/systemd", "/var/lib/polkit-1",
                "/var/cache/apt", "/var/cache/dnf", "/var/cache/yum")


def check_workdir(cwd: str, policy: ExecutionPolicy, guard: PathGuard | None = None) -> None:
    """Refuse a sandboxed execution's working directory that is a system folder or lies
    in a denied path (a batch task's ``cwd`` or an API caller's may be anything).
    ``guard``: the policy's denied paths as the file tools check them (built from
    ``policy`` when not given)."""
    if policy.level not in CONFINING_LEVELS:
        return  # the script runs with the caller's own uid: nothing granted
    real = os.path.realpath(cwd)
    if real in SYSTEM_FOLDERS or any(is_beneath(real, t) for t in SYSTEM_TREES):
        raise SandboxError(f"refusing {cwd!r} as a sandbox's working directory: it is a "
                           "system folder (the sandbox would be granted write access to it)")
    home = refuse_home(cwd, policy.allow_home)
    if home is not None:
        raise SandboxError(home)
    denied = (guard or PathGuard(policy.denied_paths)).reason(real)
    if denied is not None:
        raise SandboxError(f"refusing {cwd!r} as a sandbox's working directory: it lies "
                           f"in a denied path ({denied})")


def start_proxy(policy: ExecutionPolicy, stack: contextlib.ExitStack) -> ExecutionPolicy:
    """``policy`` (``network: allowlist``) with the port and socket of its proxy, started
    now and closed (its folder removed) with ``stack``."""
    proxy_dir = make_socket_dir()
    stack.callback(shutil.rmtree, proxy_dir, True)
    proxy = stack.enter_context(AllowListProxy(
        DomainPolicy.of(policy.allowed_domains, policy.denied_domains),
        unix_path=os.path.join(proxy_dir, "proxy.sock")))
    return dataclasses.replace(policy, proxy_port=proxy.port, proxy_socket=proxy.unix_path)
