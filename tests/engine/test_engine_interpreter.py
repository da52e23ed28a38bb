from __future__ import annotations

import os
import sys

from execengine.engine import interpreter


def _fake(tmp_path, name, body):
    bin_ = tmp_path / name / "bin"
    bin_.mkdir(parents=True)
    exe = bin_ / "python3"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return tmp_path / name


def test_project_mode_prefers_a_working_venv(tmp_path):
    venv = _fake(tmp_path, "venv", f'exec {sys.executable} "$@"\n')
    chosen = interpreter.choose("project", environ={"VIRTUAL_ENV": str(venv)})
    assert chosen == str(venv / "bin" / "python3")
    assert interpreter.choose("strict", environ={"VIRTUAL_ENV": str(venv)}) == \
        os.path.abspath(sys.executable)


def test_old_or_broken_interpreters_fall_back_to_host(tmp_path):
    old = _fake(tmp_path, "old", "echo 3 6\n")
    broken = _fake(tmp_path, "broken", "exit 1\n")
    env = {"VIRTUAL_ENV": str(old), "CONDA_PREFIX": str(broken)}
    assert interpreter.choose("project", environ=env) == os.path.abspath(sys.executable)


def test_probe_is_cached(tmp_path):
    counter = tmp_path / "count"
    venv = _fake(tmp_path, "v", f'echo x >> {counter}\nexec {sys.executable} "$@"\n')
    exe = str(venv / "bin" / "python3")
    assert interpreter.probe(exe) and interpreter.probe(exe)
    assert counter.read_text().count("x") == 1
