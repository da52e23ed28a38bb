"""The entry points of the equivalence suite: each runs every case its own way.

A column is a function ``run(cases, world) -> {case name: Observed}``. It runs the cases
through one real entry point at the default isolation level, as the CLI or a host would
call it; what it returns is the result JSON the model (or the batch's reader) would see.
Adding an entry point is adding a function here and its name to ``cases.COLUMNS``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from execengine.config import Config, load_config
from execengine.context import CallContext
from execengine.engine import Engine
from execengine.mcp import attach
from execengine.registry import ToolRegistry

from .cases import DATA, MAX_STDOUT, MAX_TOOL_CALLS, MEMORY_MB, TIMEOUT, Case, Observed

TOY = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "toy.py"


@dataclass
class World:
    """What the cases run in: a project folder, a config file per group."""

    project: Path
    configs: dict[str, Path]
    env: dict[str, str]


def config_text(group: str, project: Path) -> str:
    """The configuration of a group: the defaults (the level included), a project folder,
    limits small enough for the cases, the toy MCP server."""
    lines = [
        "code_execution:",
        f"  timeout: {TIMEOUT}",
        f"  max_tool_calls: {MAX_TOOL_CALLS}",
        f"  max_stdout_bytes: {MAX_STDOUT}",
        f"  memory_mb: {MEMORY_MB}",
        "terminal:",
        f"  cwd: {json.dumps(str(project))}",
        "mcp_servers:",
        "  toy:",
        f"    command: {json.dumps(sys.executable)}",
        f"    args: [{json.dumps(str(TOY))}]",
    ]
    if group == "deny":
        lines += ["approvals:", "  execute_code: deny"]
    return "\n".join(lines) + "\n"


def make_world(tmp: Path) -> World:
    project = tmp / "project"
    project.mkdir()
    (project / "data.txt").write_text(DATA)
    os.chmod(tmp, 0o755)
    configs = {}
    for group in ("main", "deny"):
        path = tmp / f"{group}.yaml"
        path.write_text(config_text(group, project))
        configs[group] = path
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXECENGINE_")}
    env["HOME"] = str(tmp)  # no user config in the child CLIs
    return World(project, configs, env)


def _groups(cases: list[Case]) -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = {}
    for case in cases:
        out.setdefault(case.group, []).append(case)
    return out


@contextlib.contextmanager
def _engine(path: Path, overrides: dict[str, Any] | None = None) -> Iterator[Engine]:
    config = load_config(str(path))
    if overrides:
        config = config.with_overrides(overrides)
    registry = ToolRegistry.with_builtins(config, plugins=False)
    try:
        attach(registry)
        with Engine(config, registry) as engine:
            yield engine
    finally:
        registry.close()


def _api(engine: Engine, case: Case, session: str | None) -> Observed:
    assert case.code is not None, "argument cases are for the model's entry points"
    return Observed.of(engine.execute(case.code, session=session).to_model_dict())


def run_oneshot(cases: list[Case], world: World) -> dict[str, Observed]:
    out = {}
    for group, members in _groups(cases).items():
        with _engine(world.configs[group]) as engine:
            for case in members:
                out[case.name] = _api(engine, case, None)
    return out


def run_session(cases: list[Case], world: World) -> dict[str, Observed]:
    out = {}
    for group, members in _groups(cases).items():
        with _engine(world.configs[group]) as engine:
            for case in members:
                out[case.name] = _api(engine, case, "eq")
    return out


def _dispatch(registry: ToolRegistry, case: Case) -> Observed:
    text = registry.dispatch("execute_code", case.args(), CallContext(task_id="eq"))
    return Observed.of(json.loads(text))


def run_tool(cases: list[Case], world: World) -> dict[str, Observed]:
    out = {}
    for group, members in _groups(cases).items():
        with _engine(world.configs[group]) as engine:
            for case in members:
                out[case.name] = _dispatch(engine.registry, case)
    return out


def run_mcp(cases: list[Case], world: World) -> dict[str, Observed]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    out: dict[str, Observed] = {}
    for group, members in _groups(cases).items():
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "execengine", "--config", str(world.configs[group]), "mcp"],
            env=world.env, cwd=str(world.project))

        async def main(members: list[Case] = members, params: Any = params) -> None:
            async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                for case in members:
                    result = await session.call_tool("execute_code", case.args())
                    payload = json.loads(result.content[0].text)
                    out[case.name] = Observed.of(payload)

        anyio.run(main)
    return out


def run_batch(cases: list[Case], world: World) -> dict[str, Observed]:
    out: dict[str, Observed] = {}
    for group, members in _groups(cases).items():
        tasks = world.project.parent / f"tasks-{group}.jsonl"
        results = world.project.parent / f"results-{group}.jsonl"
        lines = [json.dumps({"id": str(i), **case.args()}) for i, case in enumerate(members)]
        tasks.write_text("\n".join(lines) + "\n")
        proc = subprocess.run(
            [sys.executable, "-m", "execengine", "--config", str(world.configs[group]),
             "batch", str(tasks), "--out", str(results), "--concurrency", "2"],
            env=world.env, cwd=str(world.project), capture_output=True, text=True,
            timeout=300)
        assert results.exists(), proc.stderr[-3000:]
        by_id = {}
        for line in results.read_text().splitlines():
            row = json.loads(line)
            by_id[row.get("id")] = row
        for i, case in enumerate(members):
            row = by_id.get(str(i))
            assert row is not None, (case.name, proc.stderr[-3000:])
            if row["status"] == "invalid":  # a task line that is not a task
                out[case.name] = Observed("error", "", error=row.get("error", ""))
            else:
                out[case.name] = Observed.of(row)
    return out


def ssh_runner(remote: Any) -> Callable[[list[Case], World], dict[str, Observed]]:
    """The SSH host's column: the execute_code tool of a registry on the remote."""

    def run(cases: list[Case], world: World) -> dict[str, Observed]:
        (remote.home / "data.txt").write_text(DATA)
        os.chown(remote.home / "data.txt", *_ids(remote.home))
        out = {}
        for group, members in _groups(cases).items():
            overrides = remote.overrides(**{"ssh.cwd": str(remote.home)})
            if group == "main":
                # the remote is not confined by a level of ours, so (as at level none) a
                # script needs approval: this host approves them all; "deny" still denies
                overrides["approvals.execute_code"] = "allow"
            with _engine(world.configs[group], overrides) as engine:
                for case in members:
                    out[case.name] = _dispatch(engine.registry, case)
        return out

    return run


def _ids(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid


def config_of(world: World, group: str) -> Config:
    return load_config(str(world.configs[group]))
