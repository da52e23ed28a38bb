"""Agent-level tools: host handlers, with reference implementations of todo and memory.

``todo``, ``memory``, ``session_search`` and ``delegate_task`` are registered with their
schemas (:mod:`execengine.tools.agent_tools`), but only the host agent can run them: they
touch its session, its storage, its sub-agents. :func:`install_agent_handlers` routes them
to handlers through ``registry.set_agent_handler``. Two reference handlers ship:

* :class:`TodoStore`: a task list per session (``task_id``), in memory;
* :class:`MemoryStore`: short notes persisted to a JSON file (``agent.memory_file``),
  written atomically (temporary file in the same directory, fsync, rename). A file that
  cannot be read is never overwritten: calls fail with a message naming it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from execengine.context import ToolContext
from execengine.errors import MemoryFileError
from execengine.registry import Handler, ToolRegistry

TODO_STATUSES = ("pending", "in_progress", "completed", "cancelled")


class TodoStore:
    """In-memory task lists, one per session key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lists: dict[str, list[dict[str, str]]] = {}

    def items(self, session: str = "default") -> list[dict[str, str]]:
        with self._lock:
            return [dict(i) for i in self._lists.get(session, [])]

    def write(self, session: str, todos: list[dict[str, Any]], *, merge: bool) -> None:
        clean = [{"id": str(t["id"]), "content": str(t["content"]), "status": str(t["status"])}
                 for t in todos]
        with self._lock:
            if not merge:
                self._lists[session] = clean
                return
            current = self._lists.setdefault(session, [])
            index = {item["id"]: item for item in current}
            for item in clean:
                if item["id"] in index:
                    index[item["id"]].update(item)
                else:
                    current.append(item)
                    index[item["id"]] = item

    def __call__(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        session = ctx.task_key
        if args.get("todos") is not None:
            self.write(session, list(args["todos"]), merge=bool(args.get("merge", False)))
        items = self.items(session)
        counts = {s: sum(1 for i in items if i["status"] == s) for s in TODO_STATUSES}
        return {"todos": items, "summary": counts}


class MemoryStore:
    """Notes persisted to one JSON file: ``{"version": 1, "entries": [str, ...]}``."""

    def __init__(self, path: str | os.PathLike[str], *, max_entry_chars: int = 2000,
                 max_entries: int = 200) -> None:
        self.path = Path(os.path.expanduser(os.fspath(path)))
        self.max_entry_chars = max_entry_chars
        self.max_entries = max_entries
        self._lock = threading.Lock()

    def entries(self) -> list[str]:
        with self._lock:
            return self._load()

    def _load(self) -> list[str]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise MemoryFileError(f"memory file {self.path} cannot be read: {exc}") from exc
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise MemoryFileError(f"memory file {self.path} is not valid JSON ({exc}); it was "
                               "left untouched") from exc
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise MemoryFileError(f"memory file {self.path} has no list of text 'entries'; it "
                               "was left untouched")
        return list(entries)

    def _save(self, entries: list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"version": 1, "entries": entries}, fh, ensure_ascii=False, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def apply(self, action: str, content: str | None = None,
              old_text: str | None = None) -> dict[str, Any]:
        with self._lock:
            entries = self._load()
            if action == "read":
                return {"entries": entries, "count": len(entries)}
            if action in ("add", "replace") and not (content and content.strip()):
                return {"error": f"memory {action} needs non-empty 'content'"}
            if content and len(content) > self.max_entry_chars:
                return {"error": f"note is {len(content)} characters; the limit is "
                                 f"{self.max_entry_chars}. Shorten it."}
            if action == "add":
                assert content is not None
                if content.strip() in entries:
                    return {"entries": entries, "count": len(entries), "note": "already saved"}
                if len(entries) >= self.max_entries:
                    return {"error": f"memory is full ({self.max_entries} notes); remove or "
                                     "replace one first"}
                entries.append(content.strip())
            else:
                if not old_text:
                    return {"error": f"memory {action} needs 'old_text' identifying the note"}
                hits = [i for i, e in enumerate(entries) if old_text in e]
                if not hits:
                    return {"error": f"no note contains {old_text!r}",
                            "entries": entries}
                if len(hits) > 1:
                    return {"error": f"{len(hits)} notes contain {old_text!r}; quote more of "
                                     "the one you mean", "entries": [entries[i] for i in hits]}
                if action == "replace":
                    assert content is not None
                    entries[hits[0]] = content.strip()
                else:
                    del entries[hits[0]]
            self._save(entries)
            return {"entries": entries, "count": len(entries)}

    def __call__(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        try:
            return self.apply(str(args.get("action", "")), args.get("content"),
                              args.get("old_text"))
        except MemoryFileError as exc:
            return {"error": str(exc)}


def install_agent_handlers(
    registry: ToolRegistry,
    *,
    todo: Handler | None = None,
    memory: Handler | None = None,
    session_search: Handler | None = None,
    delegate_task: Handler | None = None,
) -> dict[str, Handler]:
    """Route agent-level tools to host handlers; returns what was installed.

    ``todo`` and ``memory`` default to the reference implementations (memory at
    ``config.agent.memory_file``); ``session_search`` and ``delegate_task`` stay unhandled
    unless given (dispatching them then says no handler is installed).
    """
    chosen: dict[str, Handler | None] = {
        "todo": todo if todo is not None else TodoStore(),
        "memory": memory if memory is not None else MemoryStore(registry.config.agent.memory_file),
        "session_search": session_search,
        "delegate_task": delegate_task,
    }
    installed: dict[str, Handler] = {}
    for name, handler in chosen.items():
        if handler is not None:
            registry.set_agent_handler(name, handler)
            installed[name] = handler
    return installed

