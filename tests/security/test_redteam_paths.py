"""Red team: path tricks through the script's file tools, at every level.

``/proc/self/root``, ``/proc/self/cwd`` and ``/proc/self/environ`` (in the *host's* tool,
``self`` is the engine), ``..`` relative and absolute, doubled slashes, ``/dev/fd``, a NUL
byte, a newline, an over-long name, a 300-deep path, and the protected ``.git/hooks``
spelled with ``.``, ``..`` and ``//``. Confined (``restricted``, ``isolated``, ``none`` with
``policy.confine_at_none``), nothing leaks and no hook is written; the negative control is
``none`` unconfined, where the same probes read the secret and the host's environment and
write the hooks. Every call gets a reply (the host stays up).
"""

from __future__ import annotations

import json

import pytest

from execengine.config import load_config
from execengine.engine.core import Engine

from .conftest import SECRET_NAME, level_params

LEVELS = [pytest.param(p.values[0], False, marks=p.marks, id=p.id) for p in level_params()]
LEVELS.append(pytest.param("none", True, id="none-confined"))

PROBES = """
import json, os
from hermes_tools import read_file, write_file, search_files
def t(f, *a, **k):
    try:
        return json.dumps(f(*a, **k))[:300]
    except Exception as e:  # a tool call must answer, not raise
        return "RAISED " + type(e).__name__ + ": " + str(e)[:200]
S = {secret!r}
res = {{
    "proc_root": t(read_file, "/proc/self/root" + S),
    "proc_cwd": t(read_file, "/proc/self/cwd/" + os.path.relpath(S, "/")),
    "proc_environ": t(read_file, "/proc/self/environ"),
    "search_proc": t(search_files, {secret_name!r}, path="/proc/self", target="content"),
    "dotdot_rel": t(read_file, "../private/secret.txt"),
    "dotdot_abs": t(read_file, os.getcwd() + "/../private/./secret.txt"),
    "double_slash": t(read_file, "//" + S.lstrip("/").replace("/", "//")),
    "dev_fd": t(read_file, "/dev/fd/0"),
    "nul": t(write_file, "a\\x00b", "x"),
    "newline": t(write_file, "new\\nline.txt", "x"),
    "long": t(read_file, "x" * 5000),
    "deep": t(write_file, "a/" * 300 + "f", "x"),
    "hooks": t(write_file, ".git/hooks/h1", "x"),
    "hooks_dot": t(write_file, ".git/./hooks/h2", "x"),
    "hooks_dotdot": t(write_file, "sub/../.git/hooks/h3", "x"),
    "hooks_slash": t(write_file, ".git//hooks//h4", "x"),
}}
print(json.dumps(res))
"""


@pytest.mark.parametrize(("level", "confine_at_none"), LEVELS)
def test_path_tricks_stay_in_the_roots(level, confine_at_none, tmp_path, host_secret):
    work = tmp_path / "work"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "hooks").chmod(0o777)  # writable to any uid: only policy protects it
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    secret = private / "secret.txt"
    secret.write_text("TOP SECRET\n")
    secret.chmod(0o600)
    config_file = tmp_path / "config.yaml"
    config_file.write_text("approvals:\n  mode: allow\n")
    config = load_config(config_file).with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 30, "policy.confine_at_none": confine_at_none})
    with Engine(config) as engine:
        r = engine.execute(PROBES.format(secret=str(secret), secret_name=SECRET_NAME),
                           cwd=str(work))
    assert r.status == "success", (r.error, r.output, r.stderr[-1000:])
    res = json.loads([x for x in r.output.splitlines() if x.startswith("{")][-1])
    assert not [k for k, v in res.items() if v.startswith("RAISED")], res
    leaks = sorted(k for k, v in res.items() if "TOP SECRET" in v or host_secret in v)
    hooks = sorted(p.name for p in (work / ".git" / "hooks").iterdir())
    if level == "none" and not confine_at_none:  # the negative control
        assert {"proc_root", "dotdot_rel", "dotdot_abs", "double_slash"} <= set(leaks), res
        assert hooks == ["h1", "h2", "h3", "h4"], hooks
        return
    assert leaks == [], res
    assert hooks == [], (hooks, res)
    assert "error" in res["nul"] and "error" in res["long"], res
