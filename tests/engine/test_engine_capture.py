from __future__ import annotations

import os

from execengine.ansi import strip_ansi
from execengine.launch.supervise import OutputCapture, clean_text, redact


def test_under_limit_is_exact():
    c = OutputCapture(100)
    c.feed(b"hello ")
    c.feed(b"world")
    r = c.result()
    assert (r.text, r.truncated, r.total_bytes, r.spill_path) == ("hello world", False, 11, None)


def test_head_and_tail_40_60_with_marker_and_spill(tmp_path):
    c = OutputCapture(1000, spill=True, spill_dir=str(tmp_path))
    data = "".join(f"{n:05d}\n" for n in range(2000)).encode()  # 12,000 bytes
    for i in range(0, len(data), 777):
        c.feed(data[i:i + 777])
    r = c.result()
    assert r.truncated and r.total_bytes == 12_000 and r.kept_bytes == 1000
    head, _, rest = r.text.partition("\n\n... [")
    assert data.decode().startswith(head) and len(head) == 400
    marker, _, tail = rest.partition("]\n\n")
    assert data.decode().endswith(tail) and len(tail) == 600
    # the reference's wording and units (characters; ASCII here, so equal to bytes) ...
    assert marker.startswith("OUTPUT TRUNCATED - 11,000 chars omitted out of 12,000 total] ...\n")
    # ... then where the whole output is and exactly what that file holds
    assert marker.endswith(
        f"[full output: {r.spill_path} holds all 12,000 bytes of the script's raw stdout, "
        "before ANSI stripping and secret redaction")
    with open(r.spill_path, "rb") as f:
        assert f.read() == data
    os.unlink(r.spill_path)


def test_marker_counts_characters_not_bytes(tmp_path):
    c = OutputCapture(1000, spill=True, spill_dir=str(tmp_path))
    data = ("é" * 3000).encode()  # 3,000 characters in 6,000 bytes
    c.feed(data)
    r = c.result()
    # 1,000 bytes kept = 500 characters; the rest omitted, counted in characters
    assert "... [OUTPUT TRUNCATED - 2,500 chars omitted out of 3,000 total] ...\n" in r.text
    assert r.total_bytes == 6000 and r.omitted_bytes == 5000
    os.unlink(r.spill_path)


def test_stderr_marker_has_no_spill_facts():
    c = OutputCapture(300, name="stderr")
    c.feed(b"e" * 1000)
    r = c.result()
    assert "\n\n... [STDERR TRUNCATED - 700 chars omitted out of 1,000 total] ...\n\n" in r.text
    assert r.spill_path is None and "full output" not in r.text


def test_spill_is_capped_and_says_what_it_holds(tmp_path):
    c = OutputCapture(300, spill=True, spill_dir=str(tmp_path), spill_limit=1000)
    c.feed(b"x" * 5000)
    r = c.result()
    assert os.path.getsize(r.spill_path) == 1000
    assert (r.spill_bytes, r.spill_complete) == (1000, False)
    assert "full output" not in r.text
    assert (f"[spill file: {r.spill_path} holds only the first 1,000 of 5,000 bytes of the "
            "script's raw stdout (not its end; spill files are capped at 1,000 bytes), before "
            "ANSI stripping and secret redaction]") in r.text
    os.unlink(r.spill_path)


def test_spill_under_the_cap_is_complete(tmp_path):
    c = OutputCapture(300, spill=True, spill_dir=str(tmp_path), spill_limit=1000)
    c.feed(b"y" * 1000)
    r = c.result()
    assert (r.spill_bytes, r.spill_complete) == (1000, True)
    assert (f"[full output: {r.spill_path} holds all 1,000 bytes of the script's raw stdout, "
            "before ANSI stripping and secret redaction]") in r.text
    os.unlink(r.spill_path)


def test_clean_text():
    assert strip_ansi("\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok") == "red ok"
    assert clean_text(b"a\xffb") == "a\ufffdb"
    assert "sk-abcdefghijklmnop1234" not in redact("key sk-abcdefghijklmnop1234 here")
    assert redact("Authorization: Bearer abcdefghijklmnopqrstuvwxyz") == (
        "Authorization: Bearer [REDACTED]")
    assert redact("BYPASS_MODE=1") == "BYPASS_MODE=1"
