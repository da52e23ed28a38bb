"""``execengine doctor`` with terminal.backend: ssh, against a real sshd on loopback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from execengine.cli import main
from execengine.config import Config
from execengine.registry import ToolRegistry

from .conftest import Remote


def _config_file(tmp_path: Path, remote: Remote, **ssh: object) -> Path:
    data = {"terminal": {"backend": "ssh"},
            "ssh": {"host": remote.host, "port": remote.port, "user": remote.user,
                    "identity_file": str(remote.identity_file),
                    "known_hosts_file": str(remote.known_hosts_file), **ssh}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def doctor(capsys: pytest.CaptureFixture[str], config: Path) -> tuple[int, dict]:
    code = main(["--config", str(config), "doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_doctor_checks_the_remote_and_sees_the_runtime_installed(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, remote: Remote) -> None:
    path = _config_file(tmp_path, remote)
    code, data = doctor(capsys, path)
    checks = {c["name"]: c for c in data["remote"]["checks"]}
    assert code == 0 and data["remote"]["ok"] is True, checks
    assert checks["connect"]["ok"] and "host key matches" in checks["connect"]["detail"]
    assert checks["python"]["ok"] and checks["socket forwarding"]["ok"]
    assert checks["bash"]["ok"] and checks["bash"]["detail"].endswith("/bash")
    assert checks["runtime installed"]["ok"] is False  # nothing ran there yet
    assert "installed on first use" in checks["runtime installed"]["detail"]
    config = Config().with_overrides(remote.overrides(**{"approvals.mode": "allow"}))
    with ToolRegistry.with_builtins(config) as reg:  # installs the runtime, the file tools'
        out = json.loads(reg.dispatch("read_file", {"path": "nothing"}))
        assert out["error"].startswith("File not found")
        assert json.loads(reg.dispatch("terminal", {"command": "true"}))["exit_code"] == 0
    code, data = doctor(capsys, path)
    checks = {c["name"]: c for c in data["remote"]["checks"]}
    assert code == 0 and checks["runtime installed"]["ok"] is True, checks
    assert remote.wait_no_processes() == []


def test_doctor_reports_a_wrong_host_key(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                         remote: Remote) -> None:
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True, timeout=30)
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{remote.port} "
                     + " ".join(Path(f"{other}.pub").read_text().split()[:2]) + "\n")
    code, data = doctor(capsys, _config_file(tmp_path, remote, known_hosts_file=str(wrong)))
    assert code == 1 and data["remote"]["ok"] is False
    [check] = data["remote"]["checks"]
    assert check["name"] == "connect" and "host key" in check["detail"]


def test_doctor_text_output(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                            remote: Remote) -> None:
    assert main(["--config", str(_config_file(tmp_path, remote)), "doctor"]) == 0
    out = capsys.readouterr().out
    assert "remote (terminal.backend: ssh): ok" in out and "socket forwarding" in out


def test_a_server_refusing_socket_forwarding_is_reported(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from execengine.engine import Engine
    from execengine.remote.ssh import RemoteError

    from .sshd import loopback_remote

    with loopback_remote(forwarding=False) as refusing:
        code, data = doctor(capsys, _config_file(tmp_path, refusing))
        checks = {c["name"]: c for c in data["remote"]["checks"]}
        assert code == 1 and checks["connect"]["ok"] and not checks["socket forwarding"]["ok"]
        assert "AllowStreamLocalForwarding" in checks["socket forwarding"]["detail"]
        config = Config().with_overrides(refusing.overrides())
        with ToolRegistry(config) as reg, Engine(config, reg) as engine, \
                pytest.raises(RemoteError, match="forwarding .* failed"):
            engine.execute("print('never')")
        assert refusing.wait_no_processes() == []
