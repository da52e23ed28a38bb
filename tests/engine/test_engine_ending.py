"""How an execution ended, in its result: which step of the shutdown ladder ended the script
(real children at level ``none``), and kills by the kernel's OOM killer (counted through the
execution's cgroup at the sandboxed levels; level ``none`` has no cgroup and reports none)."""

from __future__ import annotations

import json
import textwrap

import pytest
from _engine_helpers import engine_config, make_registry

from execengine.engine import Engine
from execengine.isolation.detect import detect
from execengine.launch.factory import make_launcher

#: a script that exits; one that stops on SIGTERM (Python's default); one that ignores it
ENDINGS = [
    ("print('done')", "success", "exit"),
    ("import time; print('up', flush=True); time.sleep(60)", "timeout", "sigterm"),
    ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
     "print('up', flush=True); time.sleep(60)", "timeout", "kill"),
]


@pytest.mark.parametrize(("code", "status", "ended_by"), ENDINGS,
                         ids=["exits", "stops-on-sigterm", "traps-sigterm"])
def test_the_result_says_which_step_ended_the_script(make_engine, code, status, ended_by):
    engine = make_engine(kill_grace=1.0)
    r = engine.execute(code, timeout=1.0)
    assert (r.status, r.ended_by) == (status, ended_by), r
    model = json.loads(r.to_json())
    if ended_by == "exit":
        assert "ended_by" not in model  # nothing to say: the reference's format exactly
    else:
        assert model["ended_by"] == ended_by
        assert r.exit_code == (-15 if ended_by == "sigterm" else -9)


# -- out of memory ------------------------------------------------------------------------

REPORT = detect()
#: past the limit through shared anonymous memory: RLIMIT_DATA does not count it, the
#: cgroup does, so the kernel's OOM killer (not a MemoryError) ends the script
HOG = textwrap.dedent("""
    import mmap
    print("allocating", flush=True)
    m = mmap.mmap(-1, {mb} << 20)
    for i in range(0, len(m), 4096):
        m[i] = 1
    print("survived", flush=True)
""")
LIMIT_MB = 64


def _levels() -> list[object]:
    out: list[object] = []
    for level in ("restricted", "isolated"):
        ok = REPORT.levels.get(level) and REPORT.has("cgroups")
        why = (f"level {level} unavailable: {REPORT.reasons.get(level)}"
               if not REPORT.levels.get(level) else "no cgroups on this host")
        out.append(pytest.param(level, id=level,
                                marks=pytest.mark.skipif(not ok, reason=why)))
    return out


@pytest.fixture
def sandboxed():
    made = []

    def make(level: str) -> Engine:
        cfg = engine_config(isolation=level, memory_mb=LIMIT_MB, timeout=20.0)
        reg = make_registry(cfg)
        engine = Engine(config=cfg, registry=reg, launcher=make_launcher(cfg))
        made.append((engine, reg))
        return engine

    yield make
    for engine, reg in made:
        engine.close()
        reg.close()


@pytest.mark.parametrize("level", _levels())
def test_an_oom_kill_is_reported_as_out_of_memory(sandboxed, level):
    engine = sandboxed(level)
    r = engine.execute(HOG.format(mb=4 * LIMIT_MB))
    assert r.status == "error", r
    assert r.exit_code == -9 and r.oom_kills >= 1, r
    assert r.error == ("Script was killed: out of memory (limit 64 MiB, "
                       "code_execution.memory_mb).")
    assert "survived" not in r.output and r.output.startswith("allocating")
    assert json.loads(r.to_json())["oom_killed"] is True
    # the negative control, on the same engine: a run within the limit reports no OOM
    ok = engine.execute(HOG.format(mb=LIMIT_MB // 4))
    assert ok.status == "success" and ok.oom_kills == 0, ok
    assert "oom_killed" not in json.loads(ok.to_json())


@pytest.mark.parametrize("level", _levels())
def test_a_subprocess_killed_for_memory_is_reported_while_the_script_goes_on(sandboxed,
                                                                             level):
    engine = sandboxed(level)
    code = textwrap.dedent(f"""
        import subprocess, sys
        rc = subprocess.run([sys.executable, "-c", {HOG.format(mb=4 * LIMIT_MB)!r}]).returncode
        print("child", rc)
    """)
    r = engine.execute(code)
    assert r.status == "success" and r.output.strip().endswith("child -9"), r
    assert r.oom_kills >= 1
    assert r.hint == ("A process of the script was killed: out of memory (limit 64 MiB, "
                      "code_execution.memory_mb).")


def test_level_none_has_no_cgroup_and_reports_no_oom(make_engine):
    # the same hog is not limited at none (no cgroup, no RLIMIT on shared memory)
    r = make_engine(memory_mb=LIMIT_MB).execute(HOG.format(mb=2 * LIMIT_MB))
    assert r.status == "success" and r.oom_kills == 0, r
    assert "survived" in r.output


@pytest.mark.parametrize("level", _levels())
def test_a_session_kernel_killed_for_memory_says_so(level):
    from _session_helpers import session_engine

    with session_engine(level, memory_mb=LIMIT_MB) as engine:
        assert engine.execute("x = 1", session="s").ok
        r = engine.execute(HOG.format(mb=4 * LIMIT_MB), session="s")
        assert r.status == "error" and r.oom_kills >= 1, r
        assert r.error.startswith("The session's kernel was killed: out of memory (limit "
                                  "64 MiB, code_execution.memory_mb).")
        # the next call starts a fresh kernel, whose count starts at zero
        fresh = engine.execute("print('x' in globals())", session="s")
        assert fresh.output == "False\n" and fresh.oom_kills == 0
