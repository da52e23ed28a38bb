"""Deciding parallel vs sequential, and running batches."""

from __future__ import annotations

import json
import os
import threading

import pytest

from execengine.agent.batch import ParallelPolicy, paths_overlap, plan_batch, run_parallel
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry


@pytest.fixture(scope="module")
def builtin_policy():
    with ToolRegistry.with_builtins(plugins=False) as reg:
        return ParallelPolicy.from_registry(reg)


@pytest.fixture
def plan(builtin_policy):
    def plan(tmp_path, *calls):
        return plan_batch(list(calls), cwd=str(tmp_path), policy=builtin_policy)
    return plan


def test_builtin_policy_comes_from_the_declarations(builtin_policy):
    assert builtin_policy.parallel_safe == {"web_search", "web_extract", "session_search"}
    assert builtin_policy.path_scoped == {"read_file": False, "search_files": False,
                                          "write_file": True, "patch": True}
    assert builtin_policy.path_defaults == {"search_files": "."}


def test_no_policy_runs_everything_sequentially(tmp_path):
    p = plan_batch([("read_file", {"path": "a"}), ("read_file", {"path": "b"})])
    assert not p.parallel and "not known to be parallel-safe" in p.reason


def test_a_users_tool_declares_itself_parallel_safe(tmp_path):
    schema = {"description": "d", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}}}}
    saver = {"description": "d", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}}}}
    with ToolRegistry() as reg:
        reg.register("lookup", "mine", schema, lambda a, c: "",
                     policy=ToolPolicy(read_only=True, parallel_safe=True))
        reg.register("save", "mine", saver, lambda a, c: "",
                     policy=ToolPolicy(parallel_safe=True))
        reg.register("undeclared", "mine", schema, lambda a, c: "")
        reg.register("blind_writer", "mine", schema, lambda a, c: "",
                     policy=ToolPolicy(parallel_safe=True))  # no path: cannot be checked
        policy = ParallelPolicy.from_registry(reg)
    cwd = str(tmp_path)
    assert plan_batch([("lookup", {}), ("save", {"path": "x"}), ("save", {"path": "y"})],
                      policy=policy, cwd=cwd).parallel
    assert not plan_batch([("save", {"path": "x"}), ("save", {"path": "x"})],
                          policy=policy, cwd=cwd).parallel
    for other in ("undeclared", "blind_writer"):
        p = plan_batch([("lookup", {}), (other, {})], policy=policy, cwd=cwd)
        assert not p.parallel and other in p.reason


def test_read_only_tools_run_in_parallel(tmp_path, plan):
    p = plan(tmp_path, ("web_search", {"query": "a"}), ("web_extract", {"urls": []}),
             ("read_file", {"path": "a"}), ("read_file", {"path": "a"}))
    assert p.parallel  # reading one file twice is harmless


def test_single_call_is_sequential(tmp_path, plan):
    assert not plan(tmp_path, ("web_search", {"query": "a"})).parallel


@pytest.mark.parametrize("name", ["clarify", "terminal", "execute_code", "my_plugin_tool"])
def test_unsafe_or_unknown_tools_force_sequential(tmp_path, name, plan):
    p = plan(tmp_path, ("web_search", {"query": "a"}), (name, {}))
    assert not p.parallel and name in p.reason


def test_writes_to_different_files_run_in_parallel(tmp_path, plan):
    assert plan(tmp_path, ("write_file", {"path": "a.txt", "content": ""}),
                ("patch", {"path": "b.txt", "old_string": "x", "new_string": "y"}),
                ("read_file", {"path": "c.txt"})).parallel


@pytest.mark.parametrize("a, b", [
    ("a.txt", "a.txt"),
    ("a.txt", "./sub/../a.txt"),
    ("dir/x.txt", "dir"),
    ("dir", "dir/deep/x.txt"),
])
def test_overlapping_writer_paths_force_sequential(tmp_path, a, b, plan):
    p = plan(tmp_path, ("write_file", {"path": a, "content": ""}), ("read_file", {"path": b}))
    assert not p.parallel and "overlaps" in p.reason


def test_absolute_and_relative_spellings_overlap(tmp_path, plan):
    assert not plan(tmp_path, ("write_file", {"path": "f", "content": ""}),
                    ("read_file", {"path": str(tmp_path / "f")})).parallel


def test_symlinks_are_resolved(tmp_path, plan):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert not plan(tmp_path, ("write_file", {"path": "link/f", "content": ""}),
                    ("read_file", {"path": "real/f"})).parallel


def test_search_over_a_directory_being_written_is_sequential(tmp_path, plan):
    assert not plan(tmp_path, ("write_file", {"path": "src/a.py", "content": ""}),
                    ("search_files", {"pattern": "x"})).parallel  # default path "."
    assert plan(tmp_path, ("write_file", {"path": "src/a.py", "content": ""}),
                ("search_files", {"pattern": "x", "path": "docs"})).parallel


def test_multi_file_patch_has_no_single_path(tmp_path, plan):
    p = plan(tmp_path, ("patch", {"mode": "patch", "patch": "..."}),
             ("read_file", {"path": "x"}))
    assert not p.parallel


def test_sibling_prefix_is_not_overlap(tmp_path, plan):
    assert not paths_overlap(tmp_path / "ab", tmp_path / "a")
    assert plan(tmp_path, ("write_file", {"path": "a", "content": ""}),
                ("write_file", {"path": "ab", "content": ""})).parallel


def test_policy_is_extensible(tmp_path):
    policy = ParallelPolicy(parallel_safe=frozenset({"lookup"}),
                            path_scoped={"save": True})
    assert plan_batch([("lookup", {}), ("save", {"path": "x"})], policy=policy,
                      cwd=str(tmp_path)).parallel
    assert not plan_batch([("read_file", {"path": "a"}), ("lookup", {})], policy=policy,
                          cwd=str(tmp_path)).parallel


def test_run_parallel_keeps_order_and_bounds_the_pool():
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}
    release = threading.Event()

    def job(i):
        def run():
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
                if state["peak"] >= 2:
                    release.set()
            release.wait(2)
            with lock:
                state["now"] -= 1
            return str(i)
        return run

    res = run_parallel([job(i) for i in range(6)], max_workers=2, timeout=10)
    assert res.results == [str(i) for i in range(6)] and not res.timed_out
    assert state["peak"] == 2


def test_batch_timeout_gives_timeout_results():
    release = threading.Event()

    def slow():
        release.wait(10)
        return "late"

    try:
        res = run_parallel([lambda: "fast", slow, slow], max_workers=1, timeout=0.2,
                           names=["a", "b", "c"])
    finally:
        release.set()
    assert res.results[0] == "fast"
    assert res.timed_out == {1, 2}
    assert "while it was running" in json.loads(res.results[1])["error"]
    assert "before it started" in json.loads(res.results[2])["error"]


def test_job_exception_becomes_error_result():
    def boom():
        raise RuntimeError("nope")
    res = run_parallel([boom, lambda: "ok"], max_workers=2, timeout=5)
    assert "nope" in json.loads(res.results[0])["error"] and res.results[1] == "ok"
