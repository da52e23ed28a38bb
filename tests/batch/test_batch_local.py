import threading
import time

import pytest
from _batch_helpers import batch_config, engine_has_sessions

from execengine.batch import LocalExecutor, Task, default_concurrency


@pytest.fixture
def executor(no_leftover_children):
    with LocalExecutor(config=batch_config(), concurrency=2) as ex:
        yield ex


def test_default_concurrency_is_what_the_machine_has():
    import os

    assert default_concurrency() == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError):
        LocalExecutor(config=batch_config(), concurrency=0)


def test_results_for_success_error_timeout_and_session(executor):
    tasks = [Task("ok", "print('hi')"), Task("fail", "raise SystemExit(3)"),
             Task("slow", "import time; time.sleep(30)", timeout=1),
             Task("sess", "print(1)", session="s1"),
             Task("badset", "print(1)", toolsets=("no_such_toolset",))]
    got = {o.id: o for o in executor.run(tasks)}
    assert got["ok"].status == "success" and got["ok"].result.output == "hi\n"
    assert got["fail"].status == "error" and got["fail"].result.exit_code == 3
    assert got["slow"].status == "timeout"
    if engine_has_sessions():
        assert got["sess"].status == "success" and got["sess"].result.output == "1\n"
    else:
        assert got["sess"].status == "error"
        assert "does not support sessions" in got["sess"].result.error
    assert got["badset"].status == "error"
    assert "unknown toolset 'no_such_toolset'" in got["badset"].result.error
    assert all(o.worker.startswith("local:") for o in got.values())


def test_concurrency_is_bounded_and_tasks_are_pulled_lazily(executor):
    pulled = []

    def source():
        for i in range(6):
            pulled.append(i)
            yield Task(f"t{i}", "import time; time.sleep(0.3)")

    pulled_at_first_result = None
    spans = []
    for outcome in executor.run(source()):
        if pulled_at_first_result is None:
            pulled_at_first_result = len(pulled)
        spans.append((outcome.timings.started, outcome.timings.finished))
    assert len(spans) == 6
    assert pulled_at_first_result <= executor.concurrency + 1
    overlaps = max(sum(1 for s, f in spans if s <= t < f) for t, _ in spans)
    assert overlaps <= 2


def test_stop_interrupts_running_tasks_and_records_none_of_them(executor, tmp_path):
    code = ("import pathlib, time, uuid\n"
            f"pathlib.Path({str(tmp_path)!r}, uuid.uuid4().hex).touch()\n"
            "time.sleep(60)\n")
    tasks = [Task(f"t{i}", code) for i in range(5)]
    stop = threading.Event()
    got = []
    runner = threading.Thread(target=lambda: got.extend(executor.run(tasks, stop=stop)))
    runner.start()
    deadline = time.monotonic() + 30
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(list(tmp_path.iterdir())) == 2
    stopped_at = time.monotonic()
    stop.set()
    runner.join(15)
    assert not runner.is_alive()
    assert time.monotonic() - stopped_at < 10
    assert got == []  # interrupted, not finished: a resumed run starts them again


class SessionEngine:
    """An engine with sessions (issue 14's ``execute(..., session=...)``), recording when
    each task ran: the seam where the batch passes sessions through."""

    def __init__(self):
        self.runs = []
        self.lock = threading.Lock()

    def execute(self, code, *, session=None, **kwargs):
        from execengine.engine import ExecutionResult

        start = time.monotonic()
        time.sleep(float(code))
        with self.lock:
            self.runs.append((session, kwargs["task_id"], start, time.monotonic()))
        return ExecutionResult("success", output=f"{session}")


def test_sessions_pass_through_and_run_one_at_a_time_in_file_order():
    engine = SessionEngine()
    tasks = [Task("a1", "0.2", session="A"), Task("a2", "0", session="A"),
             Task("x", "0.05"), Task("b1", "0.05", session="B"), Task("a3", "0", session="A")]
    with LocalExecutor(engine, concurrency=3) as ex:  # type: ignore[arg-type]
        got = {o.id: o for o in ex.run(tasks)}
    assert {i: o.result.output for i, o in got.items()} == {
        "a1": "A", "a2": "A", "x": "None", "b1": "B", "a3": "A"}
    spans = {task_id.split(":", 1)[1]: (start, end) for _, task_id, start, end in engine.runs}
    assert spans["a1"][1] <= spans["a2"][0] and spans["a2"][1] <= spans["a3"][0]
    assert spans["x"][0] < spans["a1"][1]  # the others did not wait for session A
