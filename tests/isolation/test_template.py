"""Pre-started interpreters forked from one started interpreter, the template
(``entry.exec_template``, ``sandbox/zygote.py``'s ``serve``).

The script must not be able to tell a forked interpreter from one started for it (the probe
comparisons of ``test_prestart`` and the attacks of ``tests/security`` run through forked
ones); these tests check what is particular to the fork: that it happens, that the template
never holds what an execution is given, that a template that dies costs no execution that
has not started and leaves nothing behind, and that launches in flight at once each get
their own descriptors.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import replace

import psutil
import pytest

from execengine.isolation.detect import detect
from execengine.launch.sandboxed import IsolatedLauncher

from ._prestart import interpreter_of, teach
from .test_prestart import run, spec

pytestmark = pytest.mark.skipif(
    not detect().levels.get("isolated") or os.geteuid() != 0,
    reason="the template serves level isolated, as root")

#: what the script reports: its parent as it sees it, and the credentials and filters
#: the kernel shows for it
PROBE = r"""
import json, os
fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps([os.getppid(), {k: fields[k].split() for k in (
    "Uid", "Gid", "Groups", "CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs",
    "Seccomp", "Seccomp_filters")}]))
"""


def _templates(launcher: IsolatedLauncher) -> list[psutil.Process]:
    found = []
    for p in psutil.Process(launcher.spawner.pid).children():
        try:
            if "_execengine_startup" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.Error:  # an entry's holder that just ended
            continue
    return found


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "started"])
def test_the_interpreter_is_forked_from_the_template_with_a_started_ones_credentials(
        tmp_path, fork_server):
    """Forked: its parent (the template) is outside its pid namespace, so it reads as 0;
    started (the negative control): the namespace's init, 1. Everything the kernel says
    of its credentials and filters is the same either way."""
    with IsolatedLauncher(fork_server=fork_server) as launcher:
        s = spec(PROBE, tmp_path)
        teach(launcher, s)
        rc, out, err, _ = run(launcher, s)
        assert rc == 0, err
        ppid, status = json.loads(out)
        assert ppid == (0 if fork_server else 1)
        assert len(_templates(launcher)) == (1 if fork_server else 0)
    assert status["Uid"][0] != "0" and len(set(status["Uid"])) == 1
    assert status["CapEff"] == status["CapPrm"] == status["CapAmb"] == ["0000000000000000"]
    assert (status["NoNewPrivs"], status["Seccomp"]) == (["1"], ["2"])


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "started"])
def test_the_namespace_holds_init_and_the_interpreter_only(tmp_path, fork_server):
    """Forked, init hands its own namespaces to the template: no workload process is made
    for the execution (nor left, a zombie, until the end). Started, the workload became
    the interpreter. Either way the script's pid namespace holds init (1) and itself."""
    code = ("import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), "
            "os.getpid())")
    with IsolatedLauncher(fork_server=fork_server) as launcher:
        s = spec(code, tmp_path)
        teach(launcher, s)
        for _ in range(2):
            rc, out, err, _ = run(launcher, s)
            assert rc == 0, err
            pids, me = out.rsplit(" ", 1)
            assert json.loads(pids) == [1, int(me)]


def test_both_ways_show_the_same_process(tmp_path):
    outs = []
    for fork_server in (True, False):
        with IsolatedLauncher(fork_server=fork_server) as launcher:
            s = spec(PROBE, tmp_path)
            teach(launcher, s)
            rc, out, err, _ = run(launcher, s)
            assert rc == 0, err
            outs.append(json.loads(out)[1])
    # the uid slot may differ; nothing else may
    for status in outs:
        del status["Uid"], status["Gid"]
    assert outs[0] == outs[1]


def test_the_template_never_holds_what_an_execution_is_given(tmp_path):
    """The plan (environment, tokens, paths) goes to the namespace's init and the forked
    interpreter only: nothing of it is in the template's memory, which every later
    execution is a copy of."""
    secret = "plan-secret-" + os.urandom(12).hex()
    with IsolatedLauncher() as launcher:
        s = spec("print('ran')", tmp_path, env={"SOME_SETTING": "same"})
        teach(launcher, s)
        s2 = spec("print('ran')", tmp_path, env={"SOME_SETTING": "same"})
        s2 = replace(s2, env={**s2.env, "EXECENGINE_RPC_TOKEN": secret})
        rc, out, err, _ = run(launcher, s2)
        assert (rc, out) == (0, "ran\n"), err
        [template] = _templates(launcher)
        memory = _memory(template.pid)
        assert b"SOME_SETTING" in memory  # the shared environment is there: the scan works
        assert secret.encode() not in memory


def _memory(pid: int) -> bytes:
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if "r" not in perms:
                continue
            start, end = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except (OSError, OverflowError, ValueError):
                continue
    return b"".join(chunks)


def test_a_killed_template_costs_no_execution_and_another_is_started(tmp_path):
    with IsolatedLauncher() as launcher:
        s = spec("print('ran')", tmp_path)
        teach(launcher, s)
        [template] = _templates(launcher)
        template.kill()
        template.wait(5)
        for _ in range(6):  # the entries it was asked for, then new ones
            rc, out, err, _ = run(launcher, s)
            assert (rc, out) == (0, "ran\n"), err
        deadline = time.monotonic() + 10
        while not _templates(launcher) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [p.pid for p in _templates(launcher)] != [template.pid]
        assert _templates(launcher)


def test_a_killed_template_ends_the_execution_it_runs_and_leaves_nothing(tmp_path):
    """The template (the forked interpreter's parent, outside its namespace) reports its
    end to the namespace's init. Killed, init learns nothing: it kills the namespace and
    waits for the interpreter to be gone (which the template's death kills as well)."""
    code = ("import subprocess, sys, time; subprocess.Popen(['sleep', '300']); "
            "print('up', flush=True); time.sleep(300)")
    with IsolatedLauncher() as launcher:
        s = spec(code, tmp_path)
        entry = teach(launcher, s)
        interpreter = psutil.Process(interpreter_of(entry))
        parent = interpreter.parent()
        assert parent is not None and parent.pid in [p.pid for p in _templates(launcher)]
        with launcher.launch(s) as child:
            assert child.stdout.readline() == b"up\n"
            uid = interpreter.uids().real
            os.kill(parent.pid, signal.SIGKILL)
            rc = child.wait(10)
            assert rc == -signal.SIGKILL
            assert not [p for p in psutil.process_iter(["uids"])
                        if p.info["uids"] and p.info["uids"].real == uid
                        and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "started"])
def test_a_cold_entry_forks_its_interpreter_too(tmp_path, fork_server):
    """Without warm entries (or with none left), the entry made for the launch forks the
    interpreter from the template as well, the first launch's included."""
    with IsolatedLauncher(warm=0, fork_server=fork_server) as launcher:
        s = spec(PROBE, tmp_path)
        for _ in range(2):
            rc, out, err, _ = run(launcher, s)
            assert rc == 0, err
            assert json.loads(out)[0] == (0 if fork_server else 1)
        assert not launcher._pool._entries


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "started"])
def test_the_cpu_an_interpreter_used_stays_in_the_hosts_accounting(tmp_path, fork_server):
    """A forked interpreter's parent is the template, which reaps it with ``wait``, so
    its time is in the template's children's time, where the host's accounting
    (``bench.speed.cpu_seconds``, the process tree) finds it; a process the kernel reaps
    (SIGCHLD ignored) takes it away (the tree then counted 0.04 s of the script's 1 s)."""
    from execengine.bench.speed import _settled

    burn = ("import time\nt = time.process_time()\n"
            "while time.process_time() - t < 1.0:\n    pass\nprint('done')")
    with IsolatedLauncher(fork_server=fork_server) as launcher:
        s = spec(burn, tmp_path)
        teach(launcher, s)
        before = _settled()
        rc, out, err, _ = run(launcher, s)
        assert (rc, out) == (0, "done\n"), err
        used = _settled() - before  # once the interpreter (or init) has been reaped
        assert used >= 0.9


def test_launches_in_flight_at_once_each_get_their_own_descriptors(tmp_path):
    """The template holds the sockets of every entry it serves; the interpreter it forks
    for one closes the others'. Closed by number but left to their objects, they were
    closed again when those were freed, after the plan's descriptors had taken the
    numbers: with 4 launches at a time, one in six lost a passed descriptor."""
    code = ("import os, sys; print(sorted(int(n) for n in os.listdir('/proc/self/fd') "
            "if n != '3' or os.path.exists('/proc/self/fd/3')))")
    with IsolatedLauncher() as launcher:
        teach(launcher, spec(code, tmp_path))

        def one(_: int) -> tuple[int, str, str]:
            r, w = os.pipe()
            try:
                s = replace(spec(code, tmp_path), pass_fds=(w,))
                rc, out, err, _ = run(launcher, s)
                return rc, out, err.replace(str(w), "W") + f" passed {w}"
            finally:
                os.close(r)
                os.close(w)

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(one, range(40)))
    for rc, out, err in results:
        passed = int(err.rsplit(" ", 1)[1])
        assert rc == 0, err
        assert passed in json.loads(out), (out, err)


@pytest.mark.parametrize("recycle", [True, False], ids=["recycled", "new-each-time"])
def test_an_init_serves_again_only_when_asked(tmp_path, recycle):
    """``recycle``: once an execution is over and reported, its namespaces' init (the
    entry's pid, which the launch reports) serves later executions; off, every execution
    gets a new one. Either way the interpreter is pid 2 (the pid counter is reset)."""
    code = "import os; print(os.getpid())"
    with IsolatedLauncher(recycle=recycle) as launcher:
        s = spec(code, tmp_path)
        teach(launcher, s)
        inits = []
        for _ in range(8):
            rc, out, err, entry = run(launcher, s)
            assert (rc, out) == (0, "2\n"), err
            inits.append(entry)
    if recycle:
        assert len(set(inits)) < len(inits), inits
    else:
        assert len(set(inits)) == len(inits), inits
