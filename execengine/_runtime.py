"""The child runtime (``sandbox/``) imported on the host under the one name children use.

Children import it as ``_execengine`` (``from _execengine.client import call_tool``). Host
code that needs the same behaviour (the benchmark harness decodes tool results exactly as
a script sees them) imports it under that name too, from wherever the package keeps it
(:func:`execengine._resources.sandbox_dir`), instead of keeping a copy.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import marshal
import os
import sys
import threading
from types import CodeType, ModuleType
from typing import Any

from execengine._resources import sandbox_dir

#: the import name of the child runtime, on both sides
RUNTIME_PACKAGE = "_execengine"
_lock = threading.Lock()
#: how a ``python -c`` program of the runtime starts: ``-c`` put the working directory
#: first on ``sys.path`` (unless ``-P``/``-I`` said not to), and a folder the script may
#: write must not decide what the runtime imports (a ``_execengine/`` or ``json.py`` left
#: there by an earlier script would run before the next one's own code, with its token)
SAFE_PATH = "import sys; sys.path[:1] == [''] and sys.path.pop(0); "


def entry_program(module: str) -> str:
    """The ``python -c`` program that runs ``_execengine.<module>.main`` (the same text as
    that module's ``ENTRY``)."""
    return f"{SAFE_PATH}from {RUNTIME_PACKAGE}.{module} import main; sys.exit(main())"


#: how a pre-started interpreter starts (``sandbox/zygote.py``): its program comes on the
#: descriptor in argv[1] (see :func:`zygote_program`) and leaves the plan's code in ``sys``,
#: run here (one frame above it, not two); what the interpreter's start imported is noted
#: first. (The zygote empties ``__main__`` before the code runs: the last lines name
#: nothing of it.)
ZYGOTE_LOADER = (
    'import os,sys,marshal;sys._execengine_startup=set(sys.modules);'
    'd=b"".join(iter(lambda:os.read(int(sys.argv[1]),65536),b""));g={"__name__":"_execengine_zygote"}\n'
    'if d[:1]==b"\\0":c,f,p=marshal.loads(d[1:]);exec(c,g);'
    '__import__("sys")._execengine_code=g[f](p)\n'
    'else:exec(compile(d,"<execengine zygote>","exec"),g)\n'
    'exec(__import__("sys").__dict__.pop("_execengine_code"))')


def zygote_program(source: str, function: str, params: dict[str, Any], argv0: str) -> bytes:
    """What :data:`ZYGOTE_LOADER` reads: ``sandbox/zygote.py`` (``source``) and a call of
    its ``function(params)``, whose result is the code the loader runs in ``__main__``.

    For the interpreter running here (``argv0`` is this one, by its real path), the
    source compiled once (4.5 ms, on every pre-started interpreter otherwise); for
    another, its text."""
    # marshal's version 4 (Python 3.4 and later) reads the same on every interpreter we run
    if _this_interpreter(argv0):
        return b"\0" + marshal.dumps((_compiled(source), function, params), 4)
    return (f"{source}\nsys._execengine_code = {function}(marshal.loads("
            f"{marshal.dumps(params, 4)!r}))\n").encode()


@functools.lru_cache(maxsize=4)
def _compiled(source: str) -> CodeType:
    return compile(source, "<execengine zygote>", "exec")


@functools.lru_cache(maxsize=16)
def _this_interpreter(argv0: str) -> bool:
    return os.path.realpath(argv0) == os.path.realpath(sys.executable)


def runtime_module(name: str) -> ModuleType:
    """``_execengine.<name>`` (``client``, ``helpers``...), loaded on first use."""
    with _lock:
        if RUNTIME_PACKAGE not in sys.modules:
            folder = sandbox_dir()
            spec = importlib.util.spec_from_file_location(
                RUNTIME_PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)])
            assert spec is not None and spec.loader is not None
            package = importlib.util.module_from_spec(spec)
            sys.modules[RUNTIME_PACKAGE] = package
            try:
                spec.loader.exec_module(package)
            except BaseException:
                del sys.modules[RUNTIME_PACKAGE]
                raise
    return importlib.import_module(f"{RUNTIME_PACKAGE}.{name}")
