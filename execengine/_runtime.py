"""The child runtime (``sandbox/``) imported on the host under the one name children use.

Children import it as ``_execengine`` (``from _execengine.client import call_tool``). Host
code that needs the same behaviour (the benchmark harness decodes tool results exactly as
a script sees them) imports it under that name too, from wherever the package keeps it
(:func:`execengine._resources.sandbox_dir`), instead of keeping a copy.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

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
