"""Entry point of the sandboxed child.

The engine starts ``python -c "{ENTRY}" <staging>/script.py`` (``-c`` rather than ``-m``:
runpy and what it imports are start-up time every execution would pay). ``PYTHONPATH``
holds the staging directory, where ``_execengine/`` is a copy of this package and
``hermes_tools.py`` the rendered stub. In order, the bootstrap:

1. makes the process a child subreaper (Linux) only when ``EXECENGINE_SUBREAPER=1`` asks
   for it: the sandboxed launchers set the attribute before ``exec`` (it survives
   ``execve``), and at level ``none`` the host finds strays by run token instead, so the
   child does not pay for importing ``ctypes``;
2. starts the watchdog on ``EXECENGINE_WATCHDOG_FD`` (removed from the environment) and
   writes one byte, ``R``, on it: that is the start-up handshake the host waits for. EOF
   on it means the host is gone; then every descendant (found through ``/proc``, by parent
   and by run token) and the process group are killed with SIGKILL, and the bootstrap
   exits;
3. does not connect to the host: the first tool call does (a script without tool calls
   never imports the RPC client);
4. runs the script as ``__main__`` the way ``python script.py`` would: ``sys.argv`` is
   ``[script]``, ``__file__`` is its absolute path and ``sys.path[0]`` its directory; its
   code is named ``EXECENGINE_SCRIPT_NAME`` (removed from the environment) when set: what
   tracebacks and warnings show is the user's file, or ``<execute_code>`` for a model's
   code, never the staging copy
   (``ENTRY`` took out the working directory that ``-c`` put there before it imported
   this package: nothing the runtime imports comes from a folder the script may write;
   ``hermes_tools`` stays importable through ``PYTHONPATH``);
5. reports an uncaught exception through ``sys.excepthook`` with the bootstrap's own frames
   removed (the default hook is replaced by :mod:`traceback`, which reads the script's
   lines from ``linecache``, where they are put under the script's name) and exits 1 (130
   for ``KeyboardInterrupt``); ``SystemExit`` behaves as usual;
6. flushes stdout/stderr and closes the connection at exit (after the script's non-daemon
   threads have finished). If the host is gone by then (this process has another parent),
   or its connection to the host broke (a tool call raised as the host died: then it
   waits for the watchdog to see the host gone, up to :data:`HOST_GONE_WAIT` seconds), it
   kills everything as the watchdog would: the watchdog thread alone would die with this
   process before it could.

Start-up cost is kept small: the bootstrap imports nothing beyond ``os`` and ``sys`` on
the way to the script.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # no typing import at run time: the child starts fast
if TYPE_CHECKING:
    from collections.abc import Callable, MutableMapping
    from types import TracebackType
    from typing import Any

ENV_WATCHDOG_FD = "EXECENGINE_WATCHDOG_FD"
ENV_SUBREAPER = "EXECENGINE_SUBREAPER"
#: project mode's project directory: last on ``sys.path`` (see :func:`project_path`)
ENV_PROJECT_DIR = "EXECENGINE_PROJECT_DIR"
ENV_RUN_TOKEN = "EXECENGINE_RUN_TOKEN"
#: the name the script's code gets (the user's file, ``<execute_code>``): see ``run_script``
ENV_SCRIPT_NAME = "EXECENGINE_SCRIPT_NAME"
#: what the engine runs with ``python -c`` (argv[1] is the script)
ENTRY = ("import sys; sys.path[:1] == [''] and sys.path.pop(0); "
         "from _execengine.bootstrap import main; sys.exit(main())")
#: the start-up handshake, written on the watchdog descriptor
READY = b"R"
#: read on the watchdog descriptor: SIGTERM everything of the execution
TERMINATE = b"T"
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
EXIT_KEYBOARD_INTERRUPT = 130
#: seconds a script whose connection broke waits, as it ends, for the watchdog to see the
#: host gone (EOF on its descriptor comes as the host's process is torn down)
HOST_GONE_WAIT = 2.0


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux only); True if it worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


#: run (last first) just before the emergency kill takes this process down
_before_exit: list[Callable[[], None]] = []
#: the watchdog's lock, released when it has seen the host gone (empty: no watchdog), and
#: the parent this process had when the watchdog started
_host_gone: list[Any] = []
_parent: list[int] = []


def _watch(fd: int) -> None:
    """Block on the watchdog descriptor; on EOF (or a read error) kill the group and leave.
    A ``T`` read on it asks for SIGTERM to everything of the execution first (a remote
    host's first escalation step; the local host signals the group itself)."""
    try:
        while True:
            data = os.read(fd, 4096)
            if not data:
                break
            if TERMINATE in data:
                _signal_everything(15)
    except OSError:
        pass
    for gone in _host_gone:
        gone.release()
    _kill_everything()


def _signal_everything(sig: int) -> None:
    token = os.environ.get(ENV_RUN_TOKEN, "")
    for pid in _descendants(os.getpid(), token):
        try:  # noqa: SIM105 (no imports on the emergency path)
            os.kill(pid, sig)
        except OSError:
            pass
    try:
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), sig)
        else:
            os.kill(os.getpid(), sig)
    except OSError:
        pass


def _descendants(root: int, token: str = "") -> list[int]:
    """Pids below ``root`` (a scan of ``/proc``; as a subreaper that includes descendants
    that changed session or double-forked), and with a ``token`` also every process whose
    initial environment carries ``EXECENGINE_RUN_TOKEN=<token>`` (strays that left the
    tree when this process is not a subreaper)."""
    children: dict[int, list[int]] = {}
    marked = []
    needle = ("\0" + ENV_RUN_TOKEN + "=" + token + "\0").encode() if token else b""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    me = os.getpid()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
        if needle and int(name) != me:
            try:
                with open("/proc/" + name + "/environ", "rb") as f:
                    if needle in b"\0" + f.read():
                        marked.append(int(name))
            except OSError:
                pass
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found + [pid for pid in marked if pid not in found]


def _kill_everything() -> None:
    import signal

    try:
        # descendants first (a few rounds, in case some were forking), then the group
        token = os.environ.get(ENV_RUN_TOKEN, "")
        for _ in range(3):
            pids = _descendants(os.getpid(), token)
            if not pids:
                break
            for pid in pids:
                try:  # noqa: SIM105 (no imports on the emergency path)
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for fn in reversed(_before_exit):
            try:  # noqa: SIM105
                fn()
            except Exception:
                pass
        # only a group of our own: when started without a new group (by hand, in a test
        # runner) killing the group would hit our parent too
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    finally:
        os._exit(137)


def start_watchdog(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Start the watchdog thread if ``EXECENGINE_WATCHDOG_FD`` names an open descriptor,
    and say ready on it (a socket; on a plain pipe's read end the write just fails).
    The variable is removed and the descriptor made non-inheritable either way."""
    value = environ.pop(ENV_WATCHDOG_FD, None)
    if not value:
        return False
    try:
        fd = int(value)
        os.fstat(fd)
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        sys.stderr.write(f"execengine: ignoring bad {ENV_WATCHDOG_FD}={value!r}\n")
        return False
    import _thread

    gone = _thread.allocate_lock()
    gone.acquire()
    _host_gone[:] = [gone]
    _parent[:] = [os.getppid()]
    _thread.start_new_thread(_watch, (fd,))
    try:  # noqa: SIM105 - contextlib is not imported here: the child starts fast
        os.write(fd, READY)
    except OSError:
        pass
    return True


def _own_client() -> Any:
    """This process's RPC client, if the script made a tool call (else None)."""
    client_module = sys.modules.get(__package__ + ".client") if __package__ else None
    client = getattr(client_module, "_client", None)
    return client if client is not None and client.pid == os.getpid() else None


def _if_host_gone() -> None:
    """The script is over. If the host is gone (this process was reparented), or may be
    going (the connection broke: its sockets close as its process is torn down, before
    the reparenting; then wait for the watchdog to see it), take everything down here,
    before this process's exit takes the watchdog thread with it."""
    if not _host_gone:
        return
    client = _own_client()
    if os.getppid() != _parent[0] or (client is not None and client.lost
                                      and _host_gone[0].acquire(True, HOST_GONE_WAIT)):
        _kill_everything()


def _close_client() -> None:
    client = _own_client()
    if client is not None:
        import contextlib

        with contextlib.suppress(Exception):  # exiting anyway; the kernel closes the socket
            client.close()


def _strip_own_frames(tb: TracebackType | None) -> TracebackType | None:
    own = os.path.normcase(os.path.abspath(__file__))
    while tb is not None and os.path.normcase(os.path.abspath(
            tb.tb_frame.f_code.co_filename)) == own:
        tb = tb.tb_next
    return tb


#: modules the standard library imports only to learn they are not here: another
#: platform's or implementation's (``msvcrt`` by ``subprocess``, ``org`` by ``copy``,
#: ``winreg`` and ``_winapi`` by ``mimetypes``), or one this build left out (``_dbm``,
#: ``_gdbm`` by ``dbm``): never the project directory's. Every standard library name
#: where the interpreter lists them (3.10+), and those a library tries the same way.
FOREIGN = frozenset({"msvcrt", "_winapi", "winreg", "nt", "_overlapped", "winsound",
                     "_scproxy", "org", "java", "vms_lib", "_wmi", "_dbm", "_gdbm",
                     "_distutils_system_mod", *getattr(sys, "stdlib_module_names", ())})


class _NotFromProject:
    """A finder ahead of the path's: a module of :data:`FOREIGN` comes from anywhere on
    ``sys.path`` but the project directory (a stand-in an earlier script left there would
    run in every ``import subprocess``)."""

    def __init__(self, folder: str, path_finder: Any) -> None:
        self.folder = folder
        self.path_finder = path_finder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if path is not None or name not in FOREIGN:
            return None
        spec = self.path_finder.find_spec(name, [p for p in sys.path if p != self.folder])
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec


def project_path(default: str | None = None) -> None:
    """Put the project directory (``EXECENGINE_PROJECT_DIR``, removed from the environment;
    else ``default``) last on ``sys.path``: the script imports the project's packages,
    but a module an earlier script left there (a ``json.py``) comes after the standard
    library, the installed packages, the stub and this runtime, and a
    ``sitecustomize.py`` there never ran at start-up (it is not on ``PYTHONPATH``). Nor
    does it provide a module the standard library only probes for (:data:`FOREIGN`)."""
    folder = os.environ.pop(ENV_PROJECT_DIR, None) or default
    if folder is not None and folder not in sys.path:
        sys.path.append(folder)
        # after the built-in and frozen modules' finders, before the path's
        at = next((i for i, f in enumerate(sys.meta_path)
                   if getattr(f, "__name__", "") == "PathFinder"), None)
        if at is not None:
            sys.meta_path.insert(at, _NotFromProject(folder, sys.meta_path[at]))


def run_script(path: str, name: str | None = None) -> int:
    """Run the script at ``path`` as ``__main__``; the exit status for an uncaught
    exception (``SystemExit`` propagates). ``name`` is what its code is called in
    tracebacks (default: the absolute path, as ``python script.py`` does)."""
    abspath = os.path.abspath(path)
    sys.argv[:] = [path]
    folder = os.path.dirname(abspath)
    if not getattr(sys.flags, "safe_path", False) and sys.path[:1] != [folder]:
        sys.path.insert(0, folder)  # as ``python script.py`` (-P / PYTHONSAFEPATH: none)
    main = type(sys)("__main__")  # (types.ModuleType, without importing types)
    main.__dict__.update({"__file__": abspath, "__cached__": None, "__package__": None,
                          "__spec__": None, "__builtins__": __builtins__})
    # importlib.machinery's loader is the import system's own, loaded at start-up already
    # (importing importlib.machinery took 0.4 ms: warnings, importlib)
    external = sys.modules.get("_frozen_importlib_external")
    loader = getattr(external, "SourceFileLoader", None)
    if loader is None:
        try:
            from importlib.machinery import SourceFileLoader as loader
        except ImportError:
            loader = None
    if loader is not None:
        main.__loader__ = loader("__main__", abspath)
    sys.modules["__main__"] = main
    try:
        with open(abspath, "rb") as f:
            source = f.read()
        code = compile(source, name or abspath, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        # the default hook prints ``exc.__traceback__`` (3.11+), so trim it on the exception
        tb = _strip_own_frames(exc.__traceback__)
        _report(exc.with_traceback(tb), name, abspath)
        return EXIT_KEYBOARD_INTERRUPT if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def _report(exc: BaseException, name: str | None, path: str) -> None:
    """Print an uncaught exception as Python would. Under another ``name`` than its file
    the script's lines come from ``linecache`` (imported only now: an error is rare), so
    the default hook, which reads them from the file the name points to, is replaced by
    :mod:`traceback`, which reads them there; a hook the script set is called as usual."""
    if name is None or name == path:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        return
    import linecache

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines(True)
    except OSError:
        lines = []
    linecache.cache[name] = (sum(map(len, lines)), None, lines, name)
    if sys.excepthook is not sys.__excepthook__:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        return
    import traceback

    traceback.print_exception(type(exc), exc, exc.__traceback__)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Run the script; its exit status. Run as the program (``argv`` None, ``ENTRY``) it
    ends the process instead (:func:`quick_exit`); a caller that passes ``argv`` (the
    remote runner, which cleans up after it) gets the status."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m _execengine.bootstrap SCRIPT.py\n")
        return 2
    if os.environ.pop(ENV_SUBREAPER, "") == "1":
        become_subreaper()
    start_watchdog()
    project_path()
    name = os.environ.pop(ENV_SCRIPT_NAME, None) or None
    import atexit
    import gc

    atexit.register(_close_client)
    # what the start made is out of the collector's sight (as in an interpreter forked
    # from the template, whose start froze it): collections walk the script's objects
    # only, and so does :func:`quick_exit`
    gc.freeze()
    try:
        code = run_script(args[0], name)
    except SystemExit as exc:
        code = _exit_status(exc)
    finally:
        _flush()
        _if_host_gone()
    if argv is None:
        quick_exit(code)
    return code  # (quick_exit returns when the script left daemon threads running)


def _exit_status(exc: SystemExit) -> int:
    """The exit status of an uncaught ``SystemExit``, as the interpreter makes it (a
    message other than a number is printed on stderr: status 1)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:  # noqa: SIM105 - no contextlib import on the way out
        sys.stderr.write(f"{code}\n")
    except (OSError, ValueError, AttributeError):
        pass
    return 1


#: the runtime's own threads (the client's; the watchdog is not a ``threading`` one)
_OWN_THREADS = ("execengine-rpc", "execengine-hello")


def quick_exit(code: int) -> None:
    """End the process as the interpreter's own exit does for everything a script may
    count on, without tearing the interpreter down: wait for the threads that are not
    daemons, run the ``atexit`` handlers, release what ``__main__`` holds (its objects'
    finalizers run), collect cycles, flush every file still open (wherever it is held)
    and the standard streams, then ``_exit``. The interpreter's teardown touches every
    object the start made: in an interpreter forked from the template (level
    ``isolated``) that copied most of the pages it shares with it, 3 ms of CPU an
    execution. Other objects still alive are not finalized, as Python's documentation
    allows at exit. Returns (the interpreter's own exit follows) when the script left
    daemon threads running: the interpreter stops them before it tears anything down,
    and this could not."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()  # what the interpreter calls first
        main = threading.main_thread()
        if any(t is not main and t.name not in _OWN_THREADS and t.is_alive()
               for t in threading.enumerate()):
            return
    import atexit
    import gc
    import io

    atexit._run_exitfuncs()  # (errors printed, as at exit)
    namespace = getattr(sys.modules.get("__main__"), "__dict__", {})
    for key in [k for k in namespace if not (k.startswith("__") and k.endswith("__"))]:
        try:  # noqa: SIM105 - a finalizer's error is the script's, as at exit
            del namespace[key]
        except Exception:
            pass
    del namespace
    gc.collect()
    # the files the script left open: flushed as the teardown would (the start's objects
    # are frozen, outside these generations: not walked, not touched)
    for obj in gc.get_objects():
        if isinstance(obj, io.IOBase) and obj not in (sys.stdout, sys.stderr):
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:
                pass
    status = code
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            if stream is sys.stdout and not status:
                status = 120  # as the interpreter, when stdout cannot be flushed at exit
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
