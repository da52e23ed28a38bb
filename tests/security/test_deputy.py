"""The confused deputy: a script attacks the host *through the tools it may call*.

Every script-callable tool that touches the host (``read_file``, ``write_file``, ``patch``,
``search_files``, ``terminal``) against every target: a secret file (directly and through
a symlink the script makes), writes outside the working directory (directly and through a
symlinked folder), the engine's config file, the host's environment, a loopback service,
a host process, a daemon outliving the execution, a setuid plant. Each runs through the
real engine at every level; level ``none`` is the negative control (its tools run
unconfined on the host, so each probe must find its leak there). The policy's allow-list
lets the allowed cases through (extra writable and readable roots).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading

import pytest

from execengine.config import load_config
from execengine.engine.core import Engine
from execengine.proctree import RUN_TOKEN_VAR, carriers

from .conftest import SECRET_NAME, binds, level_params, wait_until

LEVEL = level_params()


@pytest.fixture
def world(tmp_path):
    root = tmp_path / "host"
    work = root / "work"
    work.mkdir(parents=True)
    canary = root / "canary"
    canary.mkdir()
    canary.chmod(0o777)
    private = root / "private"
    private.mkdir(mode=0o700)
    secret = private / "secret.txt"
    secret.write_text("TOP SECRET\n")
    secret.chmod(0o600)
    config_file = root / "config.yaml"
    config_file.write_text("approvals:\n  mode: allow\n")
    return {"root": root, "work": work, "canary": canary, "private": private,
            "secret": secret, "config": config_file}


def _engine(level: str, world, **overrides):
    config = load_config(world["config"]).with_overrides({
        "code_execution.isolation": level, "code_execution.min_isolation": level,
        "code_execution.timeout": 30, **overrides})
    return Engine(config)


def run(level, world, code, **overrides):
    with _engine(level, world, **overrides) as engine:
        result = engine.execute(code, cwd=str(world["work"]))
    assert result.status == "success", (result.error, result.output, result.stderr)
    line = [x for x in result.output.splitlines() if x.startswith("{")][-1]
    return json.loads(line)


FILE_ATTACK = """
import json, os
from hermes_tools import read_file, write_file, patch, search_files
os.symlink({secret!r}, "link_file")
os.symlink({private!r}, "link_dir")
os.symlink({canary!r}, "link_canary")
res = {{
    "read_abs": read_file({secret!r}),
    "read_link": read_file("link_file"),
    "read_link_dir": read_file("link_dir/secret.txt"),
    "search": search_files("TOP SECRET", path={private!r}),
    "search_link": search_files("TOP SECRET", path="link_dir"),
    "write_abs": write_file({canary!r} + "/w1", "x"),
    "write_link_dir": write_file("link_canary/w2", "x"),
    "write_dotdot": write_file("../canary/w3", "x"),
    "patch_create": patch(mode="patch", patch="--- /dev/null\\n+++ link_canary/w4\\n"
                                              "@@ -0,0 +1 @@\\n+x\\n"),
    "config_write": write_file({config!r}, "approvals:\\n  mode: allow\\nx: 1\\n"),
    "config_read": read_file({config!r}),
    "ok": write_file("inside.txt", "fine"),
}}
print(json.dumps(res))
"""


@pytest.mark.parametrize("level", LEVEL)
def test_file_tools_stay_in_the_roots(level, world):
    res = run(level, world, FILE_ATTACK.format(**{k: str(v) for k, v in world.items()}))
    text = json.dumps({k: v for k, v in res.items() if k != "config_read"})
    writes = [n for n in ("w1", "w2", "w3", "w4") if (world["canary"] / n).exists()]
    config_changed = "x: 1" in world["config"].read_text()
    assert (world["work"] / "inside.txt").read_text() == "fine"
    if level == "none":  # the negative control: unconfined tools reach everything
        assert text.count("TOP SECRET") >= 4, text
        assert writes == ["w1", "w2", "w3", "w4"], res
        return
    assert "TOP SECRET" not in text, text
    assert writes == [], res
    assert not config_changed
    assert "error" in res["config_read"]


TERMINAL_ATTACK = """
import json
from hermes_tools import terminal
def sh(cmd):
    return terminal(cmd)
res = {{
    "cat": sh("cat {secret}"),
    "write": sh("echo x > {canary}/t1; "
                "python3 -c \\"import shutil; shutil.copy('/etc/hostname', '{canary}/t2')\\""),
    "config": sh("echo 'code_execution: {{isolation: none}}' >> {config}"),
    "environ": sh("cat /proc/{host_pid}/environ | tr '\\\\0' '\\\\n' | grep {secret_name}"),
    "tcp": sh("python3 -c \\"import socket; "
              "socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')\\""),
    "kill": sh("kill -9 {victim}; echo rc=$?"),
    "daemon": sh("setsid nohup sleep 45 {marker} >/dev/null 2>&1 & echo started"),
    "setuid": sh("cp /bin/true plant && chmod 4755 plant; stat -c %a plant"),
    "rmtree": sh("python3 -c \\"import shutil; shutil.rmtree('{canary}/keep')\\"; "
                 "cd .. && rm -rf canary/keep2"),
}}
print(json.dumps(res))
"""


@pytest.fixture
def targets(world, host_secret):
    tcp = socket.create_server(("127.0.0.1", 0))
    tcp.setblocking(False)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, SECRET_NAME: host_secret})
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    marker = "45" + "0" * 2 + str(secrets.randbelow(10 ** 6))  # a number sleep accepts
    (world["canary"] / "keep").mkdir()
    (world["canary"] / "keep2").mkdir()
    yield {"tcp": tcp, "holder": holder, "victim": victim, "marker": marker}
    tcp.close()
    for proc in (holder, victim):
        proc.kill()
        proc.wait()
    for proc in _daemons(marker):
        proc.kill()


def _daemons(marker):
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def _accepted(listener) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize("level", LEVEL)
def test_terminal_from_a_script_is_sandboxed(level, world, targets, host_secret):
    code = TERMINAL_ATTACK.format(
        secret=world["secret"], canary=world["canary"], config=world["config"],
        host_pid=targets["holder"].pid, secret_name=SECRET_NAME,
        port=targets["tcp"].getsockname()[1], victim=targets["victim"].pid,
        marker=targets["marker"])
    res = run(level, world, code)
    out = {k: v.get("output", "") + v.get("error", "") for k, v in res.items()}
    leaks = {
        "cat": "TOP SECRET" in out["cat"],
        "write": (world["canary"] / "t1").exists() or (world["canary"] / "t2").exists(),
        "config": "isolation: none" in world["config"].read_text(),
        "environ": host_secret in out["environ"],
        "tcp": _accepted(targets["tcp"]),
        "kill": wait_until(lambda: targets["victim"].poll() is not None, 1.0),
        "daemon": bool(_daemons(targets["marker"])),
        "setuid": bool((world["work"] / "plant").exists()
                       and (world["work"] / "plant").stat().st_mode & 0o6000),
        "rmtree": not (world["canary"] / "keep").exists()
        or not (world["canary"] / "keep2").exists(),
    }
    if level == "none":
        # the host terminal backend's own teardown ends the daemon there (not a sandbox)
        assert all(v for k, v in leaks.items() if k != "daemon"), (leaks, out)
        return
    assert not any(leaks.values()), (leaks, out)
    assert all(v.get("sandbox") == level for v in res.values()), res


ALLOWED = """
import json
from hermes_tools import read_file, write_file, terminal
res = {{
    "write": write_file({extra!r} + "/by_tool.txt", "tool"),
    "terminal": terminal("echo shell > {extra}/by_shell.txt; cat {readable}/public.txt"),
    "read": read_file({readable!r} + "/public.txt"),
}}
print(json.dumps(res))
"""


@pytest.mark.parametrize("level", LEVEL)
def test_the_allow_list_lets_the_allowed_cases_through(level, world):
    extra = world["root"] / "extra"
    extra.mkdir()
    readable = world["root"] / "shared"
    readable.mkdir()
    (readable / "public.txt").write_text("PUBLIC\n")
    res = run(level, world, ALLOWED.format(extra=str(extra), readable=str(readable)),
              **{"policy.writable_roots": [str(extra)],
                 "policy.readable_roots": ["/usr", "/etc", "/lib", "/lib64", "/bin",
                                           str(readable)]})
    assert (extra / "by_tool.txt").read_text() == "tool", res
    assert (extra / "by_shell.txt").read_text() == "shell\n", res
    assert "PUBLIC" in res["terminal"]["output"], res
    assert "PUBLIC" in res["read"]["content"], res


@pytest.mark.parametrize("level", LEVEL)
def test_nothing_of_a_sandboxed_command_outlives_the_execution(level, world):
    marker = "46" + str(secrets.randbelow(10 ** 6))
    run(level, world, "import json\nfrom hermes_tools import terminal\n"
                      f"print(json.dumps(terminal('sleep {marker} & echo bg')))")
    if level == "none":
        return  # host commands: the terminal backend's own teardown (not a sandbox)
    assert wait_until(lambda: not _daemons(marker), 3.0)
    assert not carriers(RUN_TOKEN_VAR, marker)


PROTECTED = """
import json
from hermes_tools import write_file, terminal
res = {}
for name in ("direct", "config_direct"):
    path = ".git/hooks/pre-commit" if name == "direct" else "config.yaml"
    try:
        with open(path, "a") as fh:
            fh.write("#pwned\\n")
        res[name] = "written"
    except OSError as e:
        res[name] = type(e).__name__
res["tool"] = write_file(".git/hooks/post-checkout", "#pwned")
res["tool_config"] = write_file("config.yaml", "approvals:\\n  mode: allow\\n#pwned\\n")
res["terminal"] = terminal("echo '#pwned' > .git/hooks/pre-push; echo rc=$?")
print(json.dumps(res))
"""


@pytest.mark.parametrize("level", LEVEL)
def test_files_that_run_later_outside_stay_unwritten(level, world):
    """``.git/hooks`` and the engine's own config file kept in the working directory: the
    tools never write them (at ``restricted`` and ``isolated``); at ``isolated`` they are
    read-only binds, so the script and its commands cannot either."""
    work = world["work"]
    (work / ".git" / "hooks").mkdir(parents=True)
    config_file = work / "config.yaml"
    config_file.write_text("approvals:\n  mode: allow\n")
    world = {**world, "config": config_file}
    res = run(level, world, PROTECTED)
    hooks = sorted(p.name for p in (work / ".git" / "hooks").iterdir())
    config_pwned = "#pwned" in config_file.read_text()
    if level == "none":
        assert hooks == ["post-checkout", "pre-commit", "pre-push"] and config_pwned, res
        return
    assert "error" in res["tool"] and "error" in res["tool_config"], res
    if level == "isolated":
        assert hooks == [] and not config_pwned, res
    else:  # restricted: Landlock cannot carve a read-only hole in a writable folder
        assert "post-checkout" not in hooks, res


LEFT_RUNNING = """
import os, threading, time
from hermes_tools import terminal
threading.Thread(target=terminal, daemon=True, kwargs={{
    "command": "touch started; exec sleep {marker}", "timeout": 3600}}).start()
deadline = time.monotonic() + 20
while not os.path.exists("started") and time.monotonic() < deadline:
    time.sleep(0.01)
print("started" if os.path.exists("started") else "never started", flush=True)
while not os.path.exists("go") and time.monotonic() < deadline + 20:
    time.sleep(0.01)  # the test has seen the command running: now the script ends
os._exit(0)
"""


def _left_running(engine, world, code: str, marker: str, **kw) -> None:
    """Run ``code`` (:data:`LEFT_RUNNING`) in a thread; the negative control: its command
    (an hour's timeout, which the terminal tool accepts) is seen running while the
    execution runs; then the script is let go, and the command must be gone soon after.
    Before, the tool refused the script's timeout (10**9 s) and the command never ran,
    while "started" still matched the script's "never started": nothing was tested."""
    done: dict[str, object] = {}
    thread = threading.Thread(target=lambda: done.update(
        result=engine.execute(code, cwd=str(world["work"]), **kw)))
    thread.start()
    try:
        assert wait_until(lambda: _daemons(marker), 30), "the command never ran"
    finally:
        (world["work"] / "go").touch()
        thread.join(60)
    result = done["result"]
    assert result.status == "success", result  # type: ignore[attr-defined]
    assert result.output.splitlines()[0] == "started", result  # type: ignore[attr-defined]
    assert wait_until(lambda: not _daemons(marker), 3.0), _daemons(marker)


@pytest.mark.parametrize("level", LEVEL)
def test_a_command_still_running_when_its_execution_ends_is_stopped(level, world):
    """A script that leaves a terminal call running (a thread, then exit; or a timeout)
    does not leave its command behind until the command's own timeout, which the script
    chose: the execution's end interrupts the calls still running for it, at every level
    (at ``none`` the host's terminal backend stops it as on a timeout)."""
    marker = "47" + str(secrets.randbelow(10 ** 6))
    with _engine(level, world) as engine:
        _left_running(engine, world, LEFT_RUNNING.format(marker=marker), marker)


@pytest.mark.parametrize("level", LEVEL)
def test_a_command_a_cell_left_running_is_stopped_when_the_cell_ends(level, world):
    marker = "48" + str(secrets.randbelow(10 ** 6))
    cell = LEFT_RUNNING.format(marker=marker).replace("os._exit(0)", "")
    with _engine(level, world) as engine:
        _left_running(engine, world, cell, marker, session="s")
        # the session lives on: its next cell runs
        assert engine.execute("print(6 * 7)", cwd=str(world["work"]),
                              session="s").output.strip() == "42"


PRIVATE_FOLDER = """
import json
from hermes_tools import read_file, terminal
print(json.dumps({{
    "read": read_file({path!r}),
    "cd": terminal("cat open.txt", workdir={folder!r}),
    "denied_cd": terminal("ls", workdir={denied!r}),
}}))
"""


@pytest.mark.parametrize("level", LEVEL)
def test_a_world_readable_file_in_a_private_folder_stays_out_of_reach(level, world):
    """Beneath a readable root, a file anyone may read inside a folder only its owner may
    search is out of the sandbox uid's reach: ``read_file`` refuses it, and a command may
    not start in that folder (it is entered before the uid drop). Nor in a denied path.
    At ``none`` (the negative control) both reach it."""
    shared = world["root"] / "shared"
    locked = shared / "locked"
    locked.mkdir(parents=True)
    locked.chmod(0o700)
    (locked / "open.txt").write_text("BEHIND A LOCKED DOOR\n")
    (locked / "open.txt").chmod(0o644)
    denied = shared / "denied"
    denied.mkdir()
    res = run(level, world, PRIVATE_FOLDER.format(path=str(locked / "open.txt"),
                                                  folder=str(locked), denied=str(denied)),
              **{"policy.readable_roots": ["/usr", "/etc", "/lib", "/lib64", "/bin",
                                           str(shared)],
                 "files.denied_paths": [str(denied)]})
    text = json.dumps(res)
    if level == "none":
        assert text.count("BEHIND A LOCKED DOOR") == 2, res
        assert res["denied_cd"]["exit_code"] == 0, res
        return
    assert "BEHIND A LOCKED DOOR" not in text, res
    assert "may not" in res["read"]["error"] and "may not enter" in res["cd"]["error"], res
    assert "protected location" in res["denied_cd"]["error"], res


FORGER = """
import json, os
try:
    os.rename("results.jsonl", ".hidden")
    with open("results.jsonl", "w") as fh:
        fh.write(json.dumps({"id": "b", "status": "success", "output": "FORGED"}) + "\\n")
    print("renamed")
except OSError as exc:
    print("refused", type(exc).__name__)
"""


@pytest.mark.parametrize("level", LEVEL)
def test_a_batch_task_cannot_forge_the_batch_results(level, world, capsys, monkeypatch):
    """The results file in the tasks' working directory is protected: at ``isolated``, and
    ``restricted`` as root, a read-only bind (a task can neither write, rename nor replace
    it); where a task can move it (``none``, the negative control; ``restricted`` on a host
    that is not root) the batch says so and fails instead of leaving forged records where
    the next run reads them."""
    from execengine.cli import main

    monkeypatch.setenv("HOME", str(world["root"]))
    monkeypatch.delenv("EXECENGINE_CONFIG", raising=False)
    work = world["work"]
    tasks, out = work / "tasks.jsonl", work / "results.jsonl"
    tasks.write_text(json.dumps({"id": "a", "code": FORGER, "cwd": str(work)}) + "\n"
                     + json.dumps({"id": "b", "code": "print('B')", "cwd": str(work)}) + "\n")
    config = world["root"] / "batch.yaml"
    config.write_text(f"code_execution:\n  isolation: {level}\n  min_isolation: {level}\n"
                      "  mode: project\n")
    rc = main(["--config", str(config), "batch", str(tasks), "--out", str(out),
               "--concurrency", "1", "--json"])
    captured = capsys.readouterr()
    if binds(level):
        assert rc == 0, captured.err
        records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
        assert records["a"]["output"].startswith("refused"), records["a"]
        assert records["b"]["output"] == "B\n", records["b"]
        assert not (work / ".hidden").exists()
        return
    assert rc == 2 and "was moved or replaced while the batch ran" in captured.err, (
        rc, captured.err)
    assert "FORGED" in out.read_text()  # the probe did replace it: the batch noticed


HIDDEN = """
import json, os
from hermes_tools import terminal
res = {}
for name in ("vault/key.txt", "note.txt"):
    try:
        with open(name) as fh:
            res[name] = fh.read()
    except OSError as exc:
        res[name] = type(exc).__name__
try:
    res["listing"] = os.listdir("vault")
except OSError as exc:
    res["listing"] = type(exc).__name__
res["terminal"] = terminal("cat vault/key.txt note.txt")["output"]
print(json.dumps(res))
"""


@pytest.mark.parametrize("level", [p for p in LEVEL if p.id in ("none", "isolated")])
def test_denied_paths_are_masked_from_the_script_and_its_commands_at_isolated(level, world):
    """A world-readable folder and file the configuration denies, inside the working
    directory: at ``isolated`` an empty mount only root may open hides each from the
    script and its commands. At ``none`` (the negative control) both read them.
    (``restricted`` cannot: Landlock allows folders and cannot carve a hole in one.)"""
    work = world["work"]
    (work / "vault").mkdir()
    (work / "vault" / "key.txt").write_text("VAULT KEY\n")
    (work / "note.txt").write_text("DENIED NOTE\n")
    res = run(level, world, HIDDEN, **{"files.denied_paths": [str(work / "vault"),
                                                              str(work / "note.txt")]})
    text = json.dumps(res)
    if level == "none":
        assert "VAULT KEY" in res["terminal"] and "DENIED NOTE" in res["terminal"], res
        assert res["listing"] == ["key.txt"], res
        return
    assert "VAULT KEY" not in text and "DENIED NOTE" not in text, res
    assert res["vault/key.txt"] == res["note.txt"] == res["listing"] == "PermissionError", res
    assert (work / "vault" / "key.txt").read_text() == "VAULT KEY\n"  # untouched on the host


DISARM = """
import subprocess, sys
for module in list(sys.modules.values()):  # the kernel's own sweep, replaced
    if hasattr(module, "kill_leftover_processes") and hasattr(module, "Kernel"):
        module.kill_leftover_processes = lambda seconds=2.0: 0
subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
kept = 42
print("planted")
"""


#: the kernel's subreaper flag turned off, then a setsid + double fork: the orphan is
#: reparented out of the kernel's tree (to the namespace's init, or further up)
ORPHAN = """
import ctypes, os
ctypes.CDLL(None).prctl(36, 0, 0, 0, 0)
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{marker}"])
    os._exit(0)
os.waitpid(pid, 0)
kept = 42
print("planted")
"""


@pytest.mark.parametrize("probe", [DISARM, ORPHAN], ids=["disarmed", "orphaned"])
@pytest.mark.parametrize("level", LEVEL)
def test_a_cell_that_disarms_the_kernels_sweep_leaves_nothing_running(level, probe, world):
    """The kernel kills a cell's leftovers in the sandbox, where the cell can replace
    that code or leave its tree; the host sweeps the kernel's cgroup after the cell too,
    every process that was not there when the kernel started. At ``none`` (no cgroup: the
    negative control) the process keeps running."""
    marker = "49" + str(secrets.randbelow(10 ** 6))
    with _engine(level, world) as engine:
        try:
            result = engine.execute(probe.format(marker=marker), cwd=str(world["work"]),
                                    session="s")
            assert result.status == "success" and result.output == "planted\n", result
            if level == "none":
                # a process that has just exec'd can read an empty command line a moment
                # longer (Popen returns once the exec is past its point of no return)
                assert wait_until(lambda: _daemons(marker), 10.0), "the probe planted nothing"
            else:
                assert wait_until(lambda: not _daemons(marker), 3.0), _daemons(marker)
            again = engine.execute("print(kept)", cwd=str(world["work"]), session="s")
            assert again.output.strip() == "42", again  # the kernel and its state live on
        finally:
            for proc in _daemons(marker):
                proc.kill()
