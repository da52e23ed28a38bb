from execengine.batch import Task
from execengine.batch.sessions import SessionOrder


def ids(tasks):
    return [t.id for t in tasks]


def test_tasks_without_a_session_pass_straight_through():
    order = SessionOrder([Task("a", ""), Task("b", "")], hold=4)
    assert ids([order.next(), order.next()]) == ["a", "b"]
    assert order.next() is None and order.drained


def test_one_task_per_session_at_a_time_in_file_order():
    tasks = [Task("s1", "", session="A"), Task("s2", "", session="A"), Task("x", ""),
             Task("s3", "", session="A"), Task("t1", "", session="B")]
    order = SessionOrder(tasks, hold=10)
    first = [order.next(), order.next(), order.next()]
    assert ids(first) == ["s1", "x", "t1"]  # s2 and s3 wait for s1
    assert order.next() is None and not order.drained and order.held == 2
    order.finished(first[1])  # x: no session, releases nothing
    assert order.next() is None
    order.finished(first[0])
    s2 = order.next()
    assert s2.id == "s2" and order.next() is None
    order.finished(s2)
    assert order.next().id == "s3"
    assert order.drained


def test_holding_is_bounded_so_the_source_is_not_read_ahead():
    read = []

    def source():
        for i in range(100):
            read.append(i)
            yield Task(f"c{i}", "", session="A")

    order = SessionOrder(source(), hold=3)
    first = order.next()
    assert order.next() is None
    assert len(read) == 4  # the running one and three held
    order.finished(first)
    assert order.next().id == "c1"


def test_put_back_goes_first():
    order = SessionOrder([Task("a", ""), Task("b", "")], hold=4)
    a = order.next()
    order.put_back(a)
    assert order.next() is a and order.next().id == "b"
