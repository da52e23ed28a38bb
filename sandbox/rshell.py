"""Remote side of the ``ssh`` terminal backend: one shell command, supervised.

The host runs ``env -i PATH=... python3 -c "{ENTRY}"`` over its SSH connection. Standard
input starts with a header (``sandbox/remote.py``'s format): ``command``, ``cwd``, ``pty``,
``grace`` and the environment (allow-listed by the host). The command runs under
``bash -c`` in a new session with a unique run token in its environment; its output
(stdout and stderr together) is relayed to this process's standard output as it comes.

Standard input then controls it: ``K`` stops the command (SIGTERM to its session and to
every process carrying its token, ``grace`` seconds, then SIGKILL); end of file (the host
closed the channel or the connection dropped) kills all of it at once and exits. When the
shell ends, whatever it left behind is killed, as the local backend does.

Standard error carries JSON lines for the host: ``{"pid": N}`` once the shell started,
and at the end ``{"exit": code, "cwd": dir}`` (the shell's last working directory, written
by an ``EXIT`` trap to a private descriptor) or ``{"error": message}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
import sys
import threading
import time
import uuid

from . import bootstrap
from .remote import _read_header

ENTRY = ("import sys; sys.path[:1] == [''] and sys.path.pop(0); "
         "from _execengine.rshell import main; sys.exit(main())")
#: the descriptor the shell reports its working directory on
PWD_FD_MIN = 200
#: how long to wait for the last output once everything that could write is gone
DRAIN_SECONDS = 0.5


def _emit(obj: dict[str, object]) -> None:
    os.write(2, (json.dumps(obj) + "\n").encode("utf-8", "surrogateescape"))


def _members(shell: int, token: str) -> list[int]:
    """Live processes of the command: its session's group, everything below this helper,
    and every process carrying its token (children that left the group)."""
    found = set(bootstrap._descendants(os.getpid(), token))
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                found.discard(int(name))
            elif int(fields[2]) == shell:
                found.add(int(name))
        except (OSError, ValueError, IndexError):
            continue
    found.discard(os.getpid())
    return sorted(found)


def _signal_all(shell: int, token: str, sig: int) -> int:
    pids = _members(shell, token)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
    with contextlib.suppress(OSError):
        os.killpg(shell, sig)
    return len(pids)


def _kill_rest(shell: int, token: str) -> None:
    deadline = time.monotonic() + 5.0
    while _signal_all(shell, token, signal.SIGKILL) and time.monotonic() < deadline:
        time.sleep(0.005)


def _stop(proc: subprocess.Popen[bytes], token: str, grace: float) -> None:
    if _signal_all(proc.pid, token, signal.SIGTERM):
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()
            if not _members(proc.pid, token):
                break
            time.sleep(0.02)
    _kill_rest(proc.pid, token)


def _control(proc: subprocess.Popen[bytes], token: str, grace: float) -> None:
    """``K``: stop the command; EOF: kill everything now and leave."""
    while True:
        try:
            data = os.read(0, 64)
        except OSError:
            data = b""
        if not data:
            _kill_rest(proc.pid, token)
            os._exit(137)
        if b"K" in data:
            _stop(proc, token, grace)


def _relay(fd: int, pty: bool) -> None:
    carry = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's last slave end closed
            data = b""
        if not data:
            if carry:
                os.write(1, carry)
            return
        if pty:  # a terminal turns "\n" into "\r\n": give plain newlines
            data = (carry + data).replace(b"\r\n", b"\n")
            carry = b"\r" if data.endswith(b"\r") else b""
            if carry:
                data = data[:-1]
        while data:
            data = data[os.write(1, data):]


def _environment(given: dict[str, str], token: str) -> dict[str, str]:
    env = dict(given)
    try:
        me = pwd.getpwuid(os.getuid())
    except KeyError:
        me = None
    if me is not None:
        env.setdefault("HOME", me.pw_dir)
        env.setdefault("USER", me.pw_name)
        env.setdefault("LOGNAME", me.pw_name)
    env[bootstrap.ENV_RUN_TOKEN] = token
    return env


def main(argv: list[str] | None = None) -> int:
    try:
        header, given_env = _read_header()
    except (OSError, ValueError) as exc:
        _emit({"error": f"bad start: {exc}"})
        return 2
    cwd = os.path.expanduser(header.get("cwd") or "~")
    if not os.path.isdir(cwd):
        _emit({"error": f"working directory does not exist: {cwd}"})
        return 2
    token = uuid.uuid4().hex
    env = _environment(given_env, token)
    pty = bool(header.get("pty"))
    import fcntl

    pwd_r, w0 = os.pipe()
    pwd_w = fcntl.fcntl(w0, fcntl.F_DUPFD_CLOEXEC, PWD_FD_MIN)
    os.close(w0)
    if pty:
        import struct
        import termios

        out_r, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
        env.setdefault("TERM", "xterm")
        stdin, stdout = slave, slave
    else:
        out_r, stdout = os.pipe()
        stdin = subprocess.DEVNULL
    command = header.get("command", "")
    script = f"trap 'printf \"%s\" \"$PWD\" >&{pwd_w}' EXIT\n{command}\n"
    try:
        proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", script], cwd=cwd,
                                env=env, stdin=stdin, stdout=stdout, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, pass_fds=(pwd_w,))
    except OSError as exc:
        _emit({"error": f"cannot start bash: {exc}"})
        return 2
    finally:
        os.close(stdout)
        os.close(pwd_w)
    _emit({"pid": proc.pid})
    relay = threading.Thread(target=_relay, args=(out_r, pty), daemon=True)
    relay.start()
    threading.Thread(target=_control, args=(proc, token, float(header.get("grace") or 2.0)),
                     daemon=True).start()
    code = proc.wait()
    _kill_rest(proc.pid, token)  # what it left behind
    relay.join(DRAIN_SECONDS)
    chunks = []
    os.set_blocking(pwd_r, False)
    while True:
        try:
            data = os.read(pwd_r, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    sys.stdout.flush()
    _emit({"exit": 128 - code if code < 0 else code,
           "cwd": b"".join(chunks).decode("utf-8", "surrogateescape") or None})
    return 0
