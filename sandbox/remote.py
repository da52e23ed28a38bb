"""Entry point of a child that runs on a remote machine, started over SSH.

The host runs ``env -i PATH=... python3 -c "{ENTRY}"`` on the remote, with this package's
directory (installed once per content hash) as the only ``PYTHONPATH`` entry. Nothing
secret is on the command line: standard input starts with a header (:func:`_read_header`)
with the script, the rendered stub, the script's environment (allow-listed by the host: the
remote's own login environment is dropped), its working directory and the run token.

Then, as the local bootstrap does, but with standard input as the watchdog: EOF on it (the
host closed the channel, or the SSH connection dropped) kills every process of the
execution, found by parent and by run token, and removes the staging directory; ``T`` on it
sends SIGTERM to all of it first. The script's stdout and stderr are the channel's. When the
script ends, whatever it left running is killed (its output pipes would keep the channel,
and the host's wait, open).

With ``kernel`` in the header this process relays a session's kernel instead
(:func:`relay_kernel`): the kernel (``sandbox/kernel.py``) runs as its child with its own
command and reply pipes; the channel's standard input carries the host's commands to it,
its stdout is the channel's, and its stderr and replies share the channel's stderr in
frames (:data:`FRAME`, a 12-byte header: magic, ``e`` or ``r``, the length in 8 hex digits),
which the host takes apart again. EOF on standard input ends the kernel as the local one
ends (everything of it killed).
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
#: how a frame of the kernel's stderr (``e``) or replies (``r``) starts on the channel's stderr
FRAME = b"\x00EE"
#: the kernel's ``python -c`` program (``sandbox/kernel.py``'s ``ENTRY``)
KERNEL_ENTRY = ("import sys; sys.path[:1] == [''] and sys.path.pop(0); "
                "from _execengine.kernel import main; sys.exit(main())")


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
    if header.get("kernel"):
        try:
            return relay_kernel(env)
        finally:
            kill_leftovers()
            cleanup()
    try:
        return bootstrap.main([os.path.join(staging, "script.py")])
    finally:
        kill_leftovers()
        cleanup()


def kill_leftovers() -> None:
    """SIGKILL whatever the execution left running (descendants of this subreaper, and
    processes carrying its run token): their copies of the channel's output would keep
    the channel, and the host's wait for it, open until they end."""
    import signal

    bootstrap._flush()
    token = os.environ.get(bootstrap.ENV_RUN_TOKEN, "")
    for _ in range(3):
        pids = [p for p in bootstrap._descendants(os.getpid(), token) if p != os.getpid()]
        if not pids:
            return
        for pid in pids:
            try:  # noqa: SIM105
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for _pid in pids:  # reap what was ours
            try:
                os.waitpid(-1, os.WNOHANG)
            except OSError:
                break


def _not_dumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` (Linux); True if it worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(4, 0, 0, 0, 0) == 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False


def _frame(kind: bytes, data: bytes) -> bytes:
    return FRAME + kind + b"%08x" % len(data) + data


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except OSError:
            return False
    return True


def relay_kernel(env: dict) -> int:  # type: ignore[type-arg]
    """Run the session kernel as a child and relay the channel to it (see the module
    docstring); its exit status."""
    import select
    import threading

    cmd_r, cmd_w = os.pipe()
    reply_r, reply_w = os.pipe()
    err_r, err_w = os.pipe()
    kernel_env = dict(env)
    kernel_env.pop(bootstrap.ENV_WATCHDOG_FD, None)
    kernel_env.pop(bootstrap.ENV_SUBREAPER, None)
    kernel_env["EXECENGINE_KERNEL_FDS"] = f"{cmd_r},{reply_w}"
    bootstrap.become_subreaper()  # orphans of the kernel's cells come to us
    # a cell runs as our uid: through /proc/<our pid>/fd/2 it could write to the channel's
    # stderr and break our frames (a red team's fake header with a 2 GiB length made the
    # host wait for a cell's end that had come); a process that is not dumpable keeps its
    # /proc/<pid>/fd from other processes of its uid (the kernel, after exec, is dumpable)
    _not_dumpable()
    pid = os.fork()
    if pid == 0:  # the kernel
        try:
            os.dup2(err_w, 2)
            for fd in (cmd_w, reply_r, err_r, err_w):
                os.close(fd)
            os.set_inheritable(cmd_r, True)
            os.set_inheritable(reply_w, True)
            os.execve(sys.executable, [sys.executable, "-c", KERNEL_ENTRY], kernel_env)
        finally:
            os._exit(127)
    for fd in (cmd_r, reply_w, err_w):
        os.close(fd)
    watchdog = int(env.get(bootstrap.ENV_WATCHDOG_FD, "0") or 0)

    def commands() -> None:
        """The host's commands, to the kernel; EOF (the host is gone or closed the
        session) closes the kernel's command pipe: it kills its own and exits."""
        while True:
            try:
                data = os.read(watchdog, 1 << 16)
            except OSError:
                data = b""
            if not data or not _write_all(cmd_w, data):
                break
        try:  # noqa: SIM105
            os.close(cmd_w)
        except OSError:
            pass

    threading.Thread(target=commands, daemon=True).start()
    kinds = {err_r: b"e", reply_r: b"r"}
    while kinds:
        ready, _, _ = select.select(list(kinds), [], [])
        for fd in ready:
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                del kinds[fd]
                os.close(fd)
                continue
            if not _write_all(2, _frame(kinds[fd], data)):
                kinds.clear()  # the channel is gone: nobody reads us
                break
    try:
        _, status = os.waitpid(pid, 0)
    except OSError:
        return 1
    return os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else 1
