"""Finding tools: built-in tool modules and plugins.

Built-in tool modules are listed in :data:`BUILTIN_TOOL_MODULES`; each holds a
:class:`ToolSpecs` whose ``register(...)`` calls declare its tools, applied to a registry on
load. A tool module that fails to import is logged, recorded in ``registry.load_errors`` and
skipped; the others load.

Plugins come from the ``execengine.plugins`` entry-point group and from the folder named by
``plugins.directory``. A plugin is a module (or package) with a ``register(ctx)`` function, or
an entry point naming such a callable; ``ctx`` is a :class:`PluginContext`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from execengine.errors import PluginError
from execengine.toolsets import Toolset

if TYPE_CHECKING:
    from execengine.registry import Handler, ToolEntry, ToolRegistry

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "execengine.plugins"

#: the built-in tool modules, in load order (a new one is added here)
BUILTIN_TOOL_MODULES = (
    "execengine.tools.file_tools",
    "execengine.tools.patch_tool",
    "execengine.tools.search_tool",
    "execengine.tools.terminal_tool",
    "execengine.tools.web_tools",
    "execengine.tools.code_execution_tool",
    "execengine.tools.agent_tools",
)


class ToolSpecs:
    """Registrations declared by a built-in tool module, applied to a registry on load.

    A tool module holds one instance and calls ``register(...)`` on it at top level, with
    the arguments of :meth:`ToolRegistry.register`.
    """

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def register(self, name: str, toolset: str, schema: Mapping[str, Any], handler: Handler,
                 **kwargs: Any) -> None:
        self.calls.append({"name": name, "toolset": toolset, "schema": schema,
                           "handler": handler, **kwargs})


def load_builtin_tools(registry: ToolRegistry) -> list[str]:
    """Import the built-in tool modules and apply their registrations; returns their names."""
    loaded = []
    for modname in BUILTIN_TOOL_MODULES:
        try:
            module = importlib.import_module(modname)
            _apply_module(registry, module)
        except Exception as exc:
            log.warning("tool module %s failed to load: %s: %s", modname,
                        type(exc).__name__, exc)
            registry.load_errors[modname] = f"{type(exc).__name__}: {exc}"
            continue
        loaded.append(modname)
    return loaded


def _apply_module(registry: ToolRegistry, module: ModuleType) -> None:
    for value in vars(module).values():
        if isinstance(value, ToolSpecs):
            registry.apply(value, source=module.__name__)


class PluginContext:
    """What a plugin's ``register(ctx)`` may do."""

    def __init__(self, registry: ToolRegistry, name: str) -> None:
        self.registry = registry
        self.name = name
        self.config = registry.config

    def register_tool(self, name: str, toolset: str, schema: Any, handler: Any,
                      **kwargs: Any) -> ToolEntry:
        kwargs.setdefault("source", f"plugin {self.name}")
        return self.registry.register(name, toolset, schema, handler, **kwargs)

    def register_toolset(self, name: str, description: str, tools: Iterable[str] = (),
                         includes: Iterable[str] = ()) -> None:
        self.registry.register_toolset(Toolset(name, description, tuple(tools), tuple(includes)))

    def register_hook(self, kind: str, fn: Callable[..., Any]) -> None:
        self.registry.add_hook(kind, fn)  # type: ignore[arg-type]

    def register_schema_patch(self, fn: Callable[..., Any]) -> None:
        self.registry.add_schema_patch(fn)

    def register_env_passthrough(self, names: Iterable[str]) -> None:
        self.registry.add_env_passthrough(names)


def load_plugins(registry: ToolRegistry) -> list[str]:
    """Load plugins named by the registry's config; failures are recorded, not raised."""
    cfg = registry.config.plugins
    loaded: list[str] = []
    candidates: list[tuple[str, Callable[[], Any]]] = []
    if cfg.entry_points:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            candidates.append((ep.name, ep.load))
    if cfg.directory:
        folder = Path(cfg.directory).expanduser()
        if not folder.is_dir():
            registry.load_errors["plugins.directory"] = f"not a directory: {folder}"
        else:
            for path in sorted(folder.iterdir()):
                if path.name.startswith(("_", ".")):
                    continue
                if path.suffix == ".py" or (path / "__init__.py").is_file():
                    candidates.append((path.stem, _file_loader(path)))
    for name, load in candidates:
        if name in cfg.disabled:
            continue
        try:
            target = load()
            setup = getattr(target, "register", target)
            if not callable(setup):
                raise PluginError(f"plugin {name!r} has no register(ctx) function")
            setup(PluginContext(registry, name))
        except Exception as exc:
            log.warning("plugin %s failed to load: %s: %s", name, type(exc).__name__, exc)
            registry.load_errors[f"plugin {name}"] = f"{type(exc).__name__}: {exc}"
            continue
        loaded.append(name)
    return loaded


def _file_loader(path: Path) -> Callable[[], ModuleType]:
    def load() -> ModuleType:
        target = path / "__init__.py" if path.is_dir() else path
        modname = f"execengine_plugin_{path.stem}"
        spec = importlib.util.spec_from_file_location(
            modname, target,
            submodule_search_locations=[str(path)] if path.is_dir() else None,
        )
        if spec is None or spec.loader is None:
            raise PluginError(f"cannot load plugin from {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(modname, None)
            raise
        return module

    return load
