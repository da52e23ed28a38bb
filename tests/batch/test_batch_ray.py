"""The Ray executor on a real local Ray cluster (loopback, 2 CPUs, no dashboard).

Starting the cluster takes 20-35 s on a loaded 2-core machine, hence one cluster for the
module and a longer per-test timeout. The cluster's temp dir is the module's own and is
removed afterwards; every process the cluster started must be gone at the end. Ray 2.60
binds its servers to every interface and will not take a loopback node address, so the
cluster keeps Ray's token authentication on; HOME points at a module directory, where Ray
writes the token (~/.ray/auth_token) and which the command-line test shares.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
import ray
from _batch_helpers import batch_config, engine_has_sessions

from execengine.batch import RayExecutor, Task, run_batch

pytestmark = pytest.mark.timeout(300)

PLUGIN = '''
import os
from execengine.policy import ToolPolicy

SCHEMA = {"description": "who serves this call", "parameters": {"type": "object",
          "properties": {}}}


def register(ctx):
    def where(args, c):
        return {"pid": os.getpid(), "secret": os.environ.get("EE_BATCH_SECRET")}

    ctx.register_tool("held_where", "batchtest", SCHEMA, where,
                      policy=ToolPolicy(script_callable=True, driver_held=True))
    ctx.register_tool("node_where", "batchtest", SCHEMA, where,
                      policy=ToolPolicy(script_callable=True))
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster; yields its GCS address."""
    home = tmp_path_factory.mktemp("home")
    saved = dict(os.environ)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    # a short path: Ray's Unix sockets live under it (108-byte limit)
    temp = tempfile.mkdtemp(prefix="ee-ray-", dir="/tmp")
    os.environ.update(RAY_USAGE_STATS_ENABLED="0", HOME=str(home))
    try:
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp,
                 object_store_memory=80 * 1024 * 1024, log_to_driver=False,
                 logging_level="WARNING")
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)
        deadline = time.monotonic() + 30
        left: list[psutil.Process] = []
        while time.monotonic() < deadline:
            left = [p for p in me.children(recursive=True)
                    if p.pid not in before and _running(p)]
            if not left:
                break
            time.sleep(0.1)
        for p in left:
            p.kill()
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"Ray left processes running: {[p.name() for p in left]}"
        assert not os.path.exists(temp)


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(scope="module")
def plugin_config(tmp_path_factory):
    plugins = tmp_path_factory.mktemp("plugins")
    (plugins / "whereplug.py").write_text(PLUGIN)
    return batch_config(**{"plugins.directory": str(plugins)})


@pytest.fixture(scope="module")
def executor(cluster, plugin_config):
    with RayExecutor(config=plugin_config, concurrency=2) as ex:
        yield ex


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_few_hundred_tasks_with_failing_timing_out_and_malformed(executor, tmp_path):
    lines = []
    for i in range(200):
        if i % 40 == 1:
            lines.append(json.dumps({"id": f"t{i}", "code": "raise ValueError('no')"}))
        elif i % 40 == 2:
            lines.append(json.dumps({"id": f"t{i}", "code": "import time; time.sleep(30)",
                                     "timeout": 0.5}))
        elif i % 40 == 3:
            lines.append('{"id": "broken", ')
        elif i % 40 == 4:
            lines.append(json.dumps({"id": f"t{i}", "code": "print(1)", "timeout": -1}))
        else:
            lines.append(json.dumps({"id": f"t{i}", "code": f"print({i} * 2)"}))
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "results.jsonl"
    tasks.write_text("\n".join(lines) + "\n")
    summary = run_batch(str(tasks), str(out), executor, progress=False)
    recs = records(out)
    assert len(recs) == 200
    assert sorted(r["line"] for r in recs) == list(range(1, 201))
    assert summary.counts == {"success": 180, "error": 5, "timeout": 5, "invalid": 10}
    by_line = {r["line"]: r for r in recs}
    assert by_line[1]["output"] == "0\n"
    assert by_line[42]["status"] == "error" and "ValueError: no" in by_line[42]["error"]
    assert by_line[43]["status"] == "timeout"
    assert by_line[44]["status"] == "invalid" and "not valid JSON" in by_line[44]["error"]
    assert "'timeout' must be a positive number" in by_line[45]["error"]
    ran = [r for r in recs if r["status"] != "invalid"]
    assert all(r["worker"].startswith("ray:") for r in ran)
    assert all(r["timings"]["run_seconds"] > 0 for r in ran)


def test_backpressure_never_more_than_the_slots_in_flight(executor):
    pulled = 0

    def source():
        nonlocal pulled
        for i in range(30):
            pulled += 1
            yield Task(f"b{i}", "pass")

    in_flight = []
    for done, _ in enumerate(executor.run(source()), start=1):
        in_flight.append(pulled - done + 1)  # pulled, less those already yielded
    assert len(in_flight) == 30
    assert max(in_flight) <= executor.concurrency


def test_session_tasks_run_one_at_a_time_on_one_worker_or_are_refused(executor):
    tasks = [Task("s1", "x = 41", session="A"), Task("p", "print(2)"),
             Task("s2", "print(x + 1)", session="A")]
    got = {o.id: o for o in executor.run(tasks)}
    assert got["p"].status == "success"
    if engine_has_sessions():
        assert got["s2"].status == "success" and got["s2"].result.output == "42\n"
        assert got["s1"].worker == got["s2"].worker
    else:
        for tid in ("s1", "s2"):
            assert got[tid].status == "error"
            assert "does not support sessions" in got[tid].result.error
    assert got["s1"].timings.finished <= got["s2"].timings.started  # one at a time


def test_resume_a_half_written_output(executor, tmp_path):
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "results.jsonl"
    all_lines = [json.dumps({"id": f"r{i}", "code": f"print({i})"}) for i in range(20)]
    tasks.write_text("\n".join(all_lines[:10]) + "\n")
    run_batch(str(tasks), str(out), executor, progress=False)
    first = out.read_bytes()
    cut = first[: first.rstrip(b"\n").rfind(b"\n") + 1 + 25]  # last record cut mid-write
    out.write_bytes(cut)
    kept = {json.loads(line)["id"] for line in cut.splitlines()[:-1]}
    assert len(kept) == 9
    tasks.write_text("\n".join(all_lines) + "\n")
    summary = run_batch(str(tasks), str(out), executor, progress=False)
    assert summary.skipped == 9 and summary.done == 11
    recs = records(out)  # every line parses: the cut-off one was dropped
    assert sorted(r["id"] for r in recs) == sorted(f"r{i}" for i in range(20))


def test_driver_held_tool_is_served_on_the_driver(executor, monkeypatch, tmp_path):
    # set after the cluster started: the nodes' processes never had it
    monkeypatch.setenv("EE_BATCH_SECRET", "s3cret")
    node_pid = executor.workers()[0]["pid"]
    code = ("import json\nfrom hermes_tools import held_where, node_where\n"
            "print(json.dumps([held_where(), node_where()]))\n")
    (outcome,) = list(executor.run([Task("held", code, toolsets=("batchtest",))]))
    assert outcome.status == "success", outcome.result
    held, node = json.loads(outcome.result.output)
    assert held == {"pid": os.getpid(), "secret": "s3cret"}
    # negative control: a tool that is not driver-held runs on the node, without the secret
    assert node == {"pid": node_pid, "secret": None}
    assert outcome.result.tool_calls_made == 2


def test_workers_that_do_not_start_in_time_are_a_clear_error(cluster):
    from execengine.errors import BatchError

    with pytest.raises(BatchError, match="node workers did not start within"):
        RayExecutor(config=batch_config(), start_timeout=0.001)
    assert ray.is_initialized()  # not this executor's Ray: left running


def test_worker_killed_mid_run_gives_one_result_per_task(cluster, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    slow = ("import pathlib, time\n"
            f"mark = pathlib.Path({str(marks)!r}, {{name!r}})\n"
            "if mark.exists():\n    print('second attempt')\nelse:\n"
            "    mark.touch()\n    time.sleep(60)\n")
    lines = [json.dumps({"id": "unsafe", "code": slow.format(name="unsafe")}),
             json.dumps({"id": "safe", "code": slow.format(name="safe"), "retry_safe": True})]
    lines += [json.dumps({"id": f"k{i}", "code": f"print({i})"}) for i in range(30)]
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "results.jsonl"
    tasks.write_text("\n".join(lines) + "\n")
    with RayExecutor(config=batch_config(), concurrency=2) as ex:
        (victim,) = ex.workers()
        box: dict = {}
        runner = threading.Thread(target=lambda: box.update(
            summary=run_batch(str(tasks), str(out), ex, progress=False)))
        runner.start()
        deadline = time.monotonic() + 60
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(p.name for p in marks.iterdir()) == ["safe", "unsafe"]
        os.kill(victim["pid"], signal.SIGKILL)
        runner.join(180)
        assert not runner.is_alive()
        workers_after = ex.workers()
    recs = records(out)
    assert sorted(r["id"] for r in recs) == sorted(["unsafe", "safe"]
                                                   + [f"k{i}" for i in range(30)])
    by_id = {r["id"]: r for r in recs}
    assert by_id["unsafe"]["status"] == "worker_lost"
    assert by_id["unsafe"]["error"].startswith("worker lost: ")
    assert "not marked retry_safe" in by_id["unsafe"]["error"]
    assert by_id["unsafe"]["attempts"] == 1
    assert by_id["safe"]["status"] == "success"
    assert by_id["safe"]["output"] == "second attempt\n"
    assert by_id["safe"]["attempts"] == 2
    assert all(by_id[f"k{i}"]["status"] == "success" for i in range(30))
    assert box["summary"].counts == {"success": 31, "worker_lost": 1}
    assert [w["pid"] for w in workers_after] != [victim["pid"]]  # replaced on its node


def test_cli_on_ray_stops_on_ctrl_c_and_resumes(cluster, tmp_path):
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "results.jsonl"
    cfg = tmp_path / "config.yaml"
    cfg.write_text("code_execution:\n  isolation: none\n  kill_grace: 0.5\n")
    n = 16
    tasks.write_text("".join(json.dumps({"id": f"c{i}", "code": "import time; "
                                         f"time.sleep({0.05 if i < 3 else 0.6})"}) + "\n"
                             for i in range(n)))
    argv = [sys.executable, "-m", "execengine", "--config", str(cfg), "batch", str(tasks),
            "--out", str(out), "--ray", cluster, "--json"]
    env = dict(os.environ)  # HOME: the module's, holding the cluster's token
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and len(out.read_text().splitlines()) >= 3:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    first = json.loads(stdout)
    assert first["stopped"] and 3 <= first["done"] < n
    done_first = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["skipped"] == len(done_first) and second["done"] == n - len(done_first)
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(f"c{i}" for i in range(n))
