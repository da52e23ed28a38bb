"""Red team: a model-issued ``execute_code`` at level ``none`` with nobody to ask.

Through the registry, as an agent loop dispatches it (no approver in the call context):
for every approval setting that does not say "this host is trusted", nothing runs — the
script would create a marker file, which must not exist — and the model gets a
``BLOCKED:`` refusal; also with ``reset``, with a session id, and with a smart mode that has
no classifier. ``approvals.execute_code: allow`` is the negative control (the same script
runs and makes the marker). A script cannot call ``execute_code`` itself.
"""

from __future__ import annotations

import json

import pytest

from execengine.config import Config
from execengine.context import CallContext
from execengine.engine.core import Engine
from execengine.registry import ToolRegistry

SCRIPT = "open({marker!r}, 'w').write('ran')\nprint('ran')\n"


def _dispatch(tmp_path, approvals: dict, args: dict, **ctx: object) -> str:
    config = Config().with_overrides({
        "code_execution.isolation": "none", "code_execution.timeout": 30,
        **{f"approvals.{k}": v for k, v in approvals.items()}})
    with ToolRegistry.with_builtins(config, plugins=False) as registry, \
            Engine(config, registry):
        return registry.dispatch("execute_code", args,
                                 CallContext(cwd=str(tmp_path), **ctx))  # type: ignore[arg-type]


@pytest.mark.parametrize("approvals", [
    {}, {"execute_code": "auto"}, {"execute_code": "ask"}, {"execute_code": "deny"},
    {"mode": "smart"}, {"mode": "deny"}, {"mode": "ask", "execute_code": "ask"},
], ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()) or "defaults")
@pytest.mark.parametrize("extra", [{}, {"reset": True}], ids=["plain", "reset"])
def test_nobody_to_ask_means_nothing_runs(tmp_path, approvals, extra):
    marker = tmp_path / "marker"
    text = _dispatch(tmp_path, approvals,
                     {"code": SCRIPT.format(marker=str(marker)), **extra},
                     task_id="t1", session_id="conv-1")
    assert not marker.exists(), text
    assert "BLOCKED" in text, text


def test_the_negative_control_runs_on_a_trusted_host(tmp_path):
    marker = tmp_path / "marker"
    text = _dispatch(tmp_path, {"execute_code": "allow"},
                     {"code": SCRIPT.format(marker=str(marker))}, task_id="t1")
    assert marker.exists() and json.loads(text)["status"] == "success", text


def test_a_script_cannot_call_execute_code(tmp_path):
    marker = tmp_path / "marker"
    text = _dispatch(tmp_path, {"execute_code": "allow"},
                     {"code": SCRIPT.format(marker=str(marker))}, task_id="t1",
                     origin="execute_code")
    assert not marker.exists() and "cannot be called from a script" in text, text
