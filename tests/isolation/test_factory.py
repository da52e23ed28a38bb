from __future__ import annotations

import importlib.metadata
import logging
import sys

import pytest

from execengine.config import Config
from execengine.errors import ConfigError, IsolationError
from execengine.isolation.detect import IsolationReport, Layer
from execengine.launch.factory import ENTRY_POINT_GROUP, choose_level, make_launcher


def report(restricted: bool, isolated: bool) -> IsolationReport:
    layers = (Layer("landlock", restricted, "ABI 7" if restricted else "kernel without it"),
              Layer("namespaces", isolated, "ok" if isolated else "needs root"))
    reasons = {}
    if not restricted:
        reasons["restricted"] = "landlock: kernel without it"
    if not isolated:
        reasons["isolated"] = "namespaces: needs root"
    return IsolationReport(layers, {"none": True, "restricted": restricted,
                                    "isolated": isolated}, reasons)


def test_auto_picks_the_highest_available():
    assert choose_level("auto", None, report(True, True)) == "isolated"
    assert choose_level("auto", None, report(True, False)) == "restricted"
    assert choose_level("auto", None, report(False, False)) == "none"


def test_unavailable_explicit_level_degrades_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert choose_level("isolated", None, report(True, False)) == "restricted"
    assert "needs root" in caplog.text


def test_min_isolation_turns_a_downgrade_into_an_error():
    with pytest.raises(IsolationError, match="needs root"):
        choose_level("auto", "isolated", report(True, False))
    with pytest.raises(IsolationError, match="landlock"):
        choose_level("isolated", "restricted", report(False, False))
    assert choose_level("none", None, report(True, True)) == "none"


def test_make_launcher_none_is_the_local_launcher():
    cfg = Config().with_overrides({"code_execution.isolation": "none"})
    launcher = make_launcher(cfg, report(True, True))
    assert launcher.level == "none"
    launcher.close()


def test_make_launcher_refuses_below_minimum():
    cfg = Config().with_overrides({"code_execution.min_isolation": "isolated"})
    with pytest.raises(IsolationError):
        make_launcher(cfg, report(True, False))


PLUGIN = '''
from execengine.launch.local import LocalLauncher


class MicroVmLauncher(LocalLauncher):
    level = "isolated"
    built_with = None

    @classmethod
    def from_config(cls, config, report=None):
        launcher = cls()
        launcher.built_with = config.code_execution.memory_mb
        return launcher


class Weak(LocalLauncher):
    level = "none"


class NotOne:
    level = "none"
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A real installed distribution (a dist-info with entry points) on sys.path."""
    (tmp_path / "ee_plugin_launcher.py").write_text(PLUGIN)
    info = tmp_path / "ee_plugin_launcher-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ee-plugin-launcher\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[execengine.launchers]\n"
        "microvm = ee_plugin_launcher:MicroVmLauncher\n"
        "weak = ee_plugin_launcher:Weak\n"
        "notone = ee_plugin_launcher:NotOne\n"
        "missing = ee_plugin_launcher:Gone\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("ee_plugin_launcher", None)


def test_builtin_launchers_are_declared_in_the_entry_point_group():
    from execengine.launch.factory import BUILTIN_LAUNCHERS, launcher_names
    names = launcher_names()
    assert {k: names[k] for k in BUILTIN_LAUNCHERS} == BUILTIN_LAUNCHERS
    installed = {ep.name: ep.value
                 for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert {k: installed[k] for k in BUILTIN_LAUNCHERS} == BUILTIN_LAUNCHERS


def test_a_plugin_launcher_is_chosen_by_name_and_built_from_the_config(plugin):
    cfg = Config().with_overrides({"code_execution.launcher": "microvm",
                                   "code_execution.memory_mb": 321})
    launcher = make_launcher(cfg, report(True, True))
    try:
        assert type(launcher).__name__ == "MicroVmLauncher"
        assert launcher.built_with == 321  # type: ignore[attr-defined]
    finally:
        launcher.close()


def test_a_plugin_launcher_below_min_isolation_is_refused(plugin):
    cfg = Config().with_overrides({"code_execution.launcher": "weak",
                                   "code_execution.min_isolation": "restricted"})
    with pytest.raises(IsolationError, match="restricted"):
        make_launcher(cfg, report(True, True))


@pytest.mark.parametrize("name, message", [
    ("nosuch", "no launcher named 'nosuch'.*microvm"),
    ("notone", "not a Launcher subclass"),
    ("missing", "cannot be loaded"),
])
def test_a_bad_launcher_name_is_a_config_error(plugin, name, message):
    cfg = Config().with_overrides({"code_execution.launcher": name})
    with pytest.raises(ConfigError, match=message):
        make_launcher(cfg, report(True, True))
