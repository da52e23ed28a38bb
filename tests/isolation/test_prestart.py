"""Executions in an interpreter that a warm entry started ahead (``sandbox/zygote.py``).

The script must not be able to tell, but for the program's own command line: what it sees
is compared with the same probe run by a cold entry (an interpreter exec'd for the plan).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from execengine.isolation._spawnserver import zygote_extras
from execengine.launch.base import LaunchLimits, LaunchSpec
from execengine.launch.local import LocalLauncher
from execengine.launch.sandboxed import _interpreter_paths
from execengine.proctree import RUN_TOKEN_VAR
from tests.sandbox._oldest_python import python38

from ._prestart import interpreter_of, teach
from .test_launchers import LEVELS

#: the level that pre-starts in a sandbox (see test_restricted_never_prestarts)
ISOLATED = [p for p in LEVELS if p.id == "isolated"]


class NoneLauncher(LocalLauncher):
    """Level ``none``, made as the tests below make a sandbox launcher (a template or not
    is an ``isolated`` matter)."""

    def __init__(self, warm: int = 2, fork_server: bool = True) -> None:
        super().__init__(warm=warm)


@pytest.fixture(params=ISOLATED)
def launcher_cls(request):
    return request.param


@pytest.fixture(params=[*ISOLATED, pytest.param(NoneLauncher, id="none")])
def prestarting_cls(request):
    """Every level that starts a script's interpreter ahead: what holds of its start-up
    and of the plan's execution there, whether sandboxed or not."""
    return request.param


def spec(code: str, cwd, *args: str, env: dict[str, str] | None = None,
         **kw) -> LaunchSpec:
    token = secrets.token_hex(8)
    return LaunchSpec(argv=[sys.executable, "-c", code, *args],
                      env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                           "EXECENGINE_RUN_TOKEN": token, **(env or {})},
                      cwd=str(cwd), run_token=token, writable_paths=(str(cwd),),
                      prestart=True, **kw)


def run(launcher, s: LaunchSpec, *, entry: int | None = None) -> tuple[int, str, str, int]:
    with launcher.launch(s) as child:
        rc = child.wait(30)
        return rc, child.stdout.read().decode(), child.stderr.read().decode(), child.pid


PROBE = r"""
import json, os, sys, subprocess
def fds():
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
            out.append(int(name))
        except OSError:
            pass  # the listing's own descriptor
    return sorted(out)
with open("/proc/self/cmdline", "rb") as fh:
    cmdline = fh.read().decode(errors="replace")
print(json.dumps({
    "zygote": "<execengine " + "zygote>" in cmdline,
    "argv": sys.argv, "path": sys.path[:3], "cwd": os.getcwd(),
    "env": {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TMP", "TEMP")},
    "main": sorted(k for k in globals() if not k.startswith("__")),
    "name": __name__, "fds": fds(), "stdin": sys.stdin.read(),
    "inherited": subprocess.run(["/bin/sh", "-c", "echo $PER_RUN"], capture_output=True,
                                text=True).stdout.strip(),
    "flags": [sys.flags.dont_write_bytecode, sys.flags.utf8_mode, sys.flags.isolated],
    "encoding": sys.stdout.encoding, "umask": os.umask(0o22),
    "streams": [(f.seekable(), f.isatty(), f.line_buffering) for f in (sys.stdout, sys.stderr)],
    "modules": sorted(sys.modules),
}))
"""
#: what the probe defines in __main__ itself
PROBE_NAMES = ["cmdline", "fds", "fh", "json", "os", "subprocess", "sys"]


@pytest.mark.parametrize("safe_path", [False, True], ids=["", "PYTHONSAFEPATH"])
def test_the_script_sees_what_an_exec_of_python_c_would_show(prestarting_cls, tmp_path,
                                                              safe_path):
    (tmp_path / "rel").mkdir()
    r, w = os.pipe()
    target = os.dup2(w, 77, inheritable=True)
    try:
        def probe() -> LaunchSpec:
            return spec(PROBE, tmp_path, "a1", "a 2",
                        env={"PER_RUN": secrets.token_hex(4),
                             "PYTHONPATH": "rel" + os.pathsep + "/nonexistent/abs",
                             "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUTF8": "1",
                             **({"PYTHONSAFEPATH": "1"} if safe_path else {})},
                        pass_fds=(target,))

        # without a template: a cold entry's interpreter would be forked from it
        with prestarting_cls(fork_server=False) as cold:
            s_cold = s = probe()
            rc, out, err, _ = run(cold, s)
            assert rc == 0, err
            seen_cold = json.loads(out)
            assert not seen_cold["zygote"]  # the control: an interpreter exec'd for it
        with prestarting_cls() as launcher:
            s = probe()
            entry = teach(launcher, s)
            rc, out, err, pid = run(launcher, s)
            assert rc == 0, err
            assert pid == entry
            seen = json.loads(out)
            assert seen.pop("zygote")
            seen_cold.pop("zygote")
            for got, asked in ((seen, s), (seen_cold, s_cold)):
                # exactly the plan's environment, and what a subprocess inherits (at
                # none, the run token is the one the interpreter started with: what it
                # forks without an exec carries that one)
                env, wanted = got.pop("env"), dict(asked.env)
                if prestarting_cls is NoneLauncher and got is seen:
                    assert env.pop(RUN_TOKEN_VAR) != wanted.pop(RUN_TOKEN_VAR)
                assert env == wanted
                assert got.pop("inherited") == asked.env["PER_RUN"]
            assert seen == seen_cold
        assert seen["argv"] == ["-c", "a1", "a 2"]
        expected = [str(tmp_path / "rel"), "/nonexistent/abs"]
        assert seen["path"][:2] == expected if safe_path else seen["path"] == ["", *expected]
        assert seen["cwd"] == str(tmp_path)
        assert seen["main"] == PROBE_NAMES
        assert seen["fds"] == [0, 1, 2, target]
        assert seen["stdin"] == ""
    finally:
        for fd in (r, w, target):
            os.close(fd)


@pytest.mark.parametrize(("code", "status", "stderr"), [
    ("import sys; sys.exit(3)", 3, ""),
    ("raise ValueError('boom')", 1, "ValueError: boom"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", -signal.SIGSEGV, ""),
    ("print('out', end=''); import sys; print('err', file=sys.stderr, end='')", 0, "err"),
])
def test_exit_status_and_streams(prestarting_cls, tmp_path, code, status, stderr):
    with prestarting_cls() as launcher:
        s = spec(code, tmp_path)
        entry = teach(launcher, s)
        rc, out, err, pid = run(launcher, s)
        assert pid == entry
        assert rc == status, err
        assert stderr in err
        if status == 0:
            assert (out, err) == ("out", "err")


def test_confined_before_the_code_runs(launcher_cls, tmp_path):
    """Its uid, no-new-privileges, seccomp and Landlock, as an entry that execs applies
    them; a host file outside the plan's paths stays unreadable (at ``none`` readable: the
    probe works)."""
    secret_dir = tmp_path.parent / f"secret-{secrets.token_hex(4)}"
    secret_dir.mkdir()
    os.chmod(secret_dir, 0o755)
    secret = secret_dir / "s"
    secret.write_text("secret")
    os.chmod(secret, 0o644)
    work = tmp_path / "work"
    work.mkdir()
    code = ("import json, sys\n"
            "st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read()"
            ".splitlines() if ':\\t' in l)\n"
            "try:\n    got = open(sys.argv[1]).read()\nexcept OSError as e:\n"
            "    got = type(e).__name__\n"
            "open('written', 'w').write('x')\n"
            "print(json.dumps({'uid': st['Uid'].split()[0], 'nnp': st['NoNewPrivs'], "
            "'seccomp': st['Seccomp'], 'read': got}))")
    with launcher_cls() as launcher:
        s = spec(code, work, str(secret))
        entry = teach(launcher, s)
        with launcher.launch(s) as child:
            assert child.wait(30) == 0, child.stderr.read()
            assert child.pid == entry
            seen = json.loads(child.stdout.read())
            uid = child.uid
    assert seen["read"] in ("PermissionError", "FileNotFoundError"), seen
    assert (seen["nnp"], seen["seccomp"]) == ("1", "2")
    if uid is not None:
        assert int(seen["uid"]) == uid != 0
    assert (work / "written").read_text() == "x"
    # the control: the same read from a plain child works
    import subprocess

    assert subprocess.run([sys.executable, "-c", code.split("\n")[0] + "\nprint(open("
                           f"{str(secret)!r}).read())"], capture_output=True, text=True,
                          cwd=work).stdout.strip() == "secret"


def test_another_program_or_environment_is_execed_by_the_prestarted_entry(prestarting_cls,
                                                                          tmp_path):
    with prestarting_cls() as launcher:
        s = spec("pass", tmp_path)
        entry = teach(launcher, s)
        # another program in a spec that may run pre-started (the terminal tool's are not,
        # see below; here the interpreter's folders readable, as in its): exec'd by the
        # pre-started entry with the plan's environment
        sh = replace(s, argv=[os.path.realpath("/bin/sh"), "-c",
                              'echo "$X"; tr "\\0" " " < /proc/$$/cmdline'],
                     env={**s.env, "X": "from-plan"},
                     readable_paths=tuple(_interpreter_paths(sys.executable)))
        rc, out, err, pid = run(launcher, sh)
        # (at none another program gains nothing there: it is started at launch, and the
        # interpreter is left for the next script)
        assert (rc, pid == entry) == (0, prestarting_cls is not NoneLauncher), err
        assert out.split("\n")[:2] == ["from-plan", f"{sh.argv[0]} -c {sh.argv[2]} "]
        # Python under another start-up environment: a fresh interpreter, as asked
        entry = teach(launcher, s)
        other = replace(s, argv=[sys.executable, "-c", "import sys, os; print(sys.flags."
                                 "utf8_mode, os.environ['LANG'], '<execengine ' + 'zygote>' in "
                                 "open('/proc/self/cmdline').read())"],
                        env={**s.env, "LANG": "C", "PYTHONUTF8": "1"})
        rc, out, err, pid = run(launcher, other)
        # (at none, started at launch: the interpreters started ahead for the other
        # environment are discarded, and the next ones started for this one)
        assert (rc, pid == entry) == (0, prestarting_cls is not NoneLauncher), err
        assert out.split() == ["1", "C", "False"]


def test_other_limits_get_a_cold_entry(launcher_cls, tmp_path):
    with launcher_cls() as launcher:
        s = spec("import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0])",
                 tmp_path)
        entry = teach(launcher, s)
        other = replace(s, limits=LaunchLimits(max_file_mb=3))
        rc, out, err, pid = run(launcher, other)
        assert rc == 0, err
        assert pid != entry
        assert out.strip() == str(3 * 1024 * 1024)


# -- which plans a pre-started entry may serve (no processes) --------------------------

WARM = {"level": "restricted", "netns": False,
        "landlock": {"read": ["/usr", "/py"], "write": ["/dev/null"], "deny_tcp": True,
                     "scope": True},
        "zygote": {"argv0": "/py/bin/python", "env": {}, "uid": 1001, "gid": 1001,
                   "rlimits": [[4, 0, 0]], "seccomp": {"allow_network": False,
                                                       "stream_only": False},
                   "interp": ["/py"]}}
PLAN = {"level": "restricted", "netns": False, "uid": 1001, "gid": 1001,
        "rlimits": [[4, 0, 0]], "seccomp": {"allow_network": False, "stream_only": False},
        "landlock": {"read": ["/usr", "/py", "/work/ro"], "write": ["/dev/null", "/work"],
                     "deny_tcp": True, "scope": True, "connect_ports": []}}


def _plan(**changes):
    plan = json.loads(json.dumps(PLAN))
    for key, value in changes.items():
        if key.startswith("ll_"):
            plan["landlock"][key[3:]] = value
        else:
            plan[key] = value
    return plan


def test_extras_are_the_plans_own_paths():
    assert zygote_extras(WARM, _plan()) == {"read": ["/work/ro"], "write": ["/work"],
                                            "rlimits": []}
    # the CPU-time limit is the plan's own: the interpreter sets it
    cpu = _plan(rlimits=[[4, 0, 0], [0, 9, 10]])
    assert zygote_extras(WARM, cpu) == {"read": ["/work/ro"], "write": ["/work"],
                                        "rlimits": [[0, 9, 10]]}


@pytest.mark.parametrize("changes", [
    {"uid": 1002}, {"gid": 1002}, {"level": "isolated"}, {"netns": True},
    {"rlimits": [[4, 0, 0], [1, 9, 9]]},
    {"seccomp": {"allow_network": True, "stream_only": False}},
    {"proxy_bridge": {"port": 1, "socket": "/s"}}, {"landlock": None},
    {"ll_connect_ports": [3128]}, {"ll_deny_tcp": False}, {"ll_scope": False},
    {"ll_read": ["/usr", "/work/ro"]}, {"ll_write": ["/work"]},
], ids=lambda c: ",".join(c))
def test_a_plan_the_entry_was_not_started_for_is_refused(changes):
    assert zygote_extras(WARM, _plan(**changes)) is None


@pytest.mark.parametrize(("read", "write", "ok"), [
    (["/py"], ["/work"], True),
    ([], ["/"], False),  # covers the interpreter
    (["/"], [], False),
    ([], ["/py/lib/site-packages"], False),  # writable inside it
    (["/py/lib"], [], True),  # readable inside it: bound over it read-only, as ever
])
def test_isolated_refuses_a_bind_over_or_writable_in_the_interpreter(read, write, ok):
    warm = {**WARM, "level": "isolated"}
    plan = _plan(level="isolated", mounts={"read": read, "write": write,
                                           "socket_dir": "/run/s"})
    assert (zygote_extras(warm, plan) is not None) is ok


PY38 = python38()


@pytest.mark.skipif(PY38 is None, reason="no Python 3.8 here (set EXECENGINE_TEST_PYTHON38)")
def test_the_oldest_supported_interpreter_runs_prestarted(prestarting_cls, tmp_path):
    assert PY38 is not None
    code = ("import sys; print(sys.version_info[:2] == (3, 8), '<execengine ' + 'zygote>' in "
            "open('/proc/self/cmdline').read(), sys.argv)")
    with prestarting_cls() as launcher:
        s = replace(spec(code, tmp_path, "x"), argv=[str(PY38), "-c", code, "x"])
        entry = teach(launcher, s)
        rc, out, err, pid = run(launcher, s)
    assert (rc, pid) == (0, entry), err
    assert out.split() == ["True", "True", "['-c',", "'x']"]


def test_an_interpreter_that_died_waiting_is_replaced_by_a_cold_entry(prestarting_cls, tmp_path):
    import psutil

    with prestarting_cls() as launcher:
        s = spec("print('ran')", tmp_path)
        entry = teach(launcher, s)
        interpreter = psutil.Process(interpreter_of(entry))
        interpreter.kill()
        for _ in range(500):  # not our child: poll until it is gone or a zombie
            try:
                if interpreter.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)
        rc, out, err, pid = run(launcher, s)
        assert (rc, out) == (0, "ran\n"), err
        assert pid != entry


def _venv(tmp_path: Path) -> tuple[str, Path]:
    """A virtual environment of this interpreter under ``tmp_path``: its ``python`` and its
    site-packages folder."""
    import venv

    venv.create(tmp_path / "venv", symlinks=True)
    return (str(tmp_path / "venv" / "bin" / "python"),
            next((tmp_path / "venv" / "lib").glob("python*/site-packages")))


#: a ``.pth`` line's condition that holds in the pre-started interpreter only (its loader)
IN_PRESTARTED = "'_execengine_startup' in open('/proc/self/cmdline').read()"


def test_an_interpreter_that_dies_starting_after_the_plan_came_leaves_it_to_a_cold_entry(
        prestarting_cls, tmp_path):
    """The plan comes while the pre-started interpreter is still in ``site``, which then
    ends it: the plan was not taken (its binds wait for the start-up to end), so a cold
    entry runs it."""
    python, site = _venv(tmp_path)
    (site / "0dies.pth").write_text(
        f"import os, time; {IN_PRESTARTED} and (time.sleep(0.5), os._exit(3))\n")
    work = tmp_path / "work"
    work.mkdir()
    code = "print('ran', '<execengine ' + 'zygote>' in open('/proc/self/cmdline').read())"
    s = replace(spec(code, work), argv=[python, "-c", code])
    # one entry: the one the next launch takes was started just now, and is in its sleep
    with prestarting_cls(warm=1) as launcher:
        entry = teach(launcher, s)
        rc, out, err, pid = run(launcher, s)
    assert (rc, out) == (0, "ran False\n"), err
    assert pid != entry


@pytest.mark.parametrize("level", [p for p in LEVELS if p.id == "restricted"])
def test_restricted_never_prestarts(level, tmp_path):
    """In the host's view, start-up code a sandbox could write (a ``.pth`` file in a
    virtual environment inside the working directory) would run before Landlock."""
    with level() as launcher:
        s = spec("pass", tmp_path)
        for _ in range(3):
            with launcher.launch(s) as child:
                assert child.wait(30) == 0
        assert launcher._zygote_seen is None
        assert len(launcher._pool) and not any(e.prestarted for e in launcher._pool._entries)


def test_an_interpreter_inside_a_writable_folder_is_never_prestarted(launcher_cls, tmp_path):
    """Once a plan may write the interpreter's folders (a virtual environment inside the
    working directory), no entry starts it ahead again, and none started before is used:
    it may have started while that plan's script wrote there."""
    python, _ = _venv(tmp_path)
    code = "print('<execengine ' + 'zygote>' in open('/proc/self/cmdline').read())"
    work = tmp_path / "work"
    work.mkdir()
    safe = replace(spec(code, work), argv=[python, "-c", code])
    with launcher_cls() as launcher:
        entry = teach(launcher, safe)
        rc, out, err, pid = run(launcher, safe)
        assert (rc, out, pid) == (0, "True\n", entry), err  # the control: it pre-starts
        writes = replace(safe, cwd=str(tmp_path), writable_paths=(str(tmp_path),))
        for s in (writes, safe, safe, safe):
            rc, out, err, _ = run(launcher, s)
            assert (rc, out) == (0, "False\n"), err
        assert launcher._zygote_seen is None
        assert not any(e.prestarted for e in list(launcher._pool._entries))


def _shadowing(tmp_path, where: str) -> LaunchSpec:
    lib = tmp_path / "lib"
    lib.mkdir()
    folder = tmp_path if where == "cwd" else lib
    if where == "package":
        (folder / "json").mkdir()
        (folder / "json" / "__init__.py").write_text("MARK = 'mine'\n")
    else:
        (folder / "json.py").write_text("MARK = 'mine'\n")
    (lib / "sitecustomize.py").write_text("import builtins\nbuiltins.SITE_CUSTOM = 1\n")
    if where == "zip":  # an archive on PYTHONPATH: not a folder to list
        import zipfile

        archive = tmp_path / "lib.zip"
        with zipfile.ZipFile(archive, "w") as z:
            for name in ("json.py", "sitecustomize.py"):
                z.write(lib / name, name)
        lib = archive
    code = ("import builtins, json; print(json.__dict__.get('MARK'), "
            "getattr(builtins, 'SITE_CUSTOM', None), '<execengine ' + 'zygote>' in "
            "open('/proc/self/cmdline').read())")
    return spec(code, tmp_path, env={"PYTHONPATH": str(lib)}, readable_paths=(str(lib),))


@pytest.mark.parametrize("where", ["cwd", "PYTHONPATH", "package", "zip"])
def test_what_a_start_would_import_from_the_plans_paths_gets_a_fresh_interpreter(
        prestarting_cls, tmp_path, where):
    """sitecustomize on the plan's PYTHONPATH, or a module of the pre-started one's in the
    working directory or on PYTHONPATH: run in an interpreter exec'd for the plan, which
    imports them as a start would."""
    s = _shadowing(tmp_path, where)
    with prestarting_cls() as cold:
        rc, out, err, _ = run(cold, s)
        assert rc == 0, err
        assert out.split() == ["mine", "1", "False"]
    with prestarting_cls() as launcher:
        entry = teach(launcher, s)
        rc, out, err, pid = run(launcher, s)
    assert (rc, pid) == (0, entry), err
    assert out.split() == ["mine", "1", "False"]


@pytest.mark.parametrize("slow_start", [False, True], ids=["start", "slow-start"])
def test_a_folder_a_pth_file_names_that_appears_with_the_plan(prestarting_cls, tmp_path,
                                                              slow_start):
    """A ``.pth`` entry (an editable install of the project) that was not there when the
    interpreter started, but is with the plan's binds: a fresh interpreter adds it.

    ``slow-start``: the plan comes while the interpreter is still in ``site`` (a ``.pth``
    line before the editable one sleeps); its binds wait for the start-up to end, else the
    folder is on the pre-started interpreter's sys.path or not by timing."""
    python, site = _venv(tmp_path)
    src = tmp_path / "project" / "src"
    (site / "__editable__mypkg.pth").write_text(f"{src}\n")
    if slow_start:  # read first ("0" sorts before "_"), by the pre-started interpreter only
        (site / "0slow.pth").write_text(f"import time; {IN_PRESTARTED} and time.sleep(1)\n")
    work = tmp_path / "work"
    work.mkdir()
    code = ("import mypkg, sys; print(mypkg.MARK, '<execengine ' + 'zygote>' in "
            "open('/proc/self/cmdline').read())")
    s = replace(spec(code, work), argv=[python, "-c", code])
    # one entry: the one the next launch takes was started just now
    with prestarting_cls(warm=1) as launcher:
        entry = teach(launcher, s)  # the folder does not exist yet
        (src / "mypkg").mkdir(parents=True)
        (src / "mypkg" / "__init__.py").write_text("MARK = 'editable'\n")
        rc, out, err, pid = run(launcher, replace(s, readable_paths=(str(src),)))
    assert (rc, pid) == (0, entry), err
    if prestarting_cls is NoneLauncher:
        # no binds at none: the folder appeared while site ran, or after (then it was
        # missing, and the plan is exec'd): either way, as a start now would see it
        assert out.split()[0] == "editable"
    else:
        assert out.split() == ["editable", "False"]


def test_the_cpu_time_limit_is_each_plans_own(launcher_cls, tmp_path):
    code = ("import resource; print(resource.getrlimit(resource.RLIMIT_CPU), "
            "'<execengine ' + 'zygote>' in open('/proc/self/cmdline').read())")
    with launcher_cls() as launcher:
        s = spec(code, tmp_path, limits=LaunchLimits(cpu_seconds=30))
        entry = teach(launcher, s)
        rc, out, err, pid = run(launcher, replace(s, limits=LaunchLimits(cpu_seconds=7)))
    assert (rc, pid) == (0, entry), err
    assert out.split() == ["(7,", "8)", "True"]


def test_a_terminal_command_leaves_the_prestarted_entry_for_the_next_script(prestarting_cls,
                                                                            tmp_path):
    """A launch that may not run pre-started (a terminal command) gets an entry of its
    own kind (or a cold one), so no interpreter started ahead goes unused."""
    with prestarting_cls() as launcher:
        s = spec("print('script')", tmp_path)
        entry = teach(launcher, s)
        sh = replace(s, argv=[os.path.realpath("/bin/sh"), "-c", "echo command"],
                     prestart=False, readable_paths=tuple(_interpreter_paths(sys.executable)))
        for _ in range(3):
            rc, out, err, pid = run(launcher, sh)
            assert (rc, out) == (0, "command\n"), err
            assert pid != entry
        rc, out, err, pid = run(launcher, s)
        assert (rc, out, pid) == (0, "script\n", entry), err


ZYGOTE = Path(__file__).resolve().parents[2] / "sandbox" / "zygote.py"
_CALLS = """
import os, sys
with open(sys.argv[1]) as f:
    src = f.read()
ns = {}
exec(compile("from __future__ import annotations\\n"
             + src[src.index("def _ctypes_calls"):src.index("def _landlock(")], "z", "exec"), ns)
syscall, beneath, byref, get_errno = ns["_ctypes_calls"]()
import _ctypes
attr = beneath(5, 7)
print("ctypes" in sys.modules, syscall(39) == os.getpid(), syscall(-1), get_errno(),
      _ctypes.sizeof(beneath), attr.allowed_access, attr.parent_fd)
"""


@pytest.mark.parametrize("interpreter", [sys.executable, *([str(PY38)] if PY38 else [])])
def test_the_landlock_calls_are_made_without_importing_ctypes(interpreter):
    """``syscall(2)`` from ``_ctypes`` alone (ctypes's import is 2.2 ms of every execution's
    CPU), on the oldest interpreter we support as on ours: a real call, errno, the 12-byte
    packed attribute Landlock reads."""
    out = subprocess.run([interpreter, "-I", "-c", _CALLS, str(ZYGOTE)], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "-1", "38", "12", "5", "7"]


def test_the_prestarted_interpreter_imports_nothing_a_script_would_pay_for_twice():
    """What the program imports itself: built-in and C modules, and what every start has
    imported already. A pure-Python module (``json``, ``socket``, ``ctypes``) would cost
    every execution its import, and again when the script imports it (the program's own
    copies are out of sys.modules by then)."""
    import ast

    tree = ast.parse(ZYGOTE.read_text())
    top = {alias.name for node in tree.body if isinstance(node, ast.Import)
           for alias in node.names}
    top |= {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert top == {"__future__", "sys", "_socket", "marshal", "os", "stat"}


def test_a_descriptor_passed_above_the_open_files_limit(launcher_cls, tmp_path):
    """A passed descriptor keeps its number in the host, which may be above the sandbox's
    open-files limit: the interpreter places it first and sets the limit after, as an
    entry that execs does."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is too low")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    r, w = os.pipe()
    high = 1500
    os.dup2(w, high)
    os.close(w)
    try:
        code = ("import os, resource; os.write(1500, b'through'); "
                "print(resource.getrlimit(resource.RLIMIT_NOFILE))")
        with launcher_cls() as launcher:
            s = spec(code, tmp_path, pass_fds=(high,))
            entry = teach(launcher, replace(s, pass_fds=(high,)))
            rc, out, err, pid = run(launcher, s)
        assert (rc, out) == (0, "(1024, 1024)\n"), err
        assert pid == entry
        assert os.read(r, 100) == b"through"
    finally:
        os.close(high)
        os.close(r)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
