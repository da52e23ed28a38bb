"""The file server the ssh backend runs on the remote, driven in-process: one reply per
request whatever comes in, and the same results as the operations run directly."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from execengine.fileops.ops import OPERATIONS, FileSettings
from execengine.fileops.paths import PathGuard, Scope
from execengine.fileops.serve import Server
from execengine.remote.files import files_archive, server_modules


def serve(*lines: bytes) -> list[dict]:
    out = io.BytesIO()
    Server().serve(io.BytesIO(b"".join(lines)), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def request(**fields: object) -> bytes:
    return json.dumps(fields).encode() + b"\n"


def test_results_are_the_operations_own(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    denied = [str(tmp_path / "secret")]
    calls = [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"}),
             ("read_file", {"path": "secret/x"}), ("search_files", {"pattern": "two"}),
             ("patch", {"path": "a.txt", "old_string": "two", "new_string": "2"}),
             ("write_file", {"path": "c/d.txt", "content": "x"})]
    replies = serve(*(request(id=i, op=op, args=args, cwd=str(tmp_path), denied=denied,
                              settings={"max_read_chars": 5000})
                      for i, (op, args) in enumerate(calls)))
    assert [r["id"] for r in replies] == list(range(len(calls)))
    (tmp_path / "a.txt").write_text("one\ntwo\n")  # undo the patch, then run them directly
    (tmp_path / "c" / "d.txt").unlink()
    scope = Scope(str(tmp_path), PathGuard(denied))
    for (op, args), reply in zip(calls, replies, strict=True):
        assert reply["result"] == OPERATIONS[op](scope, args, FileSettings(5000)), op
    assert "Access denied" in replies[2]["result"]["error"]


def test_hostile_requests_get_one_error_reply_each() -> None:
    replies = serve(b"not json\n", b"[1, 2]\n", request(id=3, op="rm_rf", args={}, cwd="/"),
                    request(id=4, op="read_file", args=[], cwd="/"),
                    request(id=5, op="read_file", args={}, cwd="/", settings={"bogus": 1}),
                    b"\xff\xfe\n")
    assert len(replies) == 6
    assert all("error" in r and "result" not in r for r in replies)
    assert [r["id"] for r in replies] == [None, None, 3, 4, 5, None]
    assert "unknown operation 'rm_rf'" in replies[2]["error"]


def test_the_shipped_modules_import_alone(tmp_path: Path) -> None:
    """What files_archive ships is enough to run the server: nothing else of the package
    (and no third-party module) is needed."""
    import tarfile

    assert "execengine.fileops.serve" in server_modules()
    assert not any(m.startswith(("execengine.registry", "execengine.config"))
                   for m in server_modules())
    _, archive = files_archive()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp_path, filter="data")
    code = ("import sys; sys.path[:0] = [sys.argv[1]]\n"
            "import execengine.fileops.serve as s\n"
            "third = ('yaml', 'jinja2', 'zmq', 'psutil', 'jsonschema')\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in third]\n"
            "assert s.__file__.startswith(sys.argv[1]) and not bad, (s.__file__, bad)\n")
    done = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
