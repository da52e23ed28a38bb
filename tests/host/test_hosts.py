"""The host seam: chosen once from the configuration; what each host provides; and that
nothing outside the host implementations asks which backend is configured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from execengine.config import Config
from execengine.errors import ToolError
from execengine.host import LocalHost, make_host
from execengine.host.fake import FakeHost
from execengine.host.ssh import SshHost
from execengine.launch.inprocess import InProcessLauncher
from execengine.registry import ToolRegistry
from execengine.rpc.memory import MemoryServer
from execengine.terminal.fake import FakeBackend

PACKAGE = Path(__file__).resolve().parents[2] / "execengine"
#: the only places that may name a backend or branch on one
HOST_IMPLEMENTATIONS = ("host", "remote")
#: a backend check: ``backend == "ssh"``, ``level in ("none", "ssh")``, ``!= "ssh"``...
BACKEND_CHECK = re.compile(r"""(?:==|!=|\bin\b|\bnot in\b)\s*[\(\[{]?[^#\n]*["'](?:ssh|local)["']"""
                           r"""|\.backend\s*(?:==|!=|\bin\b)""")


def test_the_configured_backend_picks_the_host_without_connecting() -> None:
    assert isinstance(make_host(Config()), LocalHost)
    cfg = Config().with_overrides({"terminal.backend": "ssh", "ssh.host": "h.invalid",
                                   "code_execution.min_isolation": "isolated"})
    host = make_host(cfg)
    try:
        # the remote is confined by the remote host, not by our levels: min_isolation
        # does not apply, and nothing connects until something runs
        assert isinstance(host, SshHost) and host.new_launcher().level == "ssh"
    finally:
        host.close()


def test_no_module_outside_the_hosts_asks_which_backend_is_configured() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in HOST_IMPLEMENTATIONS or rel.name == "config.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if BACKEND_CHECK.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []


def test_the_backend_check_finds_what_it_must() -> None:
    """The negative control of the grep above: the shapes the old code used are found."""
    for line in ('if config.terminal.backend == "ssh":', 'if level in ("none", "ssh"):',
                 "elif level == 'ssh':", 'if cfg.backend != "local":'):
        assert BACKEND_CHECK.search(line), line
    assert not BACKEND_CHECK.search('kind = "ssh"')


def test_a_registry_runs_on_the_host_it_is_given(tmp_path) -> None:
    terminal = FakeBackend()
    host = FakeHost(Config(), launcher=lambda: InProcessLauncher(MemoryServer(), lambda p: 0),
                    cwd=str(tmp_path), terminal=lambda: terminal)
    (tmp_path / "a.txt").write_text("one\n")
    with ToolRegistry.with_builtins(Config(), plugins=False, host=host) as reg:
        out = reg.dispatch("read_file", {"path": "a.txt"})
        assert "one" in out
        reg.dispatch("terminal", {"command": "echo hi"})
        assert terminal.calls == [("run", "echo hi")]
    assert terminal.closed
    with pytest.raises(ToolError, match="closed"):
        reg.services.host  # noqa: B018 - the closed registry's services are gone
