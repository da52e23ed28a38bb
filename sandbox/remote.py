"""Entry point of a child that runs on a remote machine, started over SSH.

The host runs ``env -i PATH=... python3 -c "{ENTRY}"`` on the remote, with this package's
directory (installed once per content hash) as the only ``PYTHONPATH`` entry. Nothing
secret is on the command line: standard input starts with a header (:func:`_read_header`)
with the script, the rendered stub, the script's environment (allow-listed by the host: the
remote's own login environment is dropped), its working directory and the run token.

Then, as the local bootstrap does, but with standard input as the watchdog: EOF on it (the
host closed the channel, or the SSH connection dropped) kills every process of the
execution, found by parent and by run token, and removes the staging directory; ``T`` on it
sends SIGTERM to all of it first. The script's stdout and stderr are the channel's.
"""

from __future__ import annotations

import os
import sys

from . import bootstrap

#: what the host runs with ``python -c``
ENTRY = ("import sys; sys.path[:1] == [''] and sys.path.pop(0); "
         "from _execengine.remote import main; sys.exit(main())")
#: the largest header accepted (script + stub + environment)
MAX_HEADER = 64 * 1024 * 1024


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n > 0:
        data = os.read(fd, min(n, 1 << 20))
        if not data:
            raise ValueError("standard input closed before the header")
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def _read_header(fd: int = 0) -> tuple[dict[str, str], dict[str, str]]:
    """``(fields, environment)`` from the header: ``EE1 <length>\\n`` then that many bytes
    of netstrings (``<n>:<bytes>,``), alternately a key and its value (``env:NAME`` for
    the environment). Read
    exactly, so nothing after it is consumed; no ``json`` (its import costs more than the
    rest of the start-up)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte or len(line) > 32:
            raise ValueError("bad header start")
        line += byte
    magic, _, size = line.strip().partition(b" ")
    if magic != b"EE1" or not size.isdigit() or int(size) > MAX_HEADER:
        raise ValueError("bad header start")
    body = _read_exact(fd, int(size))
    words = []
    i = 0
    while i < len(body):
        colon = body.index(b":", i, i + 12)
        n = int(body[i:colon])
        end = colon + 1 + n
        if body[end:end + 1] != b",":
            raise ValueError("bad header field")
        words.append(body[colon + 1:end].decode("utf-8", "surrogatepass"))
        i = end + 1
    if len(words) % 2:
        raise ValueError("bad header: a key without a value")
    fields: dict[str, str] = {}
    env: dict[str, str] = {}
    for key, value in zip(words[::2], words[1::2]):
        if key.startswith("env:"):
            env[key[4:]] = value
        else:
            fields[key] = value
    return fields, env


def _rmtree(path: str) -> None:
    """Remove a staging directory (``shutil`` is a costly import for this alone)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    try:  # noqa: SIM105
        os.rmdir(path)
    except OSError:
        pass


def _stage(header: dict[str, str]) -> str:
    base = os.path.expanduser(header.get("base") or "~/.execengine-remote")
    os.makedirs(base, mode=0o700, exist_ok=True)
    path = os.path.join(base, "run-" + os.urandom(8).hex())
    os.mkdir(path, 0o700)
    for name, key in (("script.py", "script"), ("hermes_tools.py", "stub")):
        with open(os.path.join(path, name), "w", encoding="utf-8",
                  errors="surrogatepass") as f:
            f.write(header.get(key) or "")
    return path


def main(argv: list[str] | None = None) -> int:
    try:
        header, given_env = _read_header()
        staging = _stage(header)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"execengine remote: bad start: {exc}\n")
        return 2

    def cleanup() -> None:
        _rmtree(staging)
        sock = header.get("socket")
        if sock:
            try:  # noqa: SIM105
                os.unlink(sock)
            except OSError:
                pass

    bootstrap._before_exit.append(cleanup)
    runtime = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(given_env)
    env["PYTHONPATH"] = os.pathsep.join([staging, runtime] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    # the watchdog gets the channel's input; the script's own stdin is /dev/null
    watchdog = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    env[bootstrap.ENV_WATCHDOG_FD] = str(watchdog)
    env[bootstrap.ENV_SUBREAPER] = "1"
    os.environ.clear()
    os.environ.update(env)
    sys.path[:0] = [staging]
    cwd = os.path.expanduser(header["cwd"]) if header.get("cwd") else staging
    try:
        os.makedirs(cwd, exist_ok=True)
        os.chdir(cwd)
    except OSError as exc:
        cleanup()
        sys.stderr.write(f"execengine remote: cannot use working directory {cwd}: {exc}\n")
        return 2
    try:
        return bootstrap.main([os.path.join(staging, "script.py")])
    finally:
        cleanup()
