from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from pathlib import Path

from execengine.config import Config
from execengine.launch.base import Launcher, LaunchSpec
from execengine.launch.local import LocalLauncher
from execengine.policy import ToolPolicy
from execengine.proctree import RUN_TOKEN_VAR, carriers
from execengine.registry import ToolRegistry

CHILDREN = Path(__file__).resolve().parent.parent / "children"

ECHO_SCHEMA = {
    "description": "Search the web. Returns results.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to search"},
        "limit": {"type": "integer", "default": 5},
        "sleep": {"type": "number", "description": "seconds to sleep first"},
    }, "required": ["query"]},
}
TERMINAL_SCHEMA = {
    "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {
        "command": {"type": "string"},
        "timeout": {"type": "integer"},
        "background": {"type": "boolean", "default": False},
        "pty": {"type": "boolean", "default": False},
    }, "required": ["command"]},
}


class Recorder(Launcher):
    """Wraps the real launcher: records every spec, optionally swaps the child's argv
    (to run a scripted misbehaving child in place of the runtime)."""

    level = "none"

    def __init__(self, argv: list[str] | None = None) -> None:
        self.inner = LocalLauncher()
        self.argv = argv
        self.specs: list[LaunchSpec] = []
        #: every staging and socket directory handed to a child
        self.dirs: list[str] = []

    def launch(self, spec: LaunchSpec):
        self.dirs += [os.path.dirname(spec.argv[-1]), spec.socket_dir or ""]
        if self.argv:
            spec = dataclasses.replace(spec, argv=self.argv)
        self.specs.append(spec)
        return self.inner.launch(spec)


def make_registry(config: Config, calls: list | None = None, *,
                  cls: type[ToolRegistry] = ToolRegistry) -> ToolRegistry:
    reg = cls(config)
    lock = threading.Lock()
    #: set to cut short every web_search "sleep" (so no tool thread outlives its test)
    reg.release_sleepers = threading.Event()  # type: ignore[attr-defined]

    def web_search(args, ctx):
        if args.get("sleep"):
            reg.release_sleepers.wait(args["sleep"])  # type: ignore[attr-defined]
        if calls is not None:
            with lock:
                calls.append((args, ctx.origin, ctx.task_id))
        return {"query": args["query"], "limit": args.get("limit"), "origin": ctx.origin}

    def terminal(args, ctx):
        return {"output": args["command"], "exit_code": 0, "args": sorted(args)}

    def read_file(args, ctx):
        return json.dumps(json.dumps({"content": "double-encoded"}))  # decoded twice

    script = ToolPolicy(script_callable=True)
    reg.register("web_search", "web", ECHO_SCHEMA, web_search, policy=script)
    reg.register("terminal", "terminal", TERMINAL_SCHEMA, terminal,
                 policy=ToolPolicy(script_callable=True, hidden_params={"background", "pty"}))
    reg.register("read_file", "file", {"description": "Read.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}},
        "required": ["path"]}}, read_file, policy=script)
    reg.register("memory", "memory", {"description": "m", "parameters": {
        "type": "object", "properties": {}}}, lambda a, c: "{}",
        policy=ToolPolicy(agent_level=True))
    return reg


def engine_config(**over) -> Config:
    base = {"code_execution.kill_grace": 0.5, "code_execution.hello_timeout": 5.0,
            "code_execution.timeout": 20.0, "code_execution.mode": "strict"}
    base.update({f"code_execution.{k}": v for k, v in over.items()})
    return Config().with_overrides(base)




def stray_count(spec: LaunchSpec) -> int:
    return len(carriers(RUN_TOKEN_VAR, spec.run_token))


def child_argv(name: str) -> list[str]:
    return [sys.executable, str(CHILDREN / name)]
