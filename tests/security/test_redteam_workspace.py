"""Red team: what stays protected in a working directory the script acts in as its owner.

The script, its ``terminal`` commands and its file tools change the project as the folder's
owner would; not these, at any sandboxed level:

* ``.git`` (its ``config``, its ``hooks/``: a new hook, an existing one changed): read-only;
* a path ``policy.protected_paths`` lists (a batch's results file): read-only;
* a credential ``files.denied_paths`` lists, and the engine's own config file kept in the
  folder: masked (neither read nor written).

Each attack runs as root in a root-owned project and in a user's project (where the script
acts as that user). Level ``none`` is the negative control: the same probes change ``.git``
and the protected file and read the credential there (its tools, unconfined, still refuse
the denied paths, as documented).
"""

from __future__ import annotations

import json
import os

import pytest

from execengine.config import load_config
from execengine.engine.core import Engine

from .conftest import ATTEMPT, level_params

LEVEL = level_params()
USER = 4242

PROBE = ATTEMPT + r"""
from hermes_tools import patch, read_file, terminal, write_file
fsmonitor = '[core]\n\tfsmonitor = "touch PWNED"\n'
attempt("git_config", lambda: open(".git/config", "a").write(fsmonitor))
attempt("new_hook", lambda: open(".git/hooks/post-checkout", "w").write("#!/bin/sh\n"))
attempt("edit_hook", lambda: open(".git/hooks/pre-commit", "a").write("touch PWNED\n"))
attempt("protected", lambda: open("out/results.jsonl", "a").write("forged\n"))
attempt("write_credential", lambda: open(".env", "a").write("X=1\n"))
attempt("write_config", lambda: open("execengine.yaml", "a").write("x: 1\n"))
def read(path):
    try:
        with open(path) as fh:
            return "SECRET" in fh.read()
    except OSError as exc:
        return type(exc).__name__
res["read_credential"] = read(".env")
res["read_config"] = read("execengine.yaml")
t = terminal("cat .env execengine.yaml; echo x >> .git/config; echo x >> out/results.jsonl; "
             "echo x >> .git/hooks/pre-commit")
res["terminal_read"] = "SECRET" in t.get("output", "")
def tool(name, result):
    res["tool_" + name] = "refused" if "error" in result or result.get(
        "success") is False else "done"
tool("git_config", write_file(".git/config", fsmonitor))
tool("new_hook", write_file(".git/hooks/post-checkout", "#!/bin/sh\n"))
tool("edit_hook", patch(path=".git/hooks/pre-commit", old_string="exit 0",
                        new_string="touch PWNED"))
tool("protected", write_file("out/results.jsonl", "forged\n"))
tool("write_credential", write_file(".env", "X=1\n"))
tool("write_config", patch(path="execengine.yaml", old_string="allow", new_string="deny"))
res["tool_read_credential"] = "SECRET" in json.dumps(read_file(".env"))
res["tool_read_config"] = "SECRET" in json.dumps(read_file("execengine.yaml"))
print(json.dumps(res))
"""

FILES = {
    ".git/config": "[core]\n\tbare = false\n",
    ".git/hooks/pre-commit": "#!/bin/sh\nexit 0\n",
    "out/results.jsonl": "real\n",
    ".env": "TOKEN=SECRET\n",
    "execengine.yaml": "approvals:\n  execute_code: allow\n# SECRET-CONFIG\n",
}


def _project(tmp_path, owner: int):
    work = tmp_path / "work"
    for rel, text in FILES.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    (work / ".git" / "hooks" / "pre-commit").chmod(0o755)
    for path in [work, *work.rglob("*")]:
        os.chown(path, owner, owner)
    return work


def _as_found(work) -> dict[str, str]:
    return {rel: (work / rel).read_text() for rel in FILES}


@pytest.mark.skipif(os.geteuid() != 0, reason="as root (the owner of the files differs)")
@pytest.mark.parametrize("session", [None, "s"], ids=["one-shot", "session"])
@pytest.mark.parametrize("owner", [0, USER], ids=["roots-project", "users-project"])
@pytest.mark.parametrize("level", LEVEL)
def test_git_protected_paths_and_credentials_stay_protected(level, owner, session, tmp_path):
    """A one-shot script, and a session's cell (its kernel is launched alike)."""
    work = _project(tmp_path, owner)
    config = load_config(work / "execengine.yaml").with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.mode": "project", "code_execution.timeout": 30,
        "policy.protected_paths": [str(work / "out" / "results.jsonl")],
        "files.denied_paths": [str(work / ".env")]})
    with Engine(config) as engine:
        r = engine.execute(PROBE, cwd=str(work), session=session)
    assert r.status == "success", (r.error, r.output[-2000:], r.stderr[-2000:])
    res = json.loads(r.output.strip().splitlines()[-1])
    hooks = sorted(p.name for p in (work / ".git" / "hooks").iterdir())
    if level == "none":  # the negative control: the probes see every leak
        for key in ("git_config", "new_hook", "edit_hook", "protected", "write_credential",
                    "write_config"):
            assert res[key] == "done", (key, res)
        assert res["read_credential"] is True and res["read_config"] is True, res
        assert res["terminal_read"] is True, res
        assert "fsmonitor" in (work / ".git" / "config").read_text()
        assert "post-checkout" in hooks
        # unconfined tools write .git and the protected file; the denied paths never
        assert res["tool_git_config"] == res["tool_protected"] == "done", res
        assert res["tool_read_credential"] is False and res["tool_write_credential"] == (
            "refused"), res
        return
    leaks = {k: v for k, v in res.items() if v in ("done", True)}
    assert leaks == {}, res
    assert _as_found(work) == FILES
    assert hooks == ["pre-commit"]
    assert not (work / "PWNED").exists()
