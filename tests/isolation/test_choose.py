from __future__ import annotations

import logging

import pytest

from execengine.config import Config
from execengine.errors import IsolationError
from execengine.isolation.choose import choose_level, make_launcher
from execengine.isolation.detect import IsolationReport, Layer


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
