import json

import pytest

from execengine.batch import ResultWriter, Task, TaskOutcome
from execengine.batch.outcome import invalid_outcome
from execengine.batch.results import scan
from execengine.batch.task import InvalidLine
from execengine.engine import ExecutionResult
from execengine.errors import BatchError


def outcome(tid: str, status: str = "success") -> TaskOutcome:
    return TaskOutcome(id=tid, line=1, result=ExecutionResult(status, output=tid),
                       worker="w")


def test_records_are_the_result_plus_id_worker_timings(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultWriter(str(out)) as w:
        w.write(TaskOutcome(id="a", line=3, result=ExecutionResult("success", output="hi"),
                            worker="local:x", meta={"k": 1}))
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["id"] == "a" and record["line"] == 3 and record["worker"] == "local:x"
    assert record["status"] == "success" and record["output"] == "hi"
    assert record["meta"] == {"k": 1} and record["attempts"] == 1
    assert set(record["timings"]) == {"submitted_at", "started_at", "finished_at",
                                      "queue_seconds", "run_seconds", "total_seconds"}


def test_resume_skips_recorded_ids_and_drops_a_cut_off_last_line(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultWriter(str(out)) as w:
        w.write(outcome("a"))
        w.write(outcome("b", "error"))
    whole = out.read_bytes()
    out.write_bytes(whole + b'{"id": "c", "status": "succ')  # killed mid-write
    with ResultWriter(str(out)) as w:
        assert w.done.ids == {"a", "b"}
        assert w.done.dropped_bytes == len(b'{"id": "c", "status": "succ')
        assert w.done.covers(Task("a", "x")) and not w.done.covers(Task("c", "x"))
        w.write(outcome("c"))
    lines = out.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b", "c"]


def test_invalid_records_are_skipped_by_line_so_a_fixed_line_runs(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultWriter(str(out)) as w:
        w.write(invalid_outcome(InvalidLine(4, "line 4: bad", "x")))
    done, _ = scan(str(out))
    assert done.ids == set() and done.invalid_lines == {4}
    assert done.covers(InvalidLine(4, "again"))
    assert not done.covers(Task("x", "print(1)", line=4))


def test_garbage_complete_lines_are_ignored(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text('not json\n[1]\n{"id": "a", "status": "success"}\n')
    done, end = scan(str(out))
    assert done.ids == {"a"} and end == len(out.read_bytes())


def test_restart_empties_the_file(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultWriter(str(out)) as w:
        w.write(outcome("a"))
    with ResultWriter(str(out), restart=True) as w:
        assert w.done.ids == set()
    assert out.read_text() == ""


def test_a_results_file_moved_while_written_is_an_error_at_close(tmp_path):
    out = tmp_path / "r.jsonl"
    writer = ResultWriter(str(out))
    writer.write(outcome("a"))
    assert not writer.replaced()
    out.rename(tmp_path / "moved.jsonl")
    out.write_text('{"id": "a", "status": "success"}\n')  # a forged file in its place
    assert writer.replaced()
    with pytest.raises(BatchError, match="was moved or replaced while the batch ran"):
        writer.close()
    assert json.loads((tmp_path / "moved.jsonl").read_text())["id"] == "a"


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path):
    """Before, it was taken for a line cut short: dropped, and its task ran again."""
    out = tmp_path / "r.jsonl"
    with ResultWriter(str(out)) as w:
        w.write(outcome("a"))
        w.write(outcome("b"))
    out.write_bytes(out.read_bytes().rstrip(b"\n"))
    with ResultWriter(str(out)) as w:
        assert w.done.ids == {"a", "b"} and w.done.dropped_bytes == 0
        assert not w.done.covers(Task("c", "x"))
        w.write(outcome("c"))
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["a", "b", "c"]
    assert out.read_text().endswith("}\n")
