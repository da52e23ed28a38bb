import io

from execengine.batch import Progress, Summary, TaskOutcome, Timings
from execengine.batch.progress import percentile
from execengine.engine import ExecutionResult


class Tty(io.StringIO):
    def isatty(self):
        return True


def add(summary: Summary, status: str, seconds: float) -> None:
    summary.add(TaskOutcome(id="x", line=1, result=ExecutionResult(status),
                            timings=Timings(0.0, 1.0, 1.0 + seconds)))


def test_percentile_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) == 0.0


def test_summary_counts_by_status_and_percentiles():
    s = Summary()
    for _ in range(98):
        add(s, "success", 0.1)
    add(s, "timeout", 5.0)
    add(s, "error", 9.0)
    s.finished = s.started + 10.0
    d = s.to_dict()
    assert d["counts"] == {"success": 98, "error": 1, "timeout": 1}
    assert d["tasks_per_second"] == 10.0
    assert d["run_seconds_p50"] == 0.1 and d["run_seconds_p99"] == 5.0
    text = s.text()
    assert "100 tasks in 10.0s (10.00/s): 98 success, 1 error, 1 timeout" in text
    assert "p99 5.000s" in text


def test_progress_draws_on_a_terminal_only():
    s = Summary()
    add(s, "success", 0.1)
    add(s, "error", 0.1)
    tty = Tty()
    bar = Progress(s, total=4, stream=tty, interval=0)
    bar.update()
    bar.finish()
    drawn = tty.getvalue()
    assert "2/4" in drawn and "50%" in drawn and "1 failed" in drawn and "ETA" in drawn
    assert drawn.endswith("\n")
    pipe = io.StringIO()
    quiet = Progress(s, total=4, stream=pipe, interval=0)
    quiet.update()
    quiet.finish()
    assert pipe.getvalue() == ""
