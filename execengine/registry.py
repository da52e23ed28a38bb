"""The tool registry: tools, toolsets, availability, definitions for the model.

A :class:`ToolRegistry` is an object you build and pass around; nothing global is read or
written on import. Conflict rule: a tool name belongs to the toolset that registered it
first. Registering the same name again *from the same toolset* replaces the entry (a module
reloaded); from another toolset it is refused with :class:`ToolConflictError` naming the
holder, unless ``override=True`` is passed. All methods are thread-safe.

Dispatching one call (:meth:`ToolRegistry.dispatch`, :func:`dispatch`) is the edge where
typed results become text for the model. Nothing there raises for a bad call: unknown
tools, arguments that are not an object, agent level tools without a host handler, hook
refusals and handler exceptions all come back as a JSON object ``{"error": "..."}``.
Results longer than the tool's ``max_result_size_chars`` are cut, with a marker saying how
much.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from execengine import discovery
from execengine._asyncbridge import bridge
from execengine.config import Config, load_config
from execengine.context import CallContext, ToolContext
from execengine.discovery import ToolSpecs
from execengine.errors import ToolConflictError, ToolError, UnknownToolError, did_you_mean
from execengine.policy import DEFAULT_POLICY, ToolPolicy
from execengine.schema import normalize_function_schema
from execengine.services import Services
from execengine.toolsets import BUILTIN_TOOLSETS, Toolset, resolve
from execengine.truncation import head_tail

if TYPE_CHECKING:
    from execengine.host.base import Host

log = logging.getLogger(__name__)
T = TypeVar("T")

#: ``check_fn(config)`` returns True when the tool can run; False or a reason string when not.
CheckFn = Callable[[Config], "bool | str"]
Handler = Callable[[dict[str, Any], "ToolContext"], Any]
#: ``patch(function_schema, ctx)`` returns the schema to serve, or None to withhold the tool.
SchemaPatch = Callable[[dict[str, Any], "DefinitionContext"], "dict[str, Any] | None"]
PreHook = Callable[[str, dict[str, Any], "ToolContext"], Any]
PostHook = Callable[[str, dict[str, Any], str, "ToolContext"], "str | None"]


@dataclass(frozen=True)
class ToolEntry:
    name: str
    toolset: str
    schema: Mapping[str, Any]
    handler: Handler
    check_fn: CheckFn | None = None
    requires_env: tuple[str, ...] = ()
    is_async: bool = False
    description: str = ""
    emoji: str = ""
    max_result_size_chars: int | None = None
    policy: ToolPolicy = DEFAULT_POLICY
    schema_patch: SchemaPatch | None = None
    source: str = ""
    #: the tool's result when a ``pre_tool_call`` hook refuses the call (default:
    #: ``{"error": "Tool call refused: <reason>"}``)
    refusal: Callable[[str], str] | None = None

    @property
    def parameters(self) -> Mapping[str, Any]:
        params: Mapping[str, Any] = self.schema["parameters"]
        return params

    @property
    def agent_level(self) -> bool:
        return self.policy.agent_level


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""


@dataclass(frozen=True)
class DefinitionContext:
    """Given to schema patches: which tools this session really offers."""

    available: frozenset[str]
    config: Config
    registry: ToolRegistry
    #: "model": definitions offered to the model; "script": the functions of a script's stub
    purpose: Literal["model", "script"] = "model"


@dataclass
class _Hooks:
    """Tuples, replaced whole when a hook is added: every call reads them without a lock."""

    pre: tuple[PreHook, ...] = ()
    post: tuple[PostHook, ...] = ()
    schema: list[SchemaPatch] = field(default_factory=list)


class ToolRegistry:
    """Tools, toolsets, hooks, and the :class:`~execengine.services.Services` their
    handlers share (``host``: where they run; default: the configured one)."""

    def __init__(
        self, config: Config | None = None, *, toolsets: Iterable[Toolset] = BUILTIN_TOOLSETS,
        host: Host | None = None,
    ) -> None:
        self.config = config or Config()
        self._lock = threading.RLock()
        self._tools: dict[str, ToolEntry] = {}
        self._toolsets: dict[str, Toolset] = {t.name: t for t in toolsets}
        self._hooks = _Hooks()
        self._agent_handlers: dict[str, Handler] = {}
        self._env_passthrough: list[str] = []
        #: counts changes of the tools, toolsets and schema patches: what was derived from
        #: them (a stub, a tool set) is stale once it moves
        self.generation = 0
        #: what the handlers share: the host, terminal, task directories, approvals...
        self.services = Services(self.config, host=host,
                                 passthrough=lambda: self.env_passthrough)
        #: plugins or tool modules that failed to load: name -> reason
        self.load_errors: dict[str, str] = {}
        self._closed = False

    # -- construction ---------------------------------------------------------------

    @classmethod
    def with_builtins(cls, config: Config | None = None, *, plugins: bool = True,
                      host: Host | None = None) -> ToolRegistry:
        """A registry holding the built-in tools (and plugins, when ``plugins``)."""
        reg = cls(config, host=host)
        discovery.load_builtin_tools(reg)
        if plugins:
            discovery.load_plugins(reg)
        return reg

    def register(
        self,
        name: str,
        toolset: str,
        schema: Mapping[str, Any],
        handler: Handler,
        check_fn: CheckFn | None = None,
        requires_env: Iterable[str] = (),
        is_async: bool = False,
        description: str = "",
        emoji: str = "",
        max_result_size_chars: int | None = None,
        *,
        policy: ToolPolicy = DEFAULT_POLICY,
        schema_patch: SchemaPatch | None = None,
        override: bool = False,
        source: str = "",
        refusal: Callable[[str], str] | None = None,
    ) -> ToolEntry:
        """Register a tool; see the module docstring for the conflict rule.

        ``policy`` declares what the tool may be used for (callable from scripts, hidden
        parameters, agent-level, batching); see :class:`~execengine.policy.ToolPolicy`.
        """
        normalized = normalize_function_schema(name, schema)
        if description:
            normalized["description"] = description
        if not callable(handler):
            raise ToolError(f"tool {name!r}: handler must be callable")
        if max_result_size_chars is not None and max_result_size_chars < 100:
            raise ToolError(f"tool {name!r}: max_result_size_chars must be >= 100")
        if not isinstance(policy, ToolPolicy):
            raise ToolError(f"tool {name!r}: policy must be a ToolPolicy, "
                            f"got {type(policy).__name__}")
        unknown = sorted(policy.hidden_params - set(normalized["parameters"].get(
            "properties", {})))
        if unknown:
            raise ToolError(f"tool {name!r}: hidden_params names no parameter: "
                            f"{', '.join(unknown)}")
        entry = ToolEntry(
            name=name,
            toolset=toolset,
            schema=normalized,
            handler=handler,
            check_fn=check_fn,
            requires_env=tuple(requires_env),
            is_async=is_async,
            description=normalized["description"],
            emoji=emoji,
            max_result_size_chars=max_result_size_chars,
            policy=policy,
            schema_patch=schema_patch,
            source=source,
            refusal=refusal,
        )
        with self._lock:
            held = self._tools.get(name)
            if held is not None and held.toolset != toolset and not override:
                raise ToolConflictError(
                    f"tool {name!r} is already registered by toolset {held.toolset!r}"
                    f"{f' (from {held.source})' if held.source else ''}; "
                    "pass override=True to replace it"
                )
            self._tools[name] = entry
            self.generation += 1
            if toolset not in self._toolsets:
                self._toolsets[toolset] = Toolset(toolset, f"Tools registered as {toolset!r}")
        return entry

    def apply(self, specs: ToolSpecs, *, source: str = "") -> None:
        for call in specs.calls:
            self.register(**{"source": source, **call})

    def unregister(self, name: str) -> None:
        with self._lock:
            self._tools.pop(name, None)
            self.generation += 1

    def register_toolset(self, toolset: Toolset, *, override: bool = False) -> None:
        with self._lock:
            if toolset.name in self._toolsets and not override:
                held = self._toolsets[toolset.name]
                if held != toolset and (held.tools or held.includes):
                    raise ToolConflictError(f"toolset {toolset.name!r} is already declared")
            self._toolsets[toolset.name] = toolset
            self.generation += 1

    # -- lookup -----------------------------------------------------------------------

    def get(self, name: str) -> ToolEntry:
        # one read of the dict, atomic: no lock (every tool call looks its tool up here)
        entry = self._tools.get(name)
        if entry is None:
            raise UnknownToolError(self.unknown_tool_message(name))
        return entry

    def unknown_tool_message(self, name: str, among: Iterable[str] | None = None) -> str:
        names = sorted(among if among is not None else self.names())
        return f"Unknown tool {name!r}{did_you_mean(name, names)}. Available: {', '.join(names)}"

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._tools)

    def entries(self) -> list[ToolEntry]:
        with self._lock:
            return [self._tools[n] for n in sorted(self._tools)]

    @property
    def toolsets(self) -> Mapping[str, Toolset]:
        with self._lock:
            return dict(self._toolsets)

    def toolset_members(self) -> dict[str, list[str]]:
        with self._lock:
            out: dict[str, list[str]] = {name: [] for name in self._toolsets}
            for entry in self._tools.values():
                out.setdefault(entry.toolset, []).append(entry.name)
            return out

    def resolve_toolsets(self, names: Iterable[str]) -> set[str]:
        """Tool names reachable from toolset names (recursive; see :mod:`toolsets`)."""
        with self._lock:
            return resolve(names, self._toolsets, self.toolset_members(), self._tools)

    def select(
        self,
        enabled_toolsets: Iterable[str] | None = None,
        disabled_toolsets: Iterable[str] | None = None,
    ) -> set[str]:
        """Registered tool names selected by toolsets (before availability).

        enabled only: just those; disabled only: all minus those; both: enabled minus
        disabled; neither: the config's ``toolsets`` section decides, and with none of it, all.
        """
        if enabled_toolsets is None and disabled_toolsets is None:
            enabled_toolsets = self.config.toolsets.enabled
            disabled_toolsets = self.config.toolsets.disabled
        chosen = (
            self.resolve_toolsets(enabled_toolsets)
            if enabled_toolsets is not None
            else set(self.names())
        )
        if disabled_toolsets:
            chosen -= self.resolve_toolsets(disabled_toolsets)
        return chosen & set(self.names())

    # -- availability -----------------------------------------------------------------

    def availability(self, names: Iterable[str] | None = None) -> dict[str, Availability]:
        """Check tools; each ``check_fn`` runs at most once per call, exceptions mean no."""
        cache: dict[int, Availability] = {}
        out: dict[str, Availability] = {}
        for name in sorted(self.names() if names is None else names):
            entry = self.get(name)
            missing = [v for v in entry.requires_env if not os.environ.get(v)]
            if missing:
                reason = f"missing environment variable {', '.join(missing)}"
                out[name] = Availability(False, reason)
                continue
            if entry.check_fn is None:
                out[name] = Availability(True)
                continue
            key = id(entry.check_fn)
            if key not in cache:
                cache[key] = self._run_check(entry)
            out[name] = cache[key]
        return out

    def _run_check(self, entry: ToolEntry) -> Availability:
        try:
            verdict = entry.check_fn(self.config)  # type: ignore[misc]
        except Exception as exc:
            log.warning("availability check of %s failed: %s: %s", entry.name,
                        type(exc).__name__, exc)
            return Availability(False, f"check failed: {type(exc).__name__}: {exc}")
        if verdict is True:
            return Availability(True)
        if isinstance(verdict, str) and verdict:
            return Availability(False, verdict)
        return Availability(False, "availability check returned false")

    def toolset_availability(self) -> dict[str, Availability]:
        """A toolset is available when at least one of its tools is."""
        avail = self.availability()
        out: dict[str, Availability] = {}
        for name in sorted(self.toolsets):
            members = sorted(self.resolve_toolsets([name]))
            if not members:
                out[name] = Availability(False, "no tools registered")
                continue
            up = [m for m in members if avail[m].available]
            if up:
                out[name] = Availability(True, f"{len(up)}/{len(members)} tools available")
            else:
                reasons = sorted({avail[m].reason for m in members})
                out[name] = Availability(False, "; ".join(reasons))
        return out

    # -- definitions for the model ------------------------------------------------------

    def available_tools(
        self,
        enabled_toolsets: Iterable[str] | None = None,
        disabled_toolsets: Iterable[str] | None = None,
    ) -> list[str]:
        chosen = self.select(enabled_toolsets, disabled_toolsets)
        avail = self.availability(chosen)
        return sorted(n for n in chosen if avail[n].available)

    def get_tool_definitions(
        self,
        enabled_toolsets: Iterable[str] | None = None,
        disabled_toolsets: Iterable[str] | None = None,
        *,
        format: Literal["openai", "anthropic"] = "openai",
        purpose: Literal["model", "script"] = "model",
        available: Iterable[str] | None = None,
        only: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Schemas of the selected, available tools, after schema patches, sorted by name.

        ``available``: those tools as :meth:`available_tools` just named them (its checks
        are not run again); ``only``: serve these of them alone (the patches still see the
        whole set)."""
        if available is None:
            names = self.available_tools(enabled_toolsets, disabled_toolsets)
        else:
            names = sorted(set(available))
        ctx = DefinitionContext(frozenset(names), self.config, self, purpose)
        with self._lock:
            global_patches = list(self._hooks.schema)
        wanted = None if only is None else set(only)
        out: list[dict[str, Any]] = []
        for name in names:
            if wanted is not None and name not in wanted:
                continue
            entry = self.get(name)
            schema: dict[str, Any] | None = _copy(entry.schema)
            patches = [entry.schema_patch] if entry.schema_patch else []
            patches += global_patches
            for patch in patches:
                try:
                    schema = patch(schema, ctx)  # type: ignore[arg-type]
                except Exception:
                    log.exception("schema patch of %s failed; tool withheld", name)
                    schema = None
                if schema is None:
                    break
            if schema is None:
                continue
            if format == "anthropic":
                out.append({"name": schema["name"], "description": schema["description"],
                            "input_schema": schema["parameters"]})
            else:
                out.append({"type": "function", "function": schema})
        return out

    # -- hooks, agent handlers, env passthrough, services ----------------------------------

    def add_hook(
        self, kind: Literal["pre_tool_call", "post_tool_call"], fn: Callable[..., Any]
    ) -> None:
        with self._lock:
            if kind == "pre_tool_call":
                self._hooks.pre = (*self._hooks.pre, fn)
            elif kind == "post_tool_call":
                self._hooks.post = (*self._hooks.post, fn)
            else:
                raise ToolError(f"unknown hook kind {kind!r}; use pre_tool_call or post_tool_call")

    def add_schema_patch(self, fn: SchemaPatch) -> None:
        """A patch applied to every tool's schema when definitions are built, after the
        tool's own ``schema_patch``: ``fn(function_schema, ctx)`` returns the schema to serve
        or None to withhold the tool (``ctx.available`` is this session's tool set)."""
        with self._lock:
            self._hooks.schema.append(fn)
            self.generation += 1

    def hooks(self) -> tuple[tuple[PreHook, ...], tuple[PostHook, ...]]:
        """The pre- and post-call hooks as they are now (this runs for every call)."""
        hooks = self._hooks
        return hooks.pre, hooks.post

    def set_agent_handler(self, name: str, handler: Handler | None) -> None:
        """Install (or remove, with None) the host's handler for an agent-level tool."""
        with self._lock:
            if handler is None:
                self._agent_handlers.pop(name, None)
            else:
                self._agent_handlers[name] = handler

    def agent_handler(self, name: str) -> Handler | None:
        with self._lock:
            return self._agent_handlers.get(name)

    def add_env_passthrough(self, names: Iterable[str]) -> None:
        """Variables a skill needs in children (``required_environment_variables``)."""
        with self._lock:
            for n in names:
                if n not in self._env_passthrough:
                    self._env_passthrough.append(n)
            self.generation += 1

    @property
    def env_passthrough(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(dict.fromkeys((*self.config.terminal.env_passthrough,
                                        *self._env_passthrough)))

    def set_handler(self, name: str, handler: Handler) -> Handler:
        """Replace the handler of the registered tool ``name``; the previous one (a tool
        whose collaborator comes later binds it so, e.g. ``execute_code`` to its engine)."""
        with self._lock:
            entry = self._tools.get(name)
            if entry is None:
                raise UnknownToolError(f"no tool named {name!r}")
            self._tools[name] = replace(entry, handler=handler)
            self.generation += 1
            return entry.handler

    def close(self) -> None:
        """Close the services (terminal sessions, background processes, MCP servers, the
        host). Idempotent."""
        with self._lock:
            self._closed = True
        self.services.close()

    def __enter__(self) -> ToolRegistry:
        return self

    def __del__(self) -> None:
        # only a registry holding live services (terminal sessions, a host) leaks
        services = getattr(self, "services", None)
        if not getattr(self, "_closed", True) and services is not None and services.started:
            warnings.warn("ToolRegistry with open services was not closed (use `with` or "
                          "close())", ResourceWarning, stacklevel=1)

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- dispatch (see dispatch below) ------------------------------------------------------

    def dispatch(self, name: str, args: Any, context: CallContext | None = None, *,
                 task_id: str | None = None) -> str:
        """Run one tool call and return the result text for the model; never raises.

        ``context`` is the caller's side of the call (task, origin, cwd, approver...);
        ``task_id`` is a shorthand that sets the context's task.
        """
        return dispatch(self, name, args, _context(context, task_id))

    async def adispatch(self, name: str, args: Any, context: CallContext | None = None, *,
                        task_id: str | None = None) -> str:
        """Async form of :meth:`dispatch` for hosts running an event loop."""
        return await adispatch(self, name, args, _context(context, task_id))


# -- dispatching one call ---------------------------------------------------------------

@dataclass(frozen=True)
class Refuse:
    """Returned by a ``pre_tool_call`` hook to stop the call with a reason."""

    reason: str


def error_result(message: str, **fields: Any) -> str:
    return json.dumps({"error": message, **fields}, ensure_ascii=False)


#: ``json.dumps(value, ensure_ascii=False, default=str)``: json's C encoder, made once (json
#: makes one per call: 3x the time of a small result's encoding). Without the check for
#: circular values, whose state would be shared by every thread: a circular value ends in
#: RecursionError instead of ValueError, each refused the same (see :func:`_finish`).
_c_encoder = json.encoder.c_make_encoder  # type: ignore[attr-defined]
if _c_encoder is not None:
    _encode = _c_encoder(None, str, json.encoder.encode_basestring, None, ": ", ", ", False,
                         False, True)

    def _to_json(value: Any) -> str:
        return "".join(_encode(value, 0))
else:  # an interpreter without json's C module: json's own encoder, the same text
    _encode_py = json.JSONEncoder(ensure_ascii=False, default=str).encode

    def _to_json(value: Any) -> str:
        return _encode_py(value)


def to_text(value: Any) -> str:
    """A handler's return value as the text the model sees."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return _to_json(value)


def cap(text: str, limit: int | None) -> str:
    """A result longer than ``limit`` keeps its head and tail (:mod:`execengine.truncation`)."""
    if limit is None or len(text) <= limit:
        return text
    return head_tail(text, limit, what="RESULT").text


class _Prepared:
    """The validated part of a call, shared by the sync and async paths."""

    def __init__(self, entry: ToolEntry, handler: Any, args: dict[str, Any], ctx: ToolContext):
        self.entry, self.handler, self.args, self.ctx = entry, handler, args, ctx


def _prepare(registry: ToolRegistry, name: str, args: Any, call: CallContext,
             entry: ToolEntry | None = None, ctx: ToolContext | None = None
             ) -> _Prepared | str:
    if entry is None:
        try:
            entry = registry.get(name)
        except UnknownToolError as exc:
            return error_result(str(exc))
    if args is None or args == "":
        args = {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            return error_result(f"Arguments for {name!r} are not valid JSON: {exc}")
    if not isinstance(args, dict):
        return error_result(
            f"Arguments for {name!r} must be a JSON object, got {type(args).__name__}"
        )
    handler: Any = entry.handler
    if entry.agent_level:
        handler = registry.agent_handler(name)
        if handler is None:
            return error_result(
                f"{name!r} is an agent-level tool: the host agent handles it, and this host "
                "installed no handler (ToolRegistry.set_agent_handler)"
            )
    if ctx is None:
        ctx = ToolContext(registry, registry.config, call)
    pre, _ = registry.hooks()
    for hook in pre:
        try:
            verdict = hook(name, args, ctx)
        except Exception:
            log.exception("pre_tool_call hook %r failed; ignored", hook)
            continue
        if isinstance(verdict, Refuse):
            message = f"Tool call refused: {verdict.reason}"
            return entry.refusal(message) if entry.refusal else error_result(message)
        if isinstance(verdict, dict):
            args = verdict
    return _Prepared(entry, handler, args, ctx)


def _finish(registry: ToolRegistry, prep: _Prepared, value: Any) -> str:
    try:
        text = to_text(value)
    except (ValueError, TypeError, RecursionError) as exc:  # circular, too deep, a bad key
        return error_result(f"Tool execution failed: its result cannot be sent as JSON "
                            f"({type(exc).__name__}: {exc})")
    _, post = registry.hooks()
    for hook in post:
        try:
            changed = hook(prep.entry.name, prep.args, text, prep.ctx)
        except Exception:
            log.exception("post_tool_call hook %r failed; ignored", hook)
            continue
        if isinstance(changed, str):
            text = changed
    return cap(text, prep.entry.max_result_size_chars)


def _failure(exc: BaseException) -> str:
    return error_result(f"Tool execution failed: {type(exc).__name__}: {exc}")


#: what handlers return most: surely not awaitable (spares the ABC check per call)
_PLAIN = frozenset({str, dict, list, bytes, int, float, bool, type(None), tuple})


def dispatch(registry: ToolRegistry, name: str, args: Any, call: CallContext | None = None,
             *, entry: ToolEntry | None = None, ctx: ToolContext | None = None) -> str:
    """Run one call (see :meth:`ToolRegistry.dispatch`); ``entry``: the tool's registration,
    when the caller has just looked it up; ``ctx``: the handler's context, when the caller
    keeps one for ``call`` (made here otherwise)."""
    prep = _prepare(registry, name, args, call or CallContext(), entry, ctx)
    if isinstance(prep, str):
        return prep
    try:
        value = prep.handler(prep.args, prep.ctx)
        if type(value) not in _PLAIN and inspect.isawaitable(value):
            value = bridge().run(_awaitable(value))
    except Exception as exc:
        log.debug("tool %s failed", name, exc_info=True)
        return _failure(exc)
    return _finish(registry, prep, value)


async def adispatch(registry: ToolRegistry, name: str, args: Any,
                    call: CallContext | None = None) -> str:
    prep = _prepare(registry, name, args, call or CallContext())
    if isinstance(prep, str):
        return prep
    try:
        if prep.entry.is_async or inspect.iscoroutinefunction(prep.handler):
            value = await bridge().run_async(prep.handler(prep.args, prep.ctx))
        else:
            value = await asyncio.to_thread(prep.handler, prep.args, prep.ctx)
            if inspect.isawaitable(value):
                value = await bridge().run_async(_awaitable(value))
    except Exception as exc:
        return _failure(exc)
    return _finish(registry, prep, value)


async def _awaitable(value: Any) -> Any:
    return await value


def _context(context: CallContext | None, task_id: str | None) -> CallContext:
    context = context if context is not None else CallContext()
    return context.replace(task_id=task_id) if task_id is not None else context


def _copy(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy a schema patch may change: every mapping and list is new. A schema is JSON
    data, and every execution copies every tool's: this takes a quarter of the time of
    ``copy.deepcopy``."""
    return {key: _copy_value(value) for key, value in schema.items()}


#: values shared by a copy, not copied
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _copy_value(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy_value(item) for key, item in value.items()}
    if kind is list:
        return [_copy_value(item) for item in value]
    if kind in _ATOMS:
        return value
    if isinstance(value, Mapping):
        return {key: _copy_value(item) for key, item in value.items()}
    return copy.deepcopy(value)  # anything else a registration put there


_default_lock = threading.Lock()
_default: ToolRegistry | None = None


def default_registry() -> ToolRegistry:
    """A convenience registry with the built-in tools and plugins, configured from
    ``load_config()``; built on first use (importing execengine does no I/O)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ToolRegistry.with_builtins(load_config())
        return _default


def handle_function_call(name: str, args: Any, context: CallContext | None = None, *,
                         task_id: str | None = None,
                         registry: ToolRegistry | None = None) -> str:
    """Dispatch one call (on ``registry`` or the default one); the result text for the
    model. Never raises: errors come back as a JSON ``{"error": ...}`` object."""
    return (registry or default_registry()).dispatch(name, args, context, task_id=task_id)


def get_tool_definitions(
    enabled_toolsets: Iterable[str] | None = None,
    disabled_toolsets: Iterable[str] | None = None,
    *,
    registry: ToolRegistry | None = None,
    format: Literal["openai", "anthropic"] = "openai",
) -> list[dict[str, Any]]:
    """Tool schemas for the model from ``registry`` or the default one."""
    return (registry or default_registry()).get_tool_definitions(
        enabled_toolsets, disabled_toolsets, format=format)
