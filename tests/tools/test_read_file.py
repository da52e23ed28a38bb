"""read_file through the real registry and dispatcher."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from execengine.config import Config, load_config
from execengine.context import CallContext
from execengine.registry import ToolRegistry


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "id_rsa").write_text("PRIVATE KEY\n")
    return tmp_path


@pytest.fixture
def reg(home: Path):
    config = Config().with_overrides({
        "terminal.cwd": str(home / "work"),
        "files.denied_paths": [str(home / "secret")],
    })
    with ToolRegistry.with_builtins(config, plugins=False) as r:
        yield r


def read(reg: ToolRegistry, **args):
    return json.loads(reg.dispatch("read_file", args))


def test_numbered_lines_total_and_paging_hint(reg, home):
    (home / "work" / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = read(reg, path="f.txt", offset=3, limit=4)
    assert out["content"] == "\n".join(f"{i:>6}|line {i}" for i in range(3, 7))
    assert out["total_lines"] == 10
    assert out["next_offset"] == 7
    assert "use offset=7 to continue" in out["hint"]
    rest = read(reg, path="f.txt", offset=out["next_offset"])
    assert rest["content"].splitlines()[0] == "     7|line 7"
    assert rest["lines_returned"] == 4
    assert "next_offset" not in rest and "hint" not in rest


def test_defaults_read_from_line_one(reg, home):
    (home / "work" / "f.txt").write_text("a\nb")
    out = read(reg, path="f.txt")
    assert out["content"] == "     1|a\n     2|b"
    assert out["total_lines"] == 2
    assert out["offset"] == 1


def test_empty_file(reg, home):
    (home / "work" / "empty").write_text("")
    out = read(reg, path="empty")
    assert out["content"] == "" and out["total_lines"] == 0


def test_relative_paths_follow_the_task_directory(reg, home):
    sub = home / "work" / "sub"
    sub.mkdir()
    (sub / "here.txt").write_text("in sub\n")
    assert "error" in read(reg, path="here.txt")
    reg.services.workdirs.set("T1", str(sub))
    out = json.loads(reg.dispatch("read_file", {"path": "here.txt"}, task_id="T1"))
    assert out["content"] == "     1|in sub"
    explicit = json.loads(reg.dispatch("read_file", {"path": "here.txt"},
                                     CallContext(cwd=str(sub))))
    assert explicit["content"] == "     1|in sub"


def test_missing_file_suggests_close_names(reg, home):
    (home / "work" / "config.yaml").write_text("x: 1\n")
    (home / "work" / "src").mkdir()
    (home / "work" / "src" / "main.py").write_text("print()\n")
    out = read(reg, path="confg.yaml")
    assert out["error"].startswith("File not found: 'confg.yaml'")
    assert out["suggestions"] == ["config.yaml"]
    assert "did you mean: config.yaml" in out["error"]
    elsewhere = read(reg, path="main.py")
    assert elsewhere["suggestions"] == [os.path.join("src", "main.py")]
    assert read(reg, path="nothing/like/it.zzz")["suggestions"] == []


def test_directory_is_an_error(reg, home):
    out = read(reg, path=".")
    assert "is a directory" in out["error"]
    assert out["is_directory"] is True


def test_binary_file_is_reported_not_dumped(reg, home):
    (home / "work" / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    out = read(reg, path="img.png")
    assert "binary file" in out["error"]
    assert out["binary"] is True and out["file_size"] == 216
    assert "content" not in out


def test_huge_line_is_cut_with_a_marker(reg, home):
    (home / "work" / "min.js").write_text("short\n" + "x" * 50_000 + "\nend\n")
    out = read(reg, path="min.js")
    rows = out["content"].split("\n")
    assert rows[0] == "     1|short"
    assert rows[1].startswith("     2|" + "x" * 2000)
    assert "line cut: 50000 characters, 2000 shown" in rows[1]
    assert len(rows[1]) < 2100
    assert rows[2] == "     3|end"
    assert out["long_lines"] == [2]
    assert "longer than 2000" in out["hint"]


def test_content_is_capped_by_config_with_a_continue_hint(home):
    config = Config().with_overrides({"terminal.cwd": str(home / "work"),
                                      "files.max_read_chars": 1000})
    (home / "work" / "big.txt").write_text("".join(f"{'y' * 90} {i}\n" for i in range(100)))
    with ToolRegistry.with_builtins(config, plugins=False) as reg:
        out = read(reg, path="big.txt", limit=100)
    assert len(out["content"]) <= 1000
    assert out["truncated"] is True
    shown = out["lines_returned"]
    assert 0 < shown < 100
    assert out["next_offset"] == shown + 1
    assert f"use offset={shown + 1}" in out["hint"]


@pytest.mark.parametrize(("args", "message"), [
    ({"offset": 0}, "offset is 1-based"),
    ({"offset": -3}, "offset is 1-based"),
    ({"limit": 0}, "limit must be at least 1"),
    ({"limit": "10"}, "limit must be an integer"),
    ({"offset": 1.5}, "offset must be an integer"),
    ({"path": 3}, "path must be a string"),
    ({"path": ""}, "path must be a non-empty string"),
])
def test_bad_arguments(reg, home, args, message):
    (home / "work" / "f.txt").write_text("a\n")
    out = read(reg, **{"path": "f.txt", **args})
    assert message in out["error"]


def test_offset_past_the_end(reg, home):
    (home / "work" / "f.txt").write_text("a\nb\nc\n")
    out = read(reg, path="f.txt", offset=4)
    assert out["error"] == "offset 4 is past the end of 'f.txt', which has 3 lines"
    assert out["total_lines"] == 3


def test_crlf_bom_and_invalid_utf8_are_shown_as_text(reg, home):
    (home / "work" / "w.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo \xff\r\n")
    out = read(reg, path="w.txt")
    assert out["content"] == "     1|one\n     2|two \ufffd"


def test_denied_directory_directly_via_dotdot_and_via_symlink(reg, home):
    for path in (str(home / "secret" / "id_rsa"), "../secret/id_rsa",
                 "sub/../../secret/./id_rsa",
                 "~/" + os.path.relpath(home / "secret" / "id_rsa", os.path.expanduser("~"))):
        out = read(reg, path=path)
        assert "Access denied" in out.get("error", ""), path
    (home / "work" / "innocent").symlink_to(home / "secret")
    (home / "work" / "key.txt").symlink_to(home / "secret" / "id_rsa")
    for path in ("innocent/id_rsa", "key.txt"):
        out = read(reg, path=path)
        assert "Access denied" in out["error"]
        assert "PRIVATE" not in json.dumps(out)


def test_config_file_itself_is_always_denied_also_by_hard_link(home):
    cfg = home / "config.yaml"
    cfg.write_text(f"terminal:\n  cwd: {home / 'work'}\nfiles:\n  denied_paths: []\n")
    os.link(cfg, home / "work" / "copy.yaml")
    with ToolRegistry.with_builtins(load_config(cfg), plugins=False) as reg:
        for path in (str(cfg), "../config.yaml", "copy.yaml"):
            assert "Access denied" in read(reg, path=path)["error"], path
        (home / "work" / "ok.txt").write_text("fine\n")
        assert read(reg, path="ok.txt")["content"] == "     1|fine"


def test_registered_in_file_toolset_with_a_result_cap(reg):
    entry = reg.get("read_file")
    assert entry.toolset == "file"
    assert entry.max_result_size_chars is not None
    assert reg.availability(["read_file"])["read_file"].available


def test_unavailable_when_the_working_directory_is_gone(tmp_path):
    config = Config().with_overrides({"terminal.cwd": str(tmp_path / "gone")})
    with ToolRegistry.with_builtins(config, plugins=False) as reg:
        verdict = reg.availability(["read_file", "write_file", "patch"])
    assert all(not v.available and "does not exist" in v.reason for v in verdict.values())


def _contents() -> list[bytes]:
    """Files on both sides of every rule of the reader: newlines at the end or not, CRLF
    and stray CRs, a BOM, invalid and cut UTF-8, lines just under, at and over the cut,
    lines longer than one read of the streaming path, empty lines, empty files."""
    import random

    rng = random.Random(7)
    fixed = [b"", b"\n", b"\n\n", b"a", b"a\n", b"a\nb", b"a\r\nb\r\n", b"a\r\r\n\r",
             b"\xef\xbb\xbfbom\nx\n", b"\xef\xbb\xbf", b"bad \xff\xfe here\nok\n",
             b"cut \xe2\x82\nnext\n", b"end \xe2\x82", "ünï\ncødé\n".encode(),
             b"x" * 1999 + b"\n" + b"y" * 2000 + b"\n" + b"z" * 2001 + b"\n",
             "é".encode() * 2100 + b"\nshort\n", b"w" * 8031 + b"\nafter\n",
             b"v" * 8032 + b"\nafter\n", b"u" * 20000, b"\r" * 9000 + b"\nx\n",
             b"ab\n" * 20_001]
    alphabet = [b"a", b"b", b" ", b"\n", b"\n", b"\r", b"\xc3\xa9", b"\xff", b"\xe2\x82",
                b"\t", b"\xef\xbb\xbf"]
    for _ in range(60):
        fixed.append(b"".join(rng.choice(alphabet) * rng.choice((1, 1, 1, 5, 300))
                              for _ in range(rng.randrange(0, 120))))
    return fixed


def test_a_file_read_whole_gives_what_the_streaming_reader_gives(tmp_path, monkeypatch):
    # files up to 1 MB are read at once, larger ones streamed line by line: for every
    # content and window both must give the same result (or the same error)
    from execengine.errors import FileOpError
    from execengine.fileops import reading

    def result(path: Path, offset: int, limit: int, max_chars: int) -> object:
        try:
            return reading.read_window(path, "f", offset, limit, max_chars).to_dict()
        except FileOpError as exc:
            return ("error", str(exc))

    windows = [(1, 5000, 100_000), (1, 1, 100_000), (2, 3, 100_000), (1, 5000, 30),
               (3, 2, 10), (40, 5, 100_000), (1, 5000, 9000)]
    compared = read_whole = 0
    for i, content in enumerate(_contents()):
        path = tmp_path / f"f{i}"
        path.write_bytes(content)
        with path.open("rb") as fh:
            read_whole += reading._whole_lines(fh, len(content)) is not None
        for window in windows:
            whole = result(path, *window)
            with monkeypatch.context() as m:
                m.setattr(reading, "_WHOLE_BYTES", -1)  # every file streamed
                streamed = result(path, *window)
            assert whole == streamed, (content[:80], window)
            compared += 1
    assert compared == len(_contents()) * len(windows)
    # all but the files with a line of 8,032 bytes or more took the whole-file path
    long = sum(1 for c in _contents() if max(map(len, c.split(b"\n"))) >= 8032
               or c.count(b"\n") > 20_000)
    assert 3 <= long < 20 and read_whole == len(_contents()) - long


def test_the_binary_sniff_counts_bytes_as_defined():
    # looks_binary counts bytes in C (bytes.translate): the counts it uses are those of the
    # definition, byte by byte, and its verdicts fall on both sides of its thresholds
    import random

    from execengine.fileops import reading

    text_control = {7, 8, 9, 10, 12, 13, 27}
    rng = random.Random(3)
    verdicts = set()
    for _ in range(3000):
        pool = rng.choice([range(1, 256), range(1, 32), range(32, 127), range(0x80, 256)])
        sample = bytes(rng.choice(pool) if rng.random() < rng.random() else 97
                       for _ in range(rng.randrange(1, 64)))
        control = sum(1 for b in sample if b < 32 and b not in text_control)
        high_or_control = control + sum(1 for b in sample if b >= 0x80)
        assert len(sample.translate(None, reading._KEEP_CONTROL)) == control, sample
        assert len(sample.translate(None, reading._KEEP_CONTROL_OR_HIGH)) == high_or_control
        verdicts.add(reading.looks_binary(sample))
    assert verdicts == {True, False}
