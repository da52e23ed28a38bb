import json
import threading

from execengine.batch import FakeExecutor, run_batch
from execengine.engine import ExecutionResult


def write_tasks(path, n, *, extra=()):
    lines = [json.dumps({"id": f"t{i}", "code": f"print({i})"}) for i in range(n)]
    path.write_text("\n".join([*lines, *extra]) + "\n")


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def echo(task):
    return ExecutionResult("success", output=task.code)


def test_every_line_gets_one_record_and_bad_lines_do_not_stop(tmp_path):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    write_tasks(tasks, 5, extra=['{"id": "x"}', "garbage", json.dumps({"id": "z", "code": ""})])
    summary = run_batch(str(tasks), str(out), FakeExecutor(echo), progress=False)
    recs = records(out)
    assert len(recs) == 8
    assert summary.counts == {"success": 6, "invalid": 2}
    bad = {r["line"]: r for r in recs if r["status"] == "invalid"}
    assert bad[6]["error"] == "line 6: missing 'code'" and bad[6]["id"] == "x"
    assert bad[7]["error"].startswith("line 7: not valid JSON") and bad[7]["id"] is None


def test_stop_keeps_what_finished_and_a_rerun_finishes_the_rest(tmp_path):
    tasks, out = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    write_tasks(tasks, 10)
    stop = threading.Event()
    first = run_batch(str(tasks), str(out), FakeExecutor(echo, stop_after=4), stop=stop,
                      progress=False)
    assert first.stopped and first.done == 4
    assert "rerun the same command" in first.text()
    second = run_batch(str(tasks), str(out), FakeExecutor(echo), progress=False)
    assert second.skipped == 4 and second.done == 6 and not second.stopped
    assert sorted(r["id"] for r in records(out)) == sorted(f"t{i}" for i in range(10))


def test_missing_tasks_file_is_a_batch_error(tmp_path):
    import pytest

    from execengine.errors import BatchError

    with pytest.raises(BatchError, match="cannot read tasks file"):
        run_batch(str(tmp_path / "nope.jsonl"), str(tmp_path / "r.jsonl"),
                  FakeExecutor(echo))
    assert not (tmp_path / "r.jsonl").exists()


def test_progress_shows_on_a_terminal_with_the_remaining_total(tmp_path):
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tasks, out = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    write_tasks(tasks, 3)
    run_batch(str(tasks), str(out), FakeExecutor(echo, stop_after=1), progress=False)
    tty = Tty()
    run_batch(str(tasks), str(out), FakeExecutor(echo), stream=tty)
    assert "2/2 100%" in tty.getvalue()
    pipe = io.StringIO()
    run_batch(str(tasks), str(out), FakeExecutor(echo), stream=pipe, restart=True)
    assert pipe.getvalue() == ""
