"""Dispatching one tool call: the edge where typed results become text for the model.

Nothing here raises for a bad call. Unknown tools, arguments that are not an object, agent
level tools without a host handler, hook refusals and handler exceptions all come back as a
JSON object ``{"error": "..."}``. Results longer than the tool's ``max_result_size_chars``
are cut, with a marker saying how much.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from execengine._asyncbridge import bridge
from execengine.context import CallContext, ToolContext
from execengine.errors import UnknownToolError
from execengine.truncation import head_tail

if TYPE_CHECKING:
    from execengine.registry import ToolEntry, ToolRegistry

log = logging.getLogger(__name__)


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
