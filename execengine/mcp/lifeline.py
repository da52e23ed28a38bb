"""What ties an MCP stdio server's life to the host's.

The SDK starts each stdio server in a session of its own (so that stopping it can signal
its whole process group), and so nothing stops it when the host is SIGKILLed: a server
blocked in a call was seen running 757 s after its host died, and a nested
``execengine mcp`` kept its kernel, cgroups, tmp folders and an ACL grant for minutes.
Two lines, each enough on its own for the server itself:

* **The guard** (:class:`~execengine.terminal.guard.CommandGuard` on
  ``EXECENGINE_MCP_TOKEN``): every server gets a token of its own in its environment,
  registered with the manager's guard process before the server starts. At the host's
  death (EOF on the guard's pipe) the guard freezes and kills every process carrying a
  registered token: the server, and what it started, ``setsid`` ones included (they
  inherit its environment). Tokens stay registered after a server stops, so a stray that
  outlived its server dies with the host (or when the manager closes) too.
* **The parent-death signal**: the server is started through a small exec shim
  (:data:`SHIM`, ``python -I -S``, a few ms) that sets ``PR_SET_PDEATHSIG`` to SIGKILL,
  checks that the host is still its parent (else the host died before the signal was in
  place: it exits), then execs the server. The kernel sends the signal when the *thread*
  that forked the shim ends, which is the process-wide reactor thread
  (:mod:`execengine._asyncbridge`: the SDK spawns from the event loop), alive as long as
  the host is. It also covers the moment the guard cannot see: between the host's fork
  and the shim's exec the child still has the host's environment, without the token.

The command is looked up before the start (on the server's ``PATH``, or in its working
directory when it holds a ``/``), so that a missing one is still reported as "command not
found" rather than as a connection closed during the handshake.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import sys
from typing import Any

from execengine.proctree import MCP_TOKEN_VAR
from execengine.terminal.guard import CommandGuard

#: runs ``argv[2:]`` with the parent-death signal set, unless the host (``argv[1]``) is
#: already gone; a command that cannot be run exits 127 with the reason on stderr
SHIM = r"""
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    os._exit(137)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write("cannot run %s: %s\n" % (sys.argv[2], exc))
    os._exit(127)
"""


def make_guard() -> CommandGuard:
    """The guard of one manager's stdio servers (its process starts with the first)."""
    return CommandGuard(var=MCP_TOKEN_VAR, what="the MCP stdio servers")


def tie(params: Any, guard: CommandGuard | None, environ: dict[str, str]) -> Any:
    """``params`` (the SDK's ``StdioServerParameters``) to start the same server tied to
    this process: through :data:`SHIM`, with a fresh token registered with ``guard``.
    ``environ``: the environment the server starts with (for the ``PATH`` lookup)."""
    command = params.command
    if os.sep in command:  # relative to the server's working directory, as exec finds it
        found = shutil.which(os.path.join(str(params.cwd or os.getcwd()), command),
                             path="")
    else:
        found = shutil.which(command, path=environ.get("PATH"))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    env = dict(params.env or {})
    if guard is not None:
        token = secrets.token_hex(16)
        guard.register(token)  # before the start: at no moment is it unguarded
        env[MCP_TOKEN_VAR] = token
    argv = ["-I", "-S", "-c", SHIM, str(os.getpid()), command, *params.args]
    return params.model_copy(update={"command": sys.executable, "args": argv, "env": env})
