"""Entry point of a child that runs on a remote machine, started over SSH.

The host runs ``env -i PATH=... python3 -c "{ENTRY}"`` on the remote, with this package's
directory (installed once per content hash) as the only ``PYTHONPATH`` entry. Nothing
secret is on the command line: the first line of standard input is a JSON header with
the script, the rendered stub, the script's environment (allow-listed by the host: the
remote's own login environment is dropped), its working directory and the run token.

Then, as the local bootstrap does, but with standard input as the watchdog: EOF on it (the
host closed the channel, or the SSH connection dropped) kills every process of the
execution, found by parent and by run token, and removes the staging directory; ``T`` on it
sends SIGTERM to all of it first. The script's stdout and stderr are the channel's.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from . import bootstrap

#: what the host runs with ``python -c``
ENTRY = "import sys; from _execengine.remote import main; sys.exit(main())"
#: the largest header accepted (script + stub + environment)
MAX_HEADER = 64 * 1024 * 1024


def _read_header(fd: int = 0) -> dict:
    """The first line of ``fd``, read byte-wise so nothing after it is consumed."""
    chunks = []
    size = 0
    while True:
        data = os.read(fd, 65536)
        if not data:
            raise ValueError("standard input closed before the header")
        nl = data.find(b"\n")
        if nl >= 0:  # the host writes nothing more until the script runs
            chunks.append(data[:nl])
            break
        chunks.append(data)
        size += len(data)
        if size > MAX_HEADER:
            raise ValueError("header too large")
    header = json.loads(b"".join(chunks).decode("utf-8", "surrogatepass"))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header


def _stage(header: dict) -> str:
    base = os.path.expanduser(header.get("base") or "~/.execengine-remote")
    os.makedirs(base, mode=0o700, exist_ok=True)
    import tempfile

    path = tempfile.mkdtemp(prefix="run-", dir=base)
    for name, key in (("script.py", "script"), ("hermes_tools.py", "stub")):
        with open(os.path.join(path, name), "w", encoding="utf-8",
                  errors="surrogatepass") as f:
            f.write(header.get(key) or "")
    return path


def main(argv=None) -> int:
    try:
        header = _read_header()
        staging = _stage(header)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"execengine remote: bad start: {exc}\n")
        return 2

    def cleanup() -> None:
        shutil.rmtree(staging, ignore_errors=True)
        sock = header.get("socket")
        if sock:
            try:
                os.unlink(sock)
            except OSError:
                pass

    bootstrap._before_exit.append(cleanup)
    runtime = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {str(k): str(v) for k, v in (header.get("env") or {}).items()}
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
