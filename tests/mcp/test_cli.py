"""`execengine tools` and `doctor` report each MCP server's state."""

from __future__ import annotations

import json
import sys

from _mcp_helpers import TOY

from execengine.cli import main


def _config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        f"mcp: {{cache_dir: {str(tmp_path / 'cache')!r}}}\n"
        "mcp_servers:\n"
        f"  toy:\n    command: {sys.executable}\n    args: [{TOY!r}]\n"
        "  gone:\n    command: /nonexistent/mcp-server\n"
        "  off:\n    command: x\n    enabled: false\n")
    return str(path)


def test_tools_and_doctor_show_server_state(tmp_path, capsys, no_leaks):
    config = _config(tmp_path)
    assert main(["--config", config, "tools", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    states = {s["name"]: (s["state"], s["tools"]) for s in listing["mcp_servers"]}
    assert states == {"gone": ("failed", 0), "off": ("disabled", 0), "toy": ("ready", 10)}
    assert any(t["name"] == "mcp_toy_echo" and t["toolset"] == "mcp-toy"
               for t in listing["tools"])
    assert "command not found" in listing["load_errors"]["mcp server gone"]

    main(["--config", config, "doctor"])
    text = capsys.readouterr().out
    assert "MCP SERVER" in text
    row = next(line for line in text.splitlines() if line.startswith("toy "))
    # the second run found the catalogue cached: the lazy server has not started
    assert row.split()[1:5] == ["stdio", "stopped", "10", "cached"]
