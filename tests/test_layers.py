"""The layers of docs/architecture.md hold on the package's real imports (import-linter's
contracts in pyproject.toml; annotations under TYPE_CHECKING do not count)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    return subprocess.run([exe, "--no-cache", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_the_layer_contracts_are_kept() -> None:
    done = _lint()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


def test_a_layer_upside_down_is_found(tmp_path: Path) -> None:
    """The negative control: the same checker, told that launch sits below isolation (it
    imports it), reports the contract broken."""
    config = tmp_path / "contracts.ini"
    config.write_text("[importlinter]\nroot_package = execengine\n"
                      "exclude_type_checking_imports = true\n\n"
                      "[importlinter:contract:upside-down]\nname = upside down\n"
                      "type = layers\nlayers =\n    execengine.isolation\n"
                      "    execengine.launch\n")
    done = _lint("--config", str(config))
    assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout[-2000:]
    assert "execengine.launch" in done.stdout
