"""The terminal's output carries no ANSI escape sequences, foreground or background."""

from __future__ import annotations

from execengine.terminal.local import LocalBackend
from execengine.terminal.output import Utf8Stream

COLOURED = (r"printf '\033[1;31mred\033[0m \033]0;title\007plain\n'; "
            r"printf '\033[2K\033[Gdone\n'")


def test_foreground_output_is_stripped(backend: LocalBackend, env) -> None:
    r = backend.run(COLOURED, cwd="/", env=env, timeout=10, max_output_chars=10_000)
    assert r.output == "red plain\ndone\n"


def test_foreground_pty_output_is_stripped(backend: LocalBackend, env) -> None:
    r = backend.run("ls --color=always / >/dev/null; " + COLOURED, cwd="/", env=env,
                    timeout=10, max_output_chars=10_000, pty=True)
    assert r.output == "red plain\ndone\n"


def test_background_output_is_stripped(backend: LocalBackend, env) -> None:
    info = backend.start(COLOURED, task="t", cwd="/", env=env)
    backend.wait(info.id, task="t", timeout=10)
    assert backend.read(info.id, task="t", since=0).text == "red plain\ndone\n"


def test_a_sequence_split_across_reads_leaves_no_fragment() -> None:
    data = "a\x1b[38;5;196mb\x1b]8;;http://x\x1b\\c\x1b[0m\u00e9".encode()
    for size in (1, 2, 3, 5):
        s = Utf8Stream()
        out = "".join(s.feed(data[i:i + size]) for i in range(0, len(data), size))
        assert out + s.flush() == "abc\u00e9", size


def test_raw_mode_and_an_unfinished_sequence_at_the_end() -> None:
    s = Utf8Stream(strip_ansi=False)
    assert s.feed(b"\x1b[1mx") + s.flush() == "\x1b[1mx"
    s = Utf8Stream()
    assert s.feed(b"ok\x1b[1") == "ok"  # held back: its end may still come
    assert s.flush() == "\x1b[1"  # never came: not an escape sequence after all
