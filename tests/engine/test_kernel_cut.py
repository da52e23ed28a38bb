"""The host side of a kernel: cutting its output at a cell's end marker, its entry."""

from __future__ import annotations

import pytest

from execengine.engine.kernel import _Cut
from execengine.launch.supervise import OutputCapture

MARK = b"\0execengine-cell-1-abcdef\0"


@pytest.mark.parametrize("size", [1, 2, 5, len(MARK) - 1, len(MARK), 1000])
def test_marker_found_whatever_the_read_sizes(size):
    data = b"hello world\n" * 3 + MARK + b"next cell"
    cap = OutputCapture(10_000)
    cut = _Cut(MARK, cap, b"")
    for i in range(0, len(data), size):
        cut.feed(data[i:i + size])
    assert cut.found and cut.rest == b"next cell"
    assert cap.result().text == "hello world\n" * 3


def test_carry_from_the_last_cell_and_a_stream_that_ends_without_marker():
    cap = OutputCapture(10_000)
    cut = _Cut(MARK, cap, b"left over ")
    cut.feed(b"partial \0execengine")  # looks like the start of a marker
    assert not cut.found
    cut.end()
    assert cap.result().text == "left over partial \0execengine"


def test_a_fake_marker_of_another_cell_is_output():
    cap = OutputCapture(10_000)
    cut = _Cut(MARK, cap, b"")
    cut.feed(b"\0execengine-cell-1-000000\0" + MARK)
    assert cut.found
    assert cap.result().total_bytes == len(MARK)


def test_the_host_starts_the_kernel_with_its_own_entry_program():
    from execengine.engine.sessions import KERNEL_ENTRY
    from sandbox.kernel import ENTRY

    assert KERNEL_ENTRY == ENTRY
