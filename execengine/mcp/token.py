"""The bearer token of ``execengine mcp --http``: every request carries it, loopback too.

A loopback address is no boundary between the users of one machine: any local uid can
connect to ``127.0.0.1``, and with ``--tools`` the server's ``terminal`` is a shell of the
user who started it (root's, often). So the HTTP server always wants a token. The user
gives one (``--token-env VAR``), or one is made at start (32 random bytes) and written to a
file only the starting user can read — mode 0600 in a 0700 folder, created new, never
through a symlink — whose path is printed; the file is removed when the server stops.
Requests are checked by :class:`execengine.mcp.server.BearerToken` in constant time.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from pathlib import Path

from execengine.errors import McpError


def new_token() -> str:
    return secrets.token_urlsafe(32)


def default_token_path(host: str, port: int) -> Path:
    """``~/.execengine/mcp/http-HOST-PORT.token`` (one per server address)."""
    name = re.sub(r"[^A-Za-z0-9.]", "_", host)
    return Path.home() / ".execengine" / "mcp" / f"http-{name}-{port}.token"


def _private_folder(folder: Path) -> None:
    """``folder`` exists and is a real directory of ours that no one else may change.

    A folder made here is made 0700. One that was there is never changed: a red team
    gave ``--token-file /tmp/mcp.token`` to a server run as root, which owns ``/tmp``, and
    it made ``/tmp`` mode 0700 (every other user locked out of it, its sticky bit gone).
    The token file is 0600 in any case; a folder others may write without the sticky bit
    (where they could swap the file) is refused."""
    try:
        folder.mkdir(mode=0o700, parents=True)
        made = True
    except FileExistsError:
        made = False
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise McpError(f"cannot keep the MCP token in {folder}: not a directory of this user")
    mode = stat.S_IMODE(info.st_mode)
    if made and mode & 0o077:
        os.chmod(folder, 0o700)  # the umask's group and other bits, on our own folder
    elif mode & 0o022 and not mode & stat.S_ISVTX:
        raise McpError(f"cannot keep the MCP token in {folder}: others may write there "
                       f"(mode {mode:o}); choose a private folder for --token-file")


def write_token(path: Path, token: str) -> None:
    """Write ``token`` to a new file at ``path`` readable by this user only (a file left
    there by an earlier server is replaced; a symlink there is not followed)."""
    try:
        _private_folder(path.parent)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise McpError(f"cannot write the MCP token file {path}: {exc.strerror or exc}") \
            from exc
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")


def remove_token(path: Path, token: str) -> None:
    """Remove ``path`` if it still holds ``token`` (a later server's file is left alone)."""
    with contextlib.suppress(OSError):
        if path.read_text().strip() == token:
            path.unlink()
