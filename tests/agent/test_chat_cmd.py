"""``execengine chat`` against the local chat-completions server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from execengine.cli import main

from .conftest import HttpStatus, assert_valid_transcript, call, reply


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"agent:\n  memory_file: {tmp_path / 'memory.json'}\n"
                    "  api_key_env: EXECENGINE_TEST_KEY\n")
    return path


def test_chat_prints_the_answer(chat_server, config_file, capsys):
    chat_server.play(reply("Forty-two."))
    code = main(["--config", str(config_file), "chat", "what is it?",
                 "--base-url", chat_server.base_url, "--model", "m1"])
    out = capsys.readouterr()
    assert (code, out.out) == (0, "Forty-two.\n")
    assert chat_server.requests[0]["model"] == "m1"


def test_chat_json_with_tools_and_budget(chat_server, config_file, capsys):
    chat_server.play(
        reply(None, call("Memory", {"action": "add", "content": "likes tea"}, "m")),
        reply("Noted.", call("todo", {}, "t")),
    )
    code = main(["--config", str(config_file), "chat", "remember tea", "--json",
                 "--base-url", chat_server.base_url, "--model", "m1",
                 "--toolsets", "memory,todo", "--max-iterations", "1"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (data["stop_reason"], data["grace_call"], data["iterations"]) == ("budget", True, 2)
    assert data["tool_calls"][0] | {"id": "m"} == {
        "id": "m", "name": "memory", "requested_name": "Memory", "status": "ok",
        "repair": "case", "executed": True}
    assert sorted(t["function"]["name"] for t in chat_server.requests[0]["tools"]) == [
        "memory", "todo"]
    saved = json.loads((config_file.parent / "memory.json").read_text())
    assert saved["entries"] == ["likes tea"]
    assert_valid_transcript(data["messages"])


def test_chat_reports_http_errors(chat_server, config_file, capsys):
    chat_server.play(HttpStatus(400, {"error": {"message": "model not found"}}))
    code = main(["--config", str(config_file), "chat", "x", "--base-url",
                 chat_server.base_url, "--model", "nope"])
    err = capsys.readouterr().err
    assert code == 1
    assert "HTTP 400" in err and "model not found" in err


def test_chat_without_endpoint_is_a_clear_error(config_file, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = main(["--config", str(config_file), "chat", "x", "--model", "m"])
    assert code == 2
    assert "agent.base_url" in capsys.readouterr().err


def test_chat_unknown_toolset_fails_before_calling_the_model(chat_server, config_file,
                                                             capsys):
    code = main(["--config", str(config_file), "chat", "x", "--base-url",
                 chat_server.base_url, "--model", "m", "--toolsets", "fiel"])
    assert code == 2
    assert "unknown toolset 'fiel'" in capsys.readouterr().err
    assert chat_server.requests == []


def test_chat_as_a_subprocess_uses_the_key_from_the_environment(chat_server, config_file):
    chat_server.play(reply("<think>hmm</think>Done."))
    env = {**os.environ, "EXECENGINE_TEST_KEY": "sk-env"}
    proc = subprocess.run(
        [sys.executable, "-m", "execengine", "--config", str(config_file), "chat", "hi",
         "--base-url", chat_server.base_url, "--model", "m"],
        capture_output=True, text=True, timeout=30, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Done.\n"
    assert chat_server.headers[0]["Authorization"] == "Bearer sk-env"


def _chat_on_a_terminal(chat_server, tmp_path: Path, answer: bytes) -> tuple[str, str]:
    """``execengine chat`` with a pty as stdin, at isolation level none (so the script is
    not confined and the whole-script gate asks); returns (stdout, stderr)."""
    import pty
    import select
    import time

    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"agent:\n  memory_file: {tmp_path / 'memory.json'}\n"
                   "code_execution:\n  isolation: none\n  kill_grace: 0.5\n")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "execengine", "--config", str(cfg), "chat", "go",
         "--base-url", chat_server.base_url, "--model", "m", "--toolsets",
         "code_execution,file"],
        stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "EXECENGINE_TEST_KEY": "k"})
    os.close(slave)
    err = b""
    try:
        deadline = time.monotonic() + 30
        while b"[d]eny: " not in err:
            left = deadline - time.monotonic()
            assert left > 0, err.decode()
            ready, _, _ = select.select([proc.stderr], [], [], left)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)  # type: ignore[union-attr]
                assert chunk, err.decode()
                err += chunk
        os.write(master, answer)
        out, rest = proc.communicate(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return out.decode(), (err + rest).decode()


SECRET_SCRIPT = "API_KEY = 'sk-abcdefghijklmnop1234'\nprint('from script')\n"


def test_chat_on_a_terminal_asks_before_an_unconfined_script(chat_server, tmp_path):
    chat_server.play(reply(None, call("execute_code", {"code": SECRET_SCRIPT}, "x")),
                     reply("Done."))
    out, err = _chat_on_a_terminal(chat_server, tmp_path, b"o\n")
    assert out == "Done.\n"
    # the person is shown the script, redacted
    assert "execute_code wants to run this Python script" in err
    assert "    API_KEY = '[REDACTED]'\n    print('from script')\n" in err
    assert "sk-abcdefghijklmnop1234" not in err
    tool_msg = chat_server.requests[1]["messages"][-1]
    result = json.loads(tool_msg["content"])
    assert result["status"] == "success" and result["output"] == "from script\n"


def test_chat_on_a_terminal_denied_script_never_runs(chat_server, tmp_path):
    chat_server.play(reply(None, call("execute_code", {"code": SECRET_SCRIPT}, "x")),
                     reply("Understood."))
    out, _ = _chat_on_a_terminal(chat_server, tmp_path, b"d\n")
    assert out == "Understood.\n"
    result = json.loads(chat_server.requests[1]["messages"][-1]["content"])
    assert result["status"] == "error" and result["refused_by"] == "approval"
    assert result["error"].startswith("BLOCKED: the user denied this execute_code script.")
    assert result["output"] == ""
