"""Checking a configured remote (``execengine doctor`` with ``terminal.backend: ssh``).

In order, each only when the previous ones passed: the connection (reachability,
authentication and the host key against the configured known-hosts file, which ssh's own
message tells apart), the remote interpreter (>= 3.8 for scripts, >= 3.10 for the file
tools), socket forwarding (what tool calls need: the remote sshd must allow it), and
whether the child runtime and the file tools' modules of this version are installed (they
are installed on first use otherwise).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import tempfile
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from execengine.remote.files import MIN_PYTHON, files_archive
from execengine.remote.launcher import runtime_archive
from execengine.remote.ssh import RemoteError, SshConnection, SshTarget, quote

if TYPE_CHECKING:
    from execengine.config import Config

#: the child runtime's oldest Python
MIN_RUNTIME_PYTHON = (3, 8)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    #: a failure that stops remote execution (else: informational)
    required: bool = True

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def check_remote(config: Config) -> list[Check]:
    """Every check of the configured remote, in order; later ones are skipped on failure."""
    try:
        target = SshTarget.from_config(config)
    except RemoteError as exc:
        return [Check("configuration", False, str(exc))]
    where = f"{target.destination} port {target.port}"
    checks: list[Check] = []
    with SshConnection(target) as conn:
        try:
            conn.connect()
        except RemoteError as exc:
            return [Check("connect", False, str(exc))]
        known = target.known_hosts_file or "~/.ssh/known_hosts"
        checks.append(Check("connect", True, f"{where}: reachable, key accepted, host key "
                                             f"matches {known}"))
        python = config.ssh.python
        try:
            out = conn.check(quote([python, "-c", "import sys; print(*sys.version_info[:3])"]),
                             timeout=target.connect_timeout + 20)
            version = tuple(int(x) for x in out.split())
        except (RemoteError, ValueError) as exc:
            checks.append(Check("python", False, f"{python} on the remote: {exc}"))
            return checks
        shown = ".".join(map(str, version))
        checks.append(Check("python", version >= MIN_RUNTIME_PYTHON,
                            f"{python} is {shown} (scripts need >= 3.8)"))
        checks.append(Check("python for file tools", version >= MIN_PYTHON,
                            f"{shown} (read_file, write_file, patch, search_files need >= "
                            f"{'.'.join(map(str, MIN_PYTHON))})", required=False))
        bash = conn.run("command -v bash", timeout=30).stdout.decode().strip()
        checks.append(Check("bash", bool(bash), bash or "not found (the terminal tool runs "
                            "commands with bash)", required=False))
        base = config.ssh.remote_dir
        checks.append(_forwarding(conn, base))
        checks.append(_installed(conn, base))
    return checks


def _forwarding(conn: SshConnection, base: str) -> Check:
    """Forward a throwaway socket as the launcher does, then cancel it."""
    with tempfile.TemporaryDirectory(prefix="ee-doctor-") as tmp:
        local = os.path.join(tmp, "s.sock")
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(local)
            listener.listen(1)
            try:
                home = conn.check(f"mkdir -p {base}/s && chmod 700 {base} && cd {base} && pwd",
                                  timeout=30).decode().strip()
                remote = f"{home}/s/doctor-{secrets.token_hex(4)}.sock"
                conn.forward_socket(remote, local)
            except RemoteError as exc:
                return Check("socket forwarding", False,
                             f"{exc} (the remote sshd must allow AllowStreamLocalForwarding "
                             "and AllowTcpForwarding yes or remote)")
            conn.cancel_socket(remote, local)
            with contextlib.suppress(RemoteError):
                conn.check(quote(["rm", "-f", remote]), timeout=30)
    return Check("socket forwarding", True, "a Unix socket can be forwarded to the remote")


def _installed(conn: SshConnection, base: str) -> Check:
    runtime = f"runtime-{runtime_archive()[0]}"
    files = f"files-{files_archive()[0]}"
    try:
        out = conn.check(f"cd {base} && for d in {runtime} {files}; do "
                         f"test -f $d/.complete && echo $d; done; true", timeout=30)
    except RemoteError as exc:
        return Check("runtime installed", False, str(exc), required=False)
    have = out.decode().split()
    missing = [d for d in (runtime, files) if d not in have]
    if missing:
        return Check("runtime installed", False,
                     f"not yet: {', '.join(missing)} under {base} (installed on first use)",
                     required=False)
    return Check("runtime installed", True, f"{runtime} and {files} under {base}",
                 required=False)
