from __future__ import annotations

import json

from execengine.cli import main
from execengine.isolation.detect import detect


def test_doctor_reports_layers_and_the_auto_level(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    report = detect()
    for layer in report.layers:
        assert layer.name in out
    assert f"auto would choose: {report.best}" in out


def test_doctor_json_and_min_isolation_error(capsys, tmp_path):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["auto"] == detect().best
    assert {x["name"] for x in data["layers"]} >= {"landlock", "seccomp", "namespaces"}
    assert all(x["detail"] for x in data["layers"])  # a reason for every layer
    cfg = tmp_path / "config.yaml"
    cfg.write_text("code_execution:\n  isolation: none\n  min_isolation: restricted\n")
    assert main(["--config", str(cfg), "doctor", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["chosen"] is None and "min_isolation" in data["error"]
