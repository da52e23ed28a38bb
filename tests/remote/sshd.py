"""A real OpenSSH server on loopback, with its own host key and an unprivileged remote user
created for it and removed after it (nothing of either is left behind). The tests' fixture
and benchmarks/bench_ssh.py use it."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass(frozen=True)
class Remote:
    host: str
    port: int
    user: str
    home: Path
    identity_file: Path
    known_hosts_file: Path
    dir: Path

    def overrides(self, **extra: object) -> dict[str, object]:
        return {"terminal.backend": "ssh", "ssh.host": self.host, "ssh.port": self.port,
                "ssh.user": self.user, "ssh.identity_file": str(self.identity_file),
                "ssh.known_hosts_file": str(self.known_hosts_file), **extra}

    def processes(self) -> list[psutil.Process]:
        """Live processes of the remote user (the remote is this machine), but for the
        sshd process serving the persistent connection itself."""
        uid = pwd.getpwnam(self.user).pw_uid
        out = []
        for p in psutil.process_iter(["uids", "status"]):
            with contextlib.suppress(psutil.Error):
                if (p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE
                        and p.name() != "sshd"):
                    out.append(p)
        return out

    def wait_no_processes(self, timeout: float = 5.0) -> list[psutil.Process]:
        deadline = time.monotonic() + timeout
        while True:
            left = self.processes()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=30)


def available() -> bool:
    """Root (to create the remote user) and an sshd binary."""
    return os.geteuid() == 0 and os.access(SSHD, os.X_OK)


@contextlib.contextmanager
def loopback_remote(*, forwarding: bool = True) -> Iterator[Remote]:
    """Start sshd on 127.0.0.1 with a new user; stop both and remove everything after.
    ``forwarding=False``: a server that refuses socket forwarding (as many do)."""
    base = Path(tempfile.mkdtemp(prefix="ee-sshd-"))
    base.chmod(0o755)
    user = "eessh" + secrets.token_hex(3)
    home = base / "home"
    run_dir = Path("/run/sshd")
    made_run_dir = not run_dir.exists()
    proc: subprocess.Popen[bytes] | None = None
    created_user = False
    try:
        subprocess.run(["useradd", "-M", "-p", "*", "-d", str(home), "-s", "/bin/sh", user],
                       check=True, timeout=30)
        created_user = True
        ent = pwd.getpwnam(user)
        home.mkdir(mode=0o700)
        os.chown(home, ent.pw_uid, ent.pw_gid)
        keys = base / "keys"
        keys.mkdir(mode=0o755)
        _keygen(base / "host_key")
        _keygen(base / "client_key")
        shutil.copy(base / "client_key.pub", keys / user)
        (keys / user).chmod(0o644)
        port = _free_port()
        (base / "known_hosts").write_text(
            f"[127.0.0.1]:{port} {(base / 'host_key.pub').read_text().split(' ')[0]} "
            f"{(base / 'host_key.pub').read_text().split(' ')[1]}\n")
        cfg = base / "sshd_config"
        cfg.write_text("\n".join([
            f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {base / 'host_key'}",
            f"PidFile {base / 'sshd.pid'}", f"AuthorizedKeysFile {keys}/%u",
            "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", f"AllowUsers {user}", "PermitRootLogin no",
            f"AllowStreamLocalForwarding {'yes' if forwarding else 'no'}",
            "StreamLocalBindUnlink yes", "AllowTcpForwarding remote", "X11Forwarding no",
            "PrintMotd no", "MaxSessions 100", "MaxStartups 100", "LogLevel ERROR", ""]))
        run_dir.mkdir(mode=0o755, exist_ok=True)
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"sshd did not start: {err}")
            time.sleep(0.05)
        yield Remote("127.0.0.1", port, user, home, base / "client_key",
                     base / "known_hosts", base)
    finally:
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            if proc.stderr is not None:
                if os.environ.get("EE_SSHD_LOG"):
                    print(proc.stderr.read().decode()[-5000:])
                proc.stderr.close()
        if created_user:
            subprocess.run(["pkill", "-KILL", "-u", user], timeout=30, check=False)
            deadline = time.monotonic() + 10
            while subprocess.run(["pgrep", "-u", user], capture_output=True,
                                 timeout=30).returncode == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            subprocess.run(["userdel", user], timeout=30, check=False)
        if made_run_dir:
            with contextlib.suppress(OSError):
                run_dir.rmdir()
        shutil.rmtree(base, ignore_errors=True)
