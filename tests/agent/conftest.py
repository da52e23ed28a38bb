"""A local chat-completions server replaying scripted turns, and tools that record calls."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from execengine.config import Config
from execengine.policy import ToolPolicy
from execengine.registry import ToolRegistry


def call(name: str, arguments: Any = "{}", cid: str | None = None) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if cid is not None:
        out["id"] = cid
    return out


def reply(content: str | None = None, *calls: dict[str, Any],
          finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """One scripted completion (the whole response body)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content, **extra}
    if calls:
        msg["tool_calls"] = list(calls)
    reason = finish_reason or ("tool_calls" if calls else "stop")
    return {"id": "cmpl", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": msg, "finish_reason": reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class HttpStatus:
    """A scripted HTTP error response."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body if isinstance(body, (bytes, str)) else json.dumps(body)


class ChatServer:
    """``POST /v1/chat/completions`` replaying ``script``; records every request body."""

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    item = server.script.pop(0) if server.script else HttpStatus(
                        500, {"error": {"message": "script exhausted"}})
                if self.path != "/v1/chat/completions":
                    item = HttpStatus(404, {"error": {"message": f"no route {self.path}"}})
                if callable(item):
                    item = item(body)
                status, payload = ((item.status, item.body) if isinstance(item, HttpStatus)
                                   else (200, json.dumps(item)))
                data = payload.encode() if isinstance(payload, str) else payload
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def play(self, *items: Any) -> ChatServer:
        self.script.extend(items)
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture(autouse=True)
def no_leaked_tool_threads() -> Iterator[None]:
    """Worker threads of parallel batches must be gone shortly after each test."""
    yield
    deadline = time.monotonic() + 5
    while True:
        left = [t.name for t in threading.enumerate() if t.name.startswith("execengine-tool")]
        if not left:
            return
        assert time.monotonic() < deadline, f"tool threads still running: {left}"
        time.sleep(0.01)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    srv = ChatServer()
    try:
        yield srv
    finally:
        srv.close()


def assert_valid_transcript(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every tool call answered exactly once, right after its call, in order; no orphans."""
    seen: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m.get("role") != "tool", f"orphan tool result at {i}: {m}"
        ids = [tc["id"] for tc in m.get("tool_calls") or ()]
        assert len(set(ids)) == len(ids), f"repeated ids in one message: {ids}"
        assert not set(ids) & seen, f"id reused across turns: {ids}"
        seen.update(ids)
        for tc in m.get("tool_calls") or ():
            assert tc["type"] == "function"
            assert isinstance(tc["function"]["arguments"], str)
        results = [r["tool_call_id"] for r in messages[i + 1:i + 1 + len(ids)]]
        assert results == ids, f"results {results} do not answer calls {ids} in order"
        assert all(r["role"] == "tool" for r in messages[i + 1:i + 1 + len(ids)])
        i += 1 + len(ids)


class Gate:
    """Records how many calls run at once; each call waits (bounded) for ``target`` peers.

    With a parallel batch of ``target`` calls every call sees all its peers arrive and the
    peak is ``target``; run sequentially each call waits out ``hold`` alone and the peak is 1.
    No wall-clock assertion is involved.
    """

    def __init__(self, target: int = 1, hold: float = 0.3) -> None:
        self.target = target
        self.hold = hold
        self.current = 0
        self.peak = 0
        self.order: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, label: str) -> None:
        with self._cond:
            self.current += 1
            self.peak = max(self.peak, self.current)
            self.order.append(label)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.peak >= self.target, timeout=self.hold)
            self.current -= 1


class Tools:
    """Real tools registered for a test; every handler call is logged."""

    def __init__(self, root: Path, gate: Gate) -> None:
        self.root = root
        self.gate = gate
        self.log: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def record(self, name: str, args: dict[str, Any]) -> None:
        with self._lock:
            self.log.append((name, dict(args)))

    def calls_of(self, name: str) -> list[dict[str, Any]]:
        return [a for n, a in self.log if n == name]


def _obj(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required)}


def build_registry(root: Path, gate: Gate, config: Config | None = None
                   ) -> tuple[ToolRegistry, Tools]:
    reg = ToolRegistry(config or Config())
    tools = Tools(root, gate)

    def path_of(args: dict[str, Any]) -> Path:
        p = Path(args["path"])
        return p if p.is_absolute() else root / p

    def read_file(args: dict[str, Any], ctx: Any) -> Any:
        tools.record("read_file", args)
        gate(f"read:{args['path']}")
        p = path_of(args)
        if p.is_dir():
            return {"entries": sorted(x.name for x in p.iterdir())}
        return {"content": p.read_text()}

    def write_file(args: dict[str, Any], ctx: Any) -> Any:
        tools.record("write_file", args)
        gate(f"write:{args['path']}")
        p = path_of(args)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(args["content"])
        return {"bytes_written": len(args["content"].encode())}

    def web_search(args: dict[str, Any], ctx: Any) -> Any:
        tools.record("web_search", args)
        gate(f"search:{args['query']}")
        return {"data": {"web": [{"title": args["query"], "url": "http://127.0.0.1/"}]}}

    def clarify(args: dict[str, Any], ctx: Any) -> Any:
        tools.record("clarify", args)
        gate("clarify")
        return {"answer": "yes"}

    def fail(args: dict[str, Any], ctx: Any) -> Any:
        tools.record("fail", args)
        raise RuntimeError("boom")

    def delegate(args: dict[str, Any], ctx: Any) -> Any:
        tools.record("delegate_task", args)
        return {"result": f"did {args['goal']}"}

    reg.register("read_file", "file", {"description": "Read a file", "parameters": _obj(
        {"path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1}},
        ["path"])}, read_file, policy=ToolPolicy(read_only=True, parallel_safe=True))
    reg.register("write_file", "file", {"description": "Write a file", "parameters": _obj(
        {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"])},
        write_file, policy=ToolPolicy(parallel_safe=True))
    reg.register("web_search", "web", {"description": "Search", "parameters": _obj(
        {"query": {"type": "string"}, "limit": {"type": "integer"}}, ["query"])}, web_search,
        policy=ToolPolicy(read_only=True, parallel_safe=True))
    reg.register("clarify", "clarify", {"description": "Ask the user", "parameters": _obj(
        {"question": {"type": "string"}}, ["question"])}, clarify)
    reg.register("fail", "debug", {"description": "Always fails", "parameters": _obj({})},
                 fail)
    reg.register("delegate_task", "delegation", {"description": "Delegate", "parameters": _obj(
        {"goal": {"type": "string"}}, ["goal"])}, delegate,
        policy=ToolPolicy(agent_level=True))
    reg.set_agent_handler("delegate_task", delegate)
    return reg, tools


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def make_registry(
    tmp_path: Path, gate: Gate
) -> Iterator[Callable[..., tuple[ToolRegistry, Tools]]]:
    made: list[ToolRegistry] = []

    def make(config: Config | None = None) -> tuple[ToolRegistry, Tools]:
        reg, tools = build_registry(tmp_path, gate, config)
        made.append(reg)
        return reg, tools

    yield make
    for reg in made:
        reg.close()
