"""The execution policy: what a script *and every tool call made on its behalf* may reach.

One :class:`ExecutionPolicy` is built per execution (:meth:`ExecutionPolicy.for_execution`)
from the ``policy`` section of the configuration and the execution's working directory and
isolation level. The engine hands it to the script's launcher (writable paths, network)
and, through the call context, to every tool call the script makes:

* writable roots: the working directory (and the staging directory), plus
  ``policy.writable_roots``;
* readable roots: the writable roots plus ``policy.readable_roots`` (system folders by
  default); outside the writable roots only world-readable files, in folders the
  sandbox's uid may search;
* always denied to the tools, read or write: ``files.denied_paths``, the config file, and
  the credentials in :data:`ALWAYS_DENIED` (masked from the script and its commands at
  ``isolated``; at ``restricted`` only its uid's permissions keep them out: see
  ``docs/confinement.md``);
* network: ``off``, ``allowlist`` (domains through the host's proxy) or ``on``;
* whether tools may leave the roots (``policy.tools_leave_roots``, never by default).

At level ``none`` the script itself is unconfined, so by default its tool calls are too
(``policy.confine_at_none`` changes that); at ``restricted`` and ``isolated`` they are
confined. The agent's own calls follow ``policy.agent_calls`` (unconfined by default).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from execengine.confine.beneath import is_beneath
from execengine.isolation.detect import detect
from execengine.isolation.owner import owned_roots
from execengine.workdirs import recent, where

if TYPE_CHECKING:
    from execengine.config import Config
    from execengine.context import ToolContext

#: never readable or writable by a confined tool call, whatever the configuration says
ALWAYS_DENIED = (
    "~/.execengine", "~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud",
    "~/.netrc", "~/.docker/config.json", "~/.kube", "~/.pypirc", "~/.git-credentials",
    "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh",
    "/etc/ssl/private", "/root/.ssh",
)
NETWORK_MODES = ("off", "allowlist", "on")
#: below each writable root: never written by a confined call, read-only at ``isolated``.
#: All of ``.git``: git takes its config and hooks from more places in it than
#: ``config`` and ``hooks/`` (``commondir``, ``config.worktree``; a worktree's ``.git``
#: file names the folder), and any of them runs code in the host's next git command
GIT = ".git"
PROTECTED_IN_ROOTS = ((GIT,),)


def submodule_git_files(root: str) -> tuple[str, ...]:
    """What of the submodules of the repository at ``root`` git would run config from:
    each one's ``.git`` file, where git says its work tree is (``core.worktree`` in
    ``.git/modules/<name>/config``, nested submodules too), and for each submodule the
    index holds (a gitlink) its ``.git`` if there is one, else its (empty) folder, where
    a ``.git`` of the script's own would be taken for it (``git status`` enters a
    populated submodule with ``GIT_DIR`` set, so git's ownership check does not apply).
    What ``.git`` says (protected itself), not ``.gitmodules`` (a file of the work tree).
    As of at most a second ago."""
    def build() -> tuple[str, ...]:
        found = _submodules(root)
        for rel in gitlinks(os.path.join(root, GIT, "index")):
            folder = os.path.normpath(os.path.join(root, rel))
            if not is_beneath(folder, root):
                continue
            dot_git = os.path.join(folder, GIT)
            found.append(dot_git if os.path.lexists(dot_git) else folder)
        return tuple(dict.fromkeys(found))

    return recent(("submodules", root), build)


#: (index path) -> (mtime_ns, size, gitlinks): an index is read again only when it changed
_GITLINKS: dict[str, tuple[int, int, tuple[str, ...]]] = {}
GITLINK_MODE = 0o160000
MAX_INDEX_BYTES = 256 << 20


def gitlinks(index: str, limit: int = 256) -> tuple[str, ...]:
    """The paths of the gitlinks (submodules) a git index lists, relative to its work
    tree (index versions 2-4; nothing for a missing or unreadable one)."""
    try:
        st = os.stat(index)
    except OSError:
        return ()
    hit = _GITLINKS.get(index)
    if hit is not None and hit[:2] == (st.st_mtime_ns, st.st_size):
        return hit[2]
    found: tuple[str, ...] = ()
    if st.st_size <= MAX_INDEX_BYTES:
        try:
            with open(index, "rb") as fh:
                found = tuple(_parse_gitlinks(fh.read(), limit, _oid_length(index)))
        except (OSError, ValueError, IndexError):
            found = ()
    if len(_GITLINKS) > 64:
        _GITLINKS.clear()
    _GITLINKS[index] = (st.st_mtime_ns, st.st_size, found)
    return found


def _parse_gitlinks(data: bytes, limit: int, oid: int = 20) -> list[str]:
    """``oid``: the object ids' length, 20 (SHA-1) or 32 (SHA-256)."""
    if data[:4] != b"DIRC":
        raise ValueError("not a git index")
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        raise ValueError(f"index version {version}")
    out: list[str] = []
    pos, previous = 12, b""
    for _ in range(count):
        start = pos
        mode = int.from_bytes(data[pos + 24:pos + 28], "big")
        pos += 40 + oid
        flags = int.from_bytes(data[pos:pos + 2], "big")
        pos += 2
        if version >= 3 and flags & 0x4000:
            pos += 2
        if version == 4:
            strip, pos = _varint(data, pos)
            end = data.index(b"\0", pos)
            name = previous[:len(previous) - strip] + data[pos:end]
            pos = end + 1
        else:
            end = data.index(b"\0", pos)
            name = data[pos:end]
            pos = start + ((end - start) // 8 + 1) * 8
        previous = name
        if mode == GITLINK_MODE:
            out.append(os.fsdecode(name))
            if len(out) >= limit:
                break
    return out


def _oid_length(index: str) -> int:
    """32 for a repository of SHA-256 object ids (``extensions.objectFormat``), else 20."""
    try:
        with open(os.path.join(os.path.dirname(index), "config"), "rb") as fh:
            text = fh.read(1 << 16).lower().replace(b" ", b"").replace(b"\t", b"")
    except OSError:
        return 20
    return 32 if b"objectformat=sha256" in text else 20


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The offset encoding of index version 4 (as in packs' deltas)."""
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos


def _submodules(root: str, limit: int = 256) -> list[str]:
    out: list[str] = []
    folders = [os.path.join(root, GIT, "modules")]
    while folders and len(out) < limit and len(folders) < 4 * limit:
        folder = folders.pop()
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names[:limit - len(out)]:
            gitdir = os.path.join(folder, name)
            tree = _worktree_of(os.path.join(gitdir, "config"))
            if tree is not None:
                out.append(os.path.normpath(os.path.join(gitdir, tree, GIT)))
            # a name with slashes is a path below modules/; a submodule's own are below it
            folders.append(os.path.join(gitdir, "modules") if tree is not None else gitdir)
    return out


def _worktree_of(config: str) -> str | None:
    """``core.worktree`` of a git config file (None: no such file or setting)."""
    try:
        with open(config, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 16)
    except OSError:
        return None
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip().lower() == "worktree":
            return value.strip().strip('"') or None
    return None


def _real(paths: Iterable[str]) -> tuple[str, ...]:
    """Each path absolute, and also fully resolved when that differs (a path argument
    is matched lexically, an open file by its real location)."""
    out: list[str] = []
    for p in paths:
        if p:
            absolute = os.path.abspath(os.path.expanduser(p))
            out += [absolute, os.path.realpath(absolute)]
    return tuple(dict.fromkeys(out))


def _real_fixed(paths: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`_real` of a list of the configuration (the same every execution), as of at
    most a second ago (see :func:`execengine.workdirs.recent`)."""
    return recent(("policy", paths, where()), lambda: _real(paths))


@dataclass(frozen=True)
class ExecutionPolicy:
    """What one execution may reach. Paths are absolute and fully resolved."""

    level: str = "none"
    #: tool calls are confined to the roots (False: today's unconfined behaviour)
    confined: bool = False
    writable_roots: tuple[str, ...] = ()
    readable_roots: tuple[str, ...] = ()
    denied_paths: tuple[str, ...] = ()
    network: str = "off"
    allowed_domains: tuple[str, ...] = ()
    denied_domains: tuple[str, ...] = ()
    #: the working directory commands and relative paths start from
    cwd: str = "/"
    #: the port of the allow-list proxy on the host's loopback (``network: allowlist``)
    proxy_port: int | None = None
    #: the same proxy's Unix socket (bridged into an ``isolated`` sandbox's namespace)
    proxy_socket: str | None = None
    #: inside the writable roots but never written: files that run later outside the
    #: sandbox (the config file kept there, ``.git/hooks``, ``.git/config``), and
    #: ``policy.protected_paths`` (a batch's results file, say)
    protected: tuple[str, ...] = ()
    #: the script runs as a sandbox uid other than the host's (a root host at
    #: ``restricted`` or ``isolated``): a tool acting for it may reach only what that uid
    #: may (see :mod:`.files`), and in a writable root of :attr:`owners`, what its owner may
    as_sandbox_uid: bool = False
    #: writable roots the script acts in as their owner (root, uid, gid): id-mapped binds
    #: (see :mod:`execengine.isolation.owner`); what is created there is the owner's
    owners: tuple[tuple[str, int, int], ...] = ()
    #: a user's home folder (or one holding its start-up files, ``.ssh``...) may be the
    #: working directory of a sandbox (``policy.allow_home_workdir``)
    allow_home: bool = False

    @classmethod
    def for_execution(cls, config: Config, *, cwd: str, level: str,
                      extra_writable: Iterable[str] = (), agent: bool = False,
                      local: bool = True) -> ExecutionPolicy:
        """The policy of a script running at ``level`` in ``cwd`` (``agent``: the policy
        of the agent's own calls, confined only with ``policy.agent_calls: confined``;
        ``local=False``: the script and its tools act on another machine, which has no
        roots of this host and no sandbox layers of ours, see docs/remote.md)."""
        pc = config.policy
        if agent:
            confined = pc.agent_calls == "confined"
        elif not local:
            confined = False
        else:
            confined = not pc.tools_leave_roots and (level != "none" or pc.confine_at_none)
        writable = _real([cwd, *extra_writable, *pc.writable_roots])
        denied = [*config.files.denied_paths, *ALWAYS_DENIED]
        if config.source:
            denied.append(config.source)
        network = pc.network or ("on" if config.code_execution.network else "off")
        # the readable roots and the protected paths are what a sandbox binds and confined
        # tool calls are held to; an unconfined execution at level none uses neither (its
        # calls check the denied paths only), so they are not worked out for it: reading
        # every root's git index for submodules was most of such an execution's policy
        readable: tuple[str, ...] = tuple(writable)
        protected: list[str] = []
        if confined or level in ("restricted", "isolated"):
            readable = tuple(dict.fromkeys([*writable, *_real_fixed(pc.readable_roots)]))
            protected = [os.path.join(r, *p) for r in writable for p in PROTECTED_IN_ROOTS]
            protected += [p for r in writable for p in submodule_git_files(r)]
            protected += _real_fixed(pc.protected_paths)
            if config.source:
                protected.append(os.path.realpath(config.source))
        sandboxed = level in ("restricted", "isolated") and os.geteuid() == 0
        owners: tuple[tuple[str, int, int], ...] = ()
        # as the launcher decides it (launch/sandboxed.py): restricted binds in a mount
        # namespace of its entry's own, so only where the host can make one
        if (sandboxed and config.code_execution.workdir_as_owner
                and (level == "isolated" or detect().has("namespaces"))):
            owners = tuple((root, o.uid, o.gid) for root, o in owned_roots(
                [r for r in writable if r == os.path.realpath(r)]).items())
        return cls(level=level, confined=confined, writable_roots=writable,
                   protected=tuple(dict.fromkeys(
                       p for p in protected if any(is_beneath(p, r) for r in writable))),
                   readable_roots=readable, denied_paths=tuple(dict.fromkeys(denied)),
                   network=network, allowed_domains=tuple(pc.allowed_domains),
                   denied_domains=tuple(pc.denied_domains),
                   cwd=os.path.abspath(cwd),
                   as_sandbox_uid=sandboxed and not agent,
                   owners=owners if not agent else (),
                   allow_home=config.policy.allow_home_workdir)

    def owner_of(self, root: str) -> tuple[int, int] | None:
        """(uid, gid) of the writable ``root`` when the script acts there as its owner."""
        for path, uid, gid in self.owners:
            if path == root:
                return uid, gid
        return None

    def root_of(self, path: str, *, write: bool) -> str | None:
        """The deepest root holding the (absolute, normalised) ``path``, or None."""
        roots = self.writable_roots if write else self.readable_roots
        hits = [r for r in roots if is_beneath(path, r)]
        return max(hits, key=len) if hits else None

    def writable(self, path: str) -> bool:
        return self.root_of(path, write=True) is not None and not self.is_protected(path)

    def is_protected(self, path: str) -> bool:
        """``path`` (absolute, normalised) is or lies below a protected path, or in a
        ``.git`` at any depth (a nested repository's, a submodule's ``.git`` file)."""
        return GIT in path.split("/") or any(is_beneath(path, p) for p in self.protected)

    def proxy_env(self) -> dict[str, str]:
        """``HTTP(S)_PROXY`` (both spellings) pointing at the allow-list proxy, if any."""
        if self.proxy_port is None:
            return {}
        url = f"http://127.0.0.1:{self.proxy_port}"
        return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url,
                "https_proxy": url, "NO_PROXY": "", "no_proxy": ""}

    def describe(self) -> dict[str, Any]:
        """A plain summary (for errors, logs and ``execengine doctor``)."""
        return {"level": self.level, "confined": self.confined,
                "writable_roots": list(self.writable_roots),
                "readable_roots": list(self.readable_roots), "network": self.network,
                "allowed_domains": list(self.allowed_domains),
                "denied_domains": list(self.denied_domains)}


def policy_of(ctx: ToolContext) -> ExecutionPolicy | None:
    """The execution policy a tool call carries (None: no policy, unconfined)."""
    return ctx.call.policy
