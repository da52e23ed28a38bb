import json

import pytest

from execengine.batch import InvalidLine, Task, parse_task, read_tasks


def test_full_task_line_parses():
    t = parse_task({"id": "t1", "code": "print(1)", "cwd": "/w", "toolsets": ["file"],
                    "timeout": 3, "mode": "strict", "session": "s", "retry_safe": True,
                    "meta": {"k": [1]}}, 7)
    assert t == Task(id="t1", code="print(1)", line=7, cwd="/w", toolsets=("file",),
                     timeout=3.0, mode="strict", session="s", retry_safe=True,
                     meta={"k": [1]})
    assert Task.from_wire(t.to_wire()) == t


def test_integer_id_becomes_a_string():
    t = parse_task({"id": 12, "code": ""}, 1)
    assert isinstance(t, Task) and t.id == "12" and not t.retry_safe


@pytest.mark.parametrize("value, reason", [
    ([1, 2], "expected a JSON object, got list"),
    ({"code": "x"}, "missing 'id'"),
    ({"id": "", "code": "x"}, "'id' must be a non-empty string or an integer"),
    ({"id": True, "code": "x"}, "'id' must be"),
    ({"id": "a"}, "missing 'code'"),
    ({"id": "a", "code": 3}, "'code' must be a string"),
    ({"id": "a", "code": "x", "timeout": 0}, "'timeout' must be a positive number"),
    ({"id": "a", "code": "x", "timeout": "5"}, "'timeout' must be a positive number"),
    ({"id": "a", "code": "x", "timeout": True}, "'timeout' must be a positive number"),
    ({"id": "a", "code": "x", "timeout": 1e308}, "'timeout' must be a positive number"),
    ({"id": "a", "code": "x", "mode": "loose"}, "'mode' must be one of project, strict"),
    ({"id": "a", "code": "x", "toolsets": "file"}, "'toolsets' must be a list"),
    ({"id": "a", "code": "x", "toolsets": [""]}, "'toolsets' must be a list"),
    ({"id": "a", "code": "x", "cwd": ""}, "'cwd' must be a non-empty string"),
    ({"id": "a", "code": "x", "session": 5}, "'session' must be a non-empty string"),
    ({"id": "a", "code": "x", "retry_safe": "yes"}, "'retry_safe' must be true or false"),
    ({"id": "a", "code": "x", "tiemout": 5}, "unknown key tiemout"),
])
def test_bad_task_lines_are_values_with_the_line_number(value, reason):
    item = parse_task(value, 4)
    assert isinstance(item, InvalidLine)
    assert item.line == 4
    assert item.reason.startswith("line 4: ")
    assert reason in item.reason


def test_invalid_line_keeps_a_usable_id():
    item = parse_task({"id": "a", "code": 3}, 1)
    assert isinstance(item, InvalidLine) and item.id == "a"


def test_reader_streams_lines_and_reports_each_problem(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join([
        json.dumps({"id": "a", "code": "1"}).encode(),
        b"",
        b"{not json",
        b"\xff\xfe",
        json.dumps({"id": "a", "code": "2"}).encode(),
        json.dumps({"id": "b", "code": "3"}).encode(),
    ]))
    items = list(read_tasks(str(path)))
    assert [type(i).__name__ for i in items] == ["Task", "InvalidLine", "InvalidLine",
                                                 "InvalidLine", "Task"]
    assert items[0].line == 1 and items[-1].line == 6
    assert "line 3: not valid JSON" in items[1].reason
    assert "line 4: not valid JSON" in items[2].reason
    assert items[3].reason == "line 5: duplicate id 'a' (first on line 1)"
    assert items[3].id is None


def test_reader_is_lazy(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "a", "code": "1"}) + "\n")
    it = read_tasks(str(path))
    with open(path, "a") as f:  # lines appended after the reader started are still read
        f.write(json.dumps({"id": "b", "code": "2"}) + "\n")
    assert [t.id for t in it] == ["a", "b"]


@pytest.mark.parametrize("depth", [100, 1_100, 100_000])
def test_a_line_nested_too_deeply_is_invalid_and_the_others_are_read(tmp_path, depth):
    """Checked before decoding: 1,100 levels was a RecursionError out of the reader (the
    batch ended, on every rerun); 99 levels of ``meta`` are fine."""
    deep = '{"id": "deep", "code": "", "meta": ' + "[" * depth + "]" * depth + "}"
    fits = '{"id": "fits", "code": "", "meta": ' + "[" * 99 + "]" * 99 + "}"
    path = tmp_path / "t.jsonl"
    path.write_text(f'{{"id": "a", "code": "1"}}\n{deep}\n{fits}\n')
    items = list(read_tasks(str(path)))
    assert [type(i).__name__ for i in items] == ["Task", "InvalidLine", "Task"]
    assert items[1].line == 2
    assert items[1].reason == "line 2: the line nests deeper than 100 levels"
