from __future__ import annotations

import os
from pathlib import Path

import pytest

from execengine.web.spill import SpillStore, head_tail


def test_short_text_is_untouched() -> None:
    cut = head_tail("short", 100)
    assert (cut.text, cut.omitted, cut.total) == ("short", 0, 5)


@pytest.mark.parametrize("limit", [300, 1000, 5000])
def test_long_text_keeps_head_and_tail_within_the_limit(limit: int) -> None:
    text = "\n".join(f"line {i:05d} " + "x" * 20 for i in range(2000))
    cut = head_tail(text, limit, path="/tmp/full.md")
    assert len(cut.text) <= limit
    assert cut.text.startswith("line 00000") and cut.text.endswith("line 01999 " + "x" * 20)
    assert (f"... [PAGE TRUNCATED - {cut.omitted:,} chars omitted out of {len(text):,} "
            "total] ...\n[the full text is in /tmp/full.md]\n") in cut.text
    head, tail = cut.text.split("\n\n... [PAGE")[0], cut.text.split("full.md]\n\n")[1]
    assert len(head) > len(tail)  # the beginning matters most
    assert cut.omitted == len(text) - len(head) - len(tail)


def test_text_without_line_breaks_is_cut_exactly() -> None:
    cut = head_tail("a" * 1000 + "b" * 1000, 500)
    assert cut.text.startswith("a") and cut.text.endswith("b") and len(cut.text) <= 500


def test_store_writes_full_text_and_close_removes_it(tmp_path: os.PathLike[str]) -> None:
    store = SpillStore(directory=str(tmp_path))
    path = store.save("full text é", "https://example.org/a b?c=1")
    assert Path(path).read_text(encoding="utf-8") == "full text é"
    assert os.path.basename(path).startswith("example-org-a-b-c-1-")
    assert store.save("v2", "https://example.org/a b?c=1") == path  # same page, same file
    store.close()
    store.close()
    assert not os.path.exists(path) and os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError, match="closed"):
        store.save("x", "https://example.org/")


def test_store_is_a_context_manager_and_lazy(tmp_path: os.PathLike[str]) -> None:
    with SpillStore(directory=str(tmp_path)) as store:
        assert store.directory is None
    assert os.listdir(tmp_path) == []


def test_unclosed_store_warns() -> None:
    store = SpillStore()
    store.save("x", "https://example.org/")
    folder = store.directory
    with pytest.warns(ResourceWarning, match="unclosed SpillStore"):
        store.__del__()
    store.close()
    assert folder is not None and not os.path.exists(folder)
