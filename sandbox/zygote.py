"""A pre-started interpreter: the sandboxed child's start-up, done before the plan is known.

Starting Python is most of what a trivial execution costs (``site`` alone, with the ``.pth``
hooks of a typical site-packages, is over 20 ms), and none of it depends on the script. So
a warm entry at level ``isolated`` (see ``execengine.isolation.entry``) does everything
privileged first — cgroup, namespaces, the fixed root with the interpreter's folders bound
read-only, rlimits, the uid drop, no-new-privileges, seccomp — and then ``exec``s the
child's interpreter with this program, under the environment every execution of its
launcher shares (the per-execution variables, such as the RPC endpoint and ``PYTHONPATH``,
left out). Until the plan comes it sees only the system's and the interpreter's folders,
which no sandbox can write. Started, it says so and waits, unprivileged, for the plan; the
namespace's init attaches the plan's binds only then (what the start-up read, and what it
would have read but did not find, are of the fixed root alone) and forwards it. Then it:

1. places the execution's descriptors (stdin ``/dev/null``, stdout, stderr, the passed
   ones at their numbers) and closes every other one;
2. changes to the working directory, sets the plan's CPU-time limit, and applies the rest
   of Landlock (the execution's own paths on top of the fixed rules its entry added
   ahead; the domain applies to this thread, and nothing else runs yet);
3. when the plan runs ``<this interpreter> -c CODE ARGS...`` under this environment plus
   only the per-execution variables, and a start now would have gone the same way (see
   :func:`_runs_here`): puts the plan's environment in place (``os.environ`` and the C
   ``environ`` its children inherit), puts ``PYTHONPATH`` on ``sys.path`` where the
   interpreter would have (made absolute against the working directory, as it does), sets
   ``sys.argv`` and leaves ``CODE`` for the loader to run in ``__main__``, as ``python -c``
   would; otherwise ``execve``s the plan's program with the plan's environment.

The error descriptor that came with the plan is close-on-exec; closing it before the code
runs is what tells the spawner the child started, as an ``execve`` would. Anything that
fails before that is written there, and the process exits 127.

Standard library only, any Python >= 3.8: it runs under the script's interpreter. It is
not imported as part of ``_execengine``: the spawner hands its source to the interpreter on
a pipe (the root holds no runtime until the plan's binds are attached).
"""

from __future__ import annotations

import sys

#: modules a start of the interpreter imported, before this program's own (the loader
#: notes them before this program's first line imports ``__future__``)
_STARTUP = sys.__dict__.pop("_execengine_startup", None) or set(sys.modules)
if sys.path and sys.path[0] == "":
    # ``-c`` put the working directory first: nothing is imported (or listed) from there
    del sys.path[0]

# What a start imported already (``os``, ``stat``), built-in modules and C extensions only:
# this program's own imports are CPU that every execution pays (``json``, ``socket`` and
# ``ctypes`` were 7.7 ms of it), and a script that imports them gets fresh copies anyway.
import _socket  # noqa: E402
import marshal  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: names that differ between executions of one launcher: set from the plan, not at start-up
LATE_VARS = (
    "PYTHONPATH", "EXECENGINE_RPC_ENDPOINT", "EXECENGINE_RPC_TOKEN", "EXECENGINE_EXEC_ID",
    "EXECENGINE_WATCHDOG_FD", "EXECENGINE_RUN_TOKEN", "HERMES_RPC_SOCKET", "HERMES_RPC_TOKEN",
    "TMPDIR", "TMP", "TEMP", "EXECENGINE_PROJECT_DIR", "EXECENGINE_SCRIPT_NAME",
)
MAX_PLAN = 1 << 20
MAX_FDS = 250
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
RULE_PATH_BENEATH = 1
#: what ``-c`` leaves in ``__main__``; the loader's own names are removed
MAIN_NAMES = ("__name__", "__doc__", "__package__", "__loader__", "__spec__",
              "__annotations__", "__builtins__")


def _recv(sock: _socket.socket) -> tuple[bytes, list[int]]:
    size = _socket.CMSG_SPACE(MAX_FDS * 4)
    while True:
        try:
            msg, ancdata, _, _ = sock.recvmsg(MAX_PLAN, size)
            break
        except InterruptedError:
            continue
        except OSError:
            return b"", []  # the other end went away: discarded
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.extend(memoryview(data[:len(data) - len(data) % 4]).cast("i"))
    return msg, fds


def _ctypes_calls() -> tuple[Any, Any, Any, Any]:
    """``syscall(2)``, Landlock's path-beneath attribute, ``byref`` and ``get_errno``, made from
    ``_ctypes``, the C module ``ctypes`` is built on, as ``ctypes`` makes them (1.0 ms,
    against 2.2 ms for importing ``ctypes``); from ``ctypes`` when that module differs."""
    try:
        import _ctypes

        c: Any = _ctypes  # ctypes's own internals, untyped
        c_long = type("c_long", (c._SimpleCData,), {"_type_": "l"})
        function = type("syscall", (c.CFuncPtr,), {
            "_flags_": c.FUNCFLAG_CDECL | c.FUNCFLAG_USE_ERRNO, "_restype_": c_long})
        process = type("process", (), {"_handle": c.dlopen(None, 0)})()
        syscall: Any = function(("syscall", process))
        types: list[Any] = [type("u64", (c._SimpleCData,), {"_type_": "Q"}),
                            type("s32", (c._SimpleCData,), {"_type_": "i"})]
        structure, byref, get_errno = c.Structure, c.byref, c.get_errno
    except (ImportError, AttributeError, TypeError, OSError):
        import ctypes

        syscall = ctypes.CDLL(None, use_errno=True).syscall
        syscall.restype = ctypes.c_long
        types = [ctypes.c_uint64, ctypes.c_int32]
        structure, byref, get_errno = ctypes.Structure, ctypes.byref, ctypes.get_errno
    path_beneath = type("PathBeneath", (structure,), {
        "_pack_": 1, "_fields_": [("allowed_access", types[0]), ("parent_fd", types[1])]})
    return syscall, path_beneath, byref, get_errno


def _landlock(read: list[str], write: list[str], ll: dict[str, Any], ruleset: int) -> None:
    """The plan's own rules, added to the ruleset made ahead, then enforced."""
    syscall, path_beneath, byref, get_errno = _ctypes_calls()
    for paths, access in ((read, ll["read_access"]), (write, ll["write_access"])):
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that does not exist cannot be reached either
            try:
                rights = access
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= ll["file_rights"]
                attr = path_beneath(rights, fd)
                if syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, byref(attr), 0) < 0:
                    err = get_errno()
                    raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
            finally:
                os.close(fd)
    if syscall(SYS_RESTRICT_SELF, ruleset, 0) < 0:
        err = get_errno()
        raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")


def _dup_above(fd: int, low: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)


def _place_fds(stdio: list[int], passed: list[int], targets: list[int], keep: set[int]
               ) -> None:
    """stdin=/dev/null, stdout/stderr, each passed descriptor at its number in the host;
    every other descriptor but ``keep`` closed (close-on-exec ones too: nothing execs)."""
    high = max([10, *targets]) + 1
    moved = [_dup_above(fd, high) for fd in (*stdio, *passed)]
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(moved[0], 1)
    os.dup2(moved[1], 2)
    for fd, target in zip(moved[2:], targets):
        os.dup2(fd, target)  # inheritable
    wanted = {0, 1, 2}.union(targets).union(keep)
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in wanted:
            try:  # noqa: SIM105 - contextlib would be an import every execution pays
                os.close(int(name))
            except OSError:  # the listing's own, closed already
                pass


def _startup_state() -> tuple[list[str], list[str]]:
    """What the start-up depended on that the plan can change: the folders that ``site``
    would have added (the user site directory, the ``.pth`` files' entries) but did not,
    since they did not exist; the top-level modules it imported from files."""
    missing = []
    try:
        import site

        dirs = list(site.getsitepackages())
        if site.ENABLE_USER_SITE:
            user = site.getusersitepackages()
            dirs.append(user)
            if not os.path.isdir(user):
                missing.append(user)
    except (ImportError, AttributeError):  # -S, or a virtualenv's own site module
        dirs = []
    for folder in dirs:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.rstrip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    entry = os.path.join(folder, line)
                    if not os.path.exists(entry):
                        missing.append(entry)
    modules = [name for name, mod in list(sys.modules.items())
               if name in _STARTUP and "." not in name
               and getattr(getattr(mod, "__spec__", None), "has_location", False)]
    return missing, modules


def _runs_here(plan: dict[str, Any], params: dict[str, Any], extra: list[str],
               state: tuple[list[str], list[str]]) -> bool:
    """The plan is ``<this interpreter> -c CODE ...`` under our start-up environment plus
    per-execution variables only, and a start now would have gone the same way: no folder
    ``site`` skipped exists now; the plan's ``PYTHONPATH`` (``extra``, which a start puts
    before the standard library) holds neither ``sitecustomize`` nor ``usercustomize``
    nor a module the start imported."""
    argv, env = plan["argv"], plan["env"]
    if len(argv) < 3 or argv[0] != params["argv0"] or argv[1] != "-c":
        return False
    if {k: v for k, v in env.items() if k not in LATE_VARS} != params["env"]:
        return False
    missing, modules = state
    if any(os.path.exists(p) for p in missing):
        return False
    return not any(_finds(folder, {"sitecustomize", "usercustomize", *modules})
                   for folder in extra)


def _finds(folder: str, names: set[str]) -> bool:
    """Whether an import would find one of ``names`` in ``folder``: asked of the import
    system only for the entries named like one (a search for each name costs 12 µs,
    and a start imports 40-80 modules from files), every name for a folder that cannot
    be listed (a zip archive, say)."""
    # the import system's own (what importlib.machinery names), loaded with the interpreter:
    # importing importlib.machinery costs 0.3 ms
    finder: Any = getattr(sys.modules.get("_frozen_importlib_external"), "PathFinder", None)
    if finder is None:
        from importlib.machinery import PathFinder as finder
    try:
        candidates = {entry.partition(".")[0] for entry in os.listdir(folder)} & names
    except OSError:
        candidates = names
    return any(finder.find_spec(name, [folder]) is not None for name in candidates)


def _become(plan: dict[str, Any], extra: list[str], coerced: dict[str, str]) -> object:
    """Become ``argv[0] -c CODE ARGS...`` under the plan's environment (``extra``: its
    ``PYTHONPATH``; ``coerced``: what the interpreter's start added to its environment,
    and would have added to the plan's: ``LC_CTYPE`` for a C locale); CODE, compiled."""
    argv, env = plan["argv"], plan["env"]
    os.environ.clear()
    os.environ.update(env)
    for name, value in coerced.items():
        os.environ.setdefault(name, value)
    # -c puts the working directory first, unless -P or PYTHONSAFEPATH (3.11) says not to
    sys.path[0:0] = [*([] if getattr(sys.flags, "safe_path", False) else [""]), *extra]
    sys.argv[:] = ["-c", *argv[3:]]
    if hasattr(sys, "orig_argv"):
        sys.orig_argv[:] = list(argv)
    main = sys.modules["__main__"].__dict__
    for name in list(main):
        if name not in MAIN_NAMES:
            del main[name]
    code = compile(argv[2], "<string>", "exec")
    # what this program imported, out of sight: the code imports them afresh, as after a
    # start (from its own working directory first, say), and sys.modules is a start's
    for name in [n for n in sys.modules if n not in _STARTUP]:
        del sys.modules[name]
    return code


def main(params: dict[str, Any]) -> object:
    """Wait on ``params["ctl"]`` for the plan and enter it; the code to run in
    ``__main__`` (when the plan's program is another one, ``execve`` it instead).

    ``params``: ``ctl``, the plan's socket (else ``sys.argv[2]`` names it); ``argv0`` and
    ``env``, how this interpreter was started; ``ruleset``, the Landlock ruleset made
    ahead (or None), with ``landlock``: ``read_access``, ``write_access``,
    ``file_rights`` (the rights on a path's rule, and those that apply to a file)."""
    state = _startup_state()
    # what the start put in the environment itself (the C locale's coercion to UTF-8)
    coerced = {k: v for k, v in os.environ.items()
               if k not in params["env"] and k not in LATE_VARS}
    # the plan's socket: in ``params``, or (a program shared by the interpreters started
    # ahead at level none) in argv[2]
    sock = _socket.socket(fileno=params["ctl"] if "ctl" in params else int(sys.argv[2]))
    # the start-up is over: only now does the namespace's init attach the plan's binds
    # (what site read, and ``state``, are of the fixed root alone)
    try:  # our pid (in the namespace): init waits for this process to end
        sock.send(b"ready %d" % os.getpid())
    except OSError:
        os._exit(0)  # discarded before use
    msg, fds = _recv(sock)
    if not msg:
        os._exit(0)  # discarded before use
    sock.close()  # init tells the spawner the plan was taken
    errfd = fds[2]  # until it is moved out of the way of the passed descriptors (below)
    try:
        req = marshal.loads(msg)  # from the namespace's init: see entry._forward_plan
        plan, extra = req["plan"], req.get("zygote") or {}
        # what we keep (the error pipe, the ruleset) goes above every number a passed
        # descriptor is placed at: a dup2 onto a number we hold would replace ours
        # silently (a host with its watchdog at 512 lost it, or the ruleset: EBADFD)
        floor = max([512, *plan["fd_targets"]]) + 1
        errfd = _dup_above(fds[2], floor)
        os.close(fds[2])
        uid = plan.get("uid")
        if uid is not None and (os.getuid(), os.geteuid()) != (uid, uid):
            raise OSError(f"the pre-started interpreter runs as uid {os.geteuid()}, not {uid}")
        ruleset, ll = params.get("ruleset"), params.get("landlock")
        if ruleset is not None:
            moved = _dup_above(ruleset, floor)
            os.close(ruleset)
            ruleset = moved
        if plan.get("landlock") is not None and (ruleset is None or ll is None):
            raise OSError("the plan asks for Landlock and no ruleset was made ahead")
        if len(fds) - 3 != len(plan["fd_targets"]):
            raise OSError(f"the plan came with {len(fds)} descriptors, not "
                          f"{3 + len(plan['fd_targets'])}: {fds}")
        _place_fds(fds[:2], fds[3:], list(plan["fd_targets"]),
                   {errfd} | ({ruleset} if ruleset is not None else set()))
        os.chdir(plan["cwd"])
        os.umask(int(plan.get("umask", 0o022)))  # the host's (see entry.exec_workload)
        if ruleset is not None:
            if plan.get("landlock") is not None and ll is not None:
                _landlock(list(extra.get("read", ())), list(extra.get("write", ())), ll,
                          ruleset)
            os.close(ruleset)  # never the code's
        for res, soft, hard in extra.get("rlimits", ()):  # CPU time, open files: as planned
            import resource

            resource.setrlimit(res, (soft, hard))
        path = [os.path.abspath(p)
                for p in plan["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        if not _runs_here(plan, params, path, state):
            os.execve(plan["argv"][0], plan["argv"], plan["env"])
        code = _become(plan, path, coerced)
    except BaseException as exc:
        try:  # noqa: SIM105
            os.write(errfd, f"{type(exc).__name__}: {exc}".encode()[:4000])
        except OSError:
            pass
        os._exit(127)
    os.close(errfd)  # started: what an execve would have closed
    return code


# -- the template: one started interpreter that every execution is forked from ------------

PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


#: the namespaces an entry's init hands over (its own: mount, pid, network, IPC, UTS), by
#: the flag ``setns`` takes and their name in ``/proc/self/ns``
NAMESPACES = ((0x00020000, "mnt"), (0x20000000, "pid"), (0x40000000, "net"),
              (0x08000000, "ipc"), (0x04000000, "uts"))


def serve(params: dict[str, Any]) -> object:
    """As the template (see ``execengine.isolation.entry.exec_template``): root, in a mount
    namespace of the fixed root alone, started with the environment every execution of its
    launcher shares. For each request on ``params["ctl"]`` (the uid, gid, rlimits and
    seccomp program of one warm entry, with the entry's socket and cgroup directories),
    wait for that entry's init to hand its namespaces over, and fork the execution's
    interpreter into them (:func:`_fork_into`); never returns here. Returns, in that
    interpreter, the code to run (see :func:`main`).

    The interpreters are our children (outside their pid namespaces: init cannot reap
    them): we reap them with ``wait`` (not the kernel, as SIG_IGN would: so their CPU time
    is in ours, where the host's accounting finds it) and report each one's wait status to
    its entry's init as ``exit <status>``. No process stands between us and them: a
    keeper forked per entry to do that cost a fork, its page faults and its exit (2.5 ms
    of CPU an execution)."""
    import ctypes
    import gc
    import select
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    sock = _socket.socket(fileno=params["ctl"])
    # ours, to come back to after each fork into an entry's
    home = [(flag, os.open("/proc/self/ns/" + name, os.O_RDONLY | os.O_CLOEXEC))
            for flag, name in NAMESPACES]
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    #: entries not handed over yet: their socket's descriptor -> (socket, request, cgroups)
    waiting: dict[int, tuple[_socket.socket, dict[str, Any], list[int]]] = {}
    #: interpreters running: pid -> the socket to their init
    running: dict[int, _socket.socket] = {}
    # what the start made lives in every fork: out of the collector's sight, so that a
    # collection there does not touch (and copy) those pages
    gc.freeze()
    while True:
        try:
            ready = [fd for fd, _ in poller.poll()]
        except InterruptedError:
            continue
        if wake_r in ready:
            _reap(wake_r, running)
        for fd in ready:
            if fd not in waiting:
                continue
            poller.unregister(fd)
            entry, req, cgroups = waiting.pop(fd)
            ours = [sock.fileno(), wake_r, wake_w, *(f for _, f in home),
                    *(s.fileno() for s in running.values()),
                    *(f for e, _, c in waiting.values() for f in (e.fileno(), *c))]
            pid, got = _fork_into(libc, ctypes, entry, cgroups, home, ours)
            if pid == 0:  # the interpreter, in the entry's namespaces: the code to run
                # (their descriptors are closed: detached, so that the objects, freed as
                # this frame ends, do not close the numbers again once the plan's use them)
                for s in (sock, *running.values(), *(e for e, _, _ in waiting.values())):
                    s.detach()
                init, ruleset, ll = got
                return _enter(libc, ctypes, req, cgroups, init, ruleset, ll, params)
            if pid > 0:
                running[pid] = got
        if sock.fileno() in ready:
            msg, fds = _recv(sock)
            if not msg:
                os._exit(0)  # the spawner is gone
            if not fds:
                continue
            entry = _socket.socket(fileno=fds[0])
            waiting[fds[0]] = (entry, marshal.loads(msg), fds[1:])
            poller.register(fds[0], select.POLLIN)


def _reap(wake_r: int, running: dict[int, _socket.socket]) -> None:
    """As the template, woken by SIGCHLD: reap every child that has ended, and report an
    interpreter's wait status to its entry's init (a process the script made with
    ``CLONE_PARENT`` is our child too: reaped, nothing reported)."""
    try:
        while os.read(wake_r, 4096):
            pass
    except OSError:  # drained (EAGAIN)
        pass
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        if pid == 0:
            return
        init = running.pop(pid, None)
        if init is not None:
            try:  # noqa: SIM105 - init is gone when the namespace was killed
                init.send(b"exit %d" % status)
            except OSError:
                pass
            init.close()


def _fork_into(libc: Any, ctypes: Any, entry: _socket.socket, cgroups: list[int],
               home: list[tuple[int, int]], ours: list[int]) -> tuple[int, Any]:
    """As the template, once ``entry``'s init has handed over (a pidfd of itself, its end
    of the interpreter's socket, the Landlock rules made ahead): join its namespaces, fork
    the interpreter there, come back to ours (``home``). ``(0, (init, ruleset, landlock))``
    in the interpreter, with every other descriptor of ours (``ours``) closed; ``(pid,
    socket to init)`` here, the entry's descriptors closed; ``(-1, None)`` when nothing
    was forked (the entry was discarded, or its namespaces could not be joined: its init
    then starts the interpreter itself)."""
    import signal

    got: list[int] = []
    child = False
    try:
        msg, got = _recv(entry)
        if not msg or len(got) < 2:
            return -1, None  # the entry was discarded before it was ready
        hand = marshal.loads(msg)
        if libc.setns(got[0], hand["ns"]) != 0:
            err = ctypes.get_errno()
            _home(libc, home)  # (a failed setns joins none of them; to be sure)
            entry.send(b"error setns: " + os.strerror(err).encode())
            return -1, None
        pid = os.fork()
        if pid == 0:
            child = True
            signal.set_wakeup_fd(-1)  # before its descriptor is closed
            for fd in (*ours, entry.detach(), got[0]):
                try:  # noqa: SIM105
                    os.close(fd)
                except OSError:
                    pass
            return 0, (got[1], got[2] if len(got) > 2 else None, hand.get("landlock"))
        _home(libc, home)
        init = _socket.socket(fileno=got.pop(1))
        # with a pidfd of ourselves: init forwards no plan once we are gone (nobody would
        # report the interpreter's end)
        me = (getattr(os, "pidfd_open", lambda pid: -1))(os.getpid())
        try:
            entry.sendmsg([b"ok"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                     me.to_bytes(4, sys.byteorder, signed=True))]
                          if me >= 0 else [])
        except OSError:
            pass
        finally:
            if me >= 0:
                os.close(me)
        return pid, init
    except OSError:
        return -1, None
    finally:
        if not child:  # (the interpreter keeps what it was handed, and its cgroups)
            if entry.fileno() >= 0:
                entry.close()
            for fd in got + cgroups:
                try:  # noqa: SIM105
                    os.close(fd)
                except OSError:
                    pass


def _home(libc: Any, home: list[tuple[int, int]]) -> None:
    """Back to the template's own namespaces. A template that cannot come back must not
    fork another entry's interpreter from inside this one's: it exits (the spawner starts
    another)."""
    for flag, fd in home:
        if libc.setns(fd, flag) != 0:
            os._exit(70)


def _enter(libc: Any, ctypes: Any, req: dict[str, Any], cgroups: list[int], init: int,
           ruleset: int | None, ll: dict[str, Any] | None, params: dict[str, Any]) -> object:
    """As the execution's interpreter, just forked into the entry's namespaces as root:
    join its cgroups, a session of our own, the rlimits, the uid drop, subreaper,
    no-new-privileges, seccomp; then wait for the plan (:func:`main`). Anything failing
    here ends the process before it says ready: the template reports that, and the
    spawner gives the plan to a cold entry."""
    import signal

    try:
        for fd in cgroups:
            procs = os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=fd)
            try:
                os.write(procs, b"0")  # this process
            finally:
                os.close(procs)
            os.close(fd)
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir("/")
        import resource

        for res, soft, hard in req["rlimits"]:
            resource.setrlimit(res, (soft, hard))
        uid, gid = req.get("uid"), req.get("gid")
        if uid is not None and gid is not None:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        # (after the uid drop, which clears it) the template, our parent, is the one
        # that reports our end to init: should it die, we die with it, waiting (init then
        # gives the plan to another entry) or running (our status is lost: init reports a
        # kill, as it does for a template that died before it reported)
        for option, value in ((PR_SET_CHILD_SUBREAPER, 1), (PR_SET_NO_NEW_PRIVS, 1),
                              (PR_SET_PDEATHSIG, int(signal.SIGKILL))):
            if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"prctl({option})")
        program = req.get("seccomp")
        if program:
            buf = ctypes.create_string_buffer(program, len(program))
            fprog = type("sock_fprog", (ctypes.Structure,), {
                "_fields_": [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]})(
                len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
            if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
                raise OSError(ctypes.get_errno(), "seccomp")
    except BaseException:
        os._exit(127)
    return main({"ctl": init, "argv0": params["argv0"], "env": params["env"],
                 "ruleset": ruleset, "landlock": ll})
