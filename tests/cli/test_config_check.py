"""``execengine config check`` through the real entry point: every problem of the file at
once, each with file:line:column and key; hostile files (alias bombs, deep nesting, huge
values) end in a clear error within bounded memory (issues 40 and 41)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: peak RSS of a `config check` that refuses a bomb: about 60 MiB measured; before the
#: bounds, the 9x9 bomb below passed 1 GiB within seconds
PEAK_BOUND_MIB = 250


def check(tmp_path: Path, text: str) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MiB) of `execengine config check` on ``text``, in a
    process of its own, capped at 3 GiB of address space and 50 s (so a regression fails
    this test, not the machine). The peak is the process's own ``VmHWM``, written as it
    exits (killed, it writes none: no figure fails the test too). Not ``ru_maxrss``: exec
    carries the peak of the process it replaced into it, here the forked test runner's
    (442 MiB once, late in a full run)."""
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    peak_path = tmp_path / "peak"
    cap = 3 << 30
    code = ("import resource, runpy, sys\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))\n"
            f"sys.argv = ['execengine', '--config', {str(path)!r}, 'config', 'check']\n"
            "try:\n"
            "    runpy.run_module('execengine', run_name='__main__', alter_sys=True)\n"
            "finally:\n"
            "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
            f"    open({str(peak_path)!r}, 'w').write(hwm[0].split()[1])\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    env.pop("EXECENGINE_CONFIG", None)
    err_path = tmp_path / "stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                stderr=err, env=env, cwd=tmp_path)
    timer = threading.Timer(50, proc.kill)
    timer.start()
    try:
        proc.wait()
    finally:
        timer.cancel()
    peak = int(peak_path.read_text()) / 1024 if peak_path.exists() else float("inf")
    return proc.returncode, err_path.read_text(errors="replace"), peak


def laughs(levels: int = 9, width: int = 9) -> str:
    """Aliases nested ``levels`` deep, ``width`` to a level, as the value of a real option
    (so the loader reaches it): ``width ** levels`` values once expanded."""
    anchors = [f"&a0 [{', '.join(['lol'] * width)}]"]
    anchors += [f"&a{n} [{', '.join([f'*a{n - 1}'] * width)}]" for n in range(1, levels)]
    return "code_execution:\n  timeout: [" + ", ".join(anchors) + "]\n"


def test_every_problem_is_reported_at_once_with_its_place_and_key(tmp_path):
    text = ("code_execution:\n"
            "  timeout: -5\n"
            "  max_tool_call: 3\n"
            "  isolation: maybe\n"
            "web:\n"
            "  timeout: x\n"
            "nonsense: 1\n"
            "code_execution: {}\n"
            "mcp_servers:\n"
            "  bad name: {command: x}\n"
            "  fine:\n"
            "    command: run\n"
            "    env: {A: [1, 2]}\n")
    code, err, _ = check(tmp_path, text)
    assert code == 2 and "Traceback" not in err
    where = tmp_path / "config.yaml"
    expected = [
        f"{where}:2:3: code_execution.timeout: must be >= ",
        f"{where}:3:3: code_execution.max_tool_call: unknown key (did you mean "
        "'max_tool_calls'?)",
        f"{where}:4:3: code_execution.isolation: expected one of ",
        f"{where}:6:3: web.timeout: expected a number, got 'x'",
        f"{where}:7:1: nonsense: unknown key",
        f"{where}:8:1: code_execution: duplicate key",
        f"{where}:10:3: mcp_servers.bad name: names here are letters",
        f"{where}:13:11: mcp_servers.fine.env.A: expected a string, got [1, 2]",
    ]
    lines = [line.strip() for line in err.splitlines()]
    assert lines[0] == f"execengine: error: {where}: {len(expected)} problems:"
    assert len(lines) == 1 + len(expected), err
    for line, start in zip(lines[1:], expected, strict=True):
        assert line.startswith(start), (line, start)


def test_one_problem_is_one_line(tmp_path):
    code, err, _ = check(tmp_path, "code_execution:\n  timeout: -5\n")
    assert code == 2
    assert err.strip().startswith(f"execengine: error: {tmp_path / 'config.yaml'}:2:3: "
                                  "code_execution.timeout: must be >= ")
    assert len(err.strip().splitlines()) == 1


def test_a_billion_laughs_is_refused_in_bounded_memory(tmp_path):
    text = laughs(9)  # 387 million values once expanded, in under 500 bytes
    assert len(text) < 500
    code, err, peak = check(tmp_path, text)
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert "more than 100,000 values once its aliases are expanded" in err
    assert f"{tmp_path / 'config.yaml'}:2:" in err
    assert len(err) < 500
    assert peak < PEAK_BOUND_MIB, f"peak RSS {peak:.0f} MiB"


def test_a_hundred_thousand_levels_are_a_clear_error(tmp_path):
    code, err, peak = check(tmp_path, "code_execution:\n  timeout: "
                            + "[" * 100_000 + "]" * 100_000 + "\n")
    assert code == 2 and "Traceback" not in err and "RecursionError" not in err, err[-2000:]
    assert f"{tmp_path / 'config.yaml'}:2:" in err and "nest deeper than 100 levels" in err
    assert peak < PEAK_BOUND_MIB


def test_a_message_quotes_a_few_hundred_characters_of_a_value_at_most(tmp_path):
    huge = "x" * 1_000_000
    code, err, _ = check(tmp_path, f"code_execution:\n  isolation: {huge}\n"
                                   f"  timeout: [{', '.join([huge[:1000]] * 500)}]\n")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 3 and all(len(line) < 500 for line in lines), [len(x) for x in lines]
