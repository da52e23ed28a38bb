"""execengine as an MCP server: ``execute_code`` (and, configurable, the tools themselves).

Any MCP client (desktop assistants, IDE agents, the SDK's own client) can then run
sandboxed programmatic tool calls. Transports: stdio (:func:`serve_stdio`) and streamable
HTTP (:func:`serve_http`), bound to loopback unless told otherwise. Every HTTP request
must carry the server's bearer token (compared in constant time), loopback included: the
user's own (bound beyond loopback, required), or one made at start and written to a file
only the starting user can read (see :mod:`execengine.mcp.token`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execengine.errors import McpError
from execengine.mcp.fairness import ClientLimits, Clients
from execengine.mcp.token import default_token_path, new_token, remove_token, write_token
from execengine.registry import ToolRegistry

if TYPE_CHECKING:
    from execengine.engine.sessions import SessionManager

log = logging.getLogger(__name__)

SERVER_NAME = "execengine"


def offered_tools(registry: ToolRegistry, *, serve_tools: bool) -> list[dict[str, Any]]:
    """Function schemas served: execute_code, plus every other tool with ``serve_tools``."""
    out = []
    for definition in registry.get_tool_definitions():
        fn = definition["function"]
        if fn["name"] == "execute_code" or serve_tools:
            out.append(fn)
    return out


def build_server(registry: ToolRegistry, clients: Clients, *,
                 serve_tools: bool | None = None) -> Any:
    """The SDK's low-level server, answering tools/list and tools/call from ``registry``;
    calls run within ``clients``' limits (see :mod:`execengine.mcp.fairness`)."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    if serve_tools is None:
        serve_tools = registry.config.mcp.serve_tools

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=fn["name"], description=fn["description"],
                       input_schema=fn["parameters"])
            for fn in offered_tools(registry, serve_tools=serve_tools)])

    # one task id per client: execute_code keeps a session kernel (and approvals are
    # remembered) per task, so one shared id let every client of an HTTP server read
    # the variables another client's scripts left in that kernel. Over stdio the process
    # serves one client; over HTTP a client is its Mcp-Session-Id (random, checked by the
    # SDK's session manager), hashed so the id itself names nothing on the host; a
    # request without one keeps no state.
    stdio_task = "mcp-" + secrets.token_hex(8)

    def task_of(ctx: Any) -> str:
        request = getattr(ctx, "request", None)
        if request is None:
            return stdio_task
        sid = request.headers.get("mcp-session-id", "")
        if not sid:
            return "mcp-" + secrets.token_hex(8)
        return "mcp-" + hashlib.sha256(sid.encode()).hexdigest()[:16]

    def client_of(ctx: Any) -> str:
        request = getattr(ctx, "request", None)
        if request is None:
            return "stdio"
        return str(request.scope.get(CLIENT_KEY, "?"))

    async def call_tool(ctx: Any, params: Any) -> Any:
        names = {fn["name"] for fn in offered_tools(registry, serve_tools=serve_tools)}
        if params.name not in names:
            text = json.dumps({"error": f"unknown tool {params.name!r}; offered: "
                                        f"{', '.join(sorted(names))}"})
        else:
            task, name, arguments = task_of(ctx), params.name, params.arguments or {}
            text = await clients.run(
                client_of(ctx), name, task,
                lambda: registry.dispatch(name, arguments, task_id=task))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    is_error=_is_error(text))

    return Server(SERVER_NAME, version="0.1.0",
                  instructions="execute_code runs a Python script that calls tools "
                  "programmatically (from hermes_tools import ...) in a sandbox and "
                  "returns what it printed.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _is_error(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if not isinstance(value, dict):
        return False
    return "error" in value and value.get("status") in (None, "error")


def _clients(registry: ToolRegistry, limits: ClientLimits | None,
             sessions: Callable[[], SessionManager | None] | None) -> Clients:
    """``sessions``: the session kernels of the engine serving ``execute_code`` (a client's
    are closed with it; none: nothing to close)."""
    return Clients(limits or ClientLimits.from_config(registry.config),
                   sessions or (lambda: None))


async def serve_stdio(registry: ToolRegistry, *, serve_tools: bool | None = None,
                      limits: ClientLimits | None = None,
                      sessions: Callable[[], SessionManager | None] | None = None) -> None:
    from mcp.server.stdio import stdio_server

    clients = _clients(registry, limits, sessions)
    try:
        server = build_server(registry, clients, serve_tools=serve_tools)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        clients.close()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def rebinding_guard(host: str, token: str | dict[str, str] | None) -> Any:
    """The SDK's ``TransportSecuritySettings``: DNS-rebinding protection (``Host`` and
    ``Origin`` checked) for a server bound to ``host`` without a token: the only names a
    loopback server answers to are its own address and the loopback names. The SDK turns
    it on by itself only for the exact hosts ``127.0.0.1``, ``localhost`` and ``::1``, so
    a server on ``127.0.0.2`` (any of 127/8) ran code for a page on any rebound name. With
    a token (a browser page does not have it) the check is left off: remote clients use
    whatever name reaches the machine."""
    from mcp.server.transport_security import TransportSecuritySettings

    if token:
        return None
    own = f"[{host}]" if ":" in host else host
    names = list(dict.fromkeys([own, "127.0.0.1", "localhost", "[::1]"]))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names],
        allowed_origins=[f"http://{n}:*" for n in names])


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6; PORT 0 picks a free one)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise McpError(f"--http expects HOST:PORT, got {text!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


#: where :class:`BearerToken` puts the name of the client a request authenticated as
CLIENT_KEY = "execengine.client"


class BearerToken:
    """ASGI middleware: every request must carry ``Authorization: Bearer <token>`` of one
    of the clients (``tokens``: name -> token); the client's name goes in the request's
    scope (:data:`CLIENT_KEY`). Every token is compared, in constant time."""

    def __init__(self, app: Any, tokens: dict[str, str]) -> None:
        self.app = app
        self._expected = [(name, f"Bearer {token}".encode()) for name, token in
                          tokens.items()]

    def client(self, given: bytes) -> str | None:
        found = None
        for name, expected in self._expected:  # all of them: no early exit
            if hmac.compare_digest(given, expected):
                found = name
        return found

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            client = self.client(given)
            scope[CLIENT_KEY] = client
            if client is None:
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body",
                            "body": b'{"error": "missing or wrong bearer token"}'})
                return
        await self.app(scope, receive, send)


async def serve_http(registry: ToolRegistry, host: str, port: int, *,
                     token: str | dict[str, str] | None, serve_tools: bool | None = None,
                     token_file: str | None = None,
                     limits: ClientLimits | None = None,
                     sessions: Callable[[], SessionManager | None] | None = None) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled. ``token``: one
    client's token, or each client's (name -> token); without it one is made and written
    to ``token_file`` (default :func:`~execengine.mcp.token.default_token_path`), removed
    again at the end."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise McpError(f"refusing to serve on {host} without a token: anyone who reaches "
                       "it could run code; set one with --token-env VAR (or bind to "
                       "127.0.0.1)")
    clients = _clients(registry, limits, sessions)
    server = build_server(registry, clients, serve_tools=serve_tools)
    # the rebinding guard stays on at loopback whatever the token (a page in a browser
    # cannot have it, but the check is cheap and was there before the token)
    app: Any = server.streamable_http_app(
        host=host, transport_security=rebinding_guard(host, None if is_loopback(host)
                                                      else token))
    made = not token
    secret = new_token() if made else ""
    tokens = ({"owner": secret} if made else
              dict(token) if isinstance(token, dict) else {"client": str(token)})
    app = BearerToken(app, tokens)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # clients queue from now on, before uvicorn starts accepting
    except OSError as exc:
        sock.close()
        clients.close()
        raise McpError(f"cannot listen on {host}:{port}: {exc}") from exc
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    path = Path(token_file).expanduser() if token_file else default_token_path(host, bound)
    try:
        if made:
            write_token(path, secret)
            print(f"execengine mcp: clients must send 'Authorization: Bearer <token>'; the "
                  f"token is in {path} (readable by this user only)", file=sys.stderr,
                  flush=True)
        print(f"execengine mcp: serving streamable HTTP on http://{shown}:{bound}/mcp",
              file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        server_ = uvicorn.Server(config)
        if made:
            # uvicorn raises a SIGTERM/SIGINT again once it has shut down, which ends the
            # process before the finally below: the file goes at the signal already
            stop = server_.handle_exit

            def handle_exit(sig: int, frame: Any) -> None:
                remove_token(path, secret)
                stop(sig, frame)

            server_.handle_exit = handle_exit  # type: ignore[method-assign]
        await server_.serve(sockets=[sock])
    finally:
        sock.close()
        clients.close()
        if made:
            remove_token(path, secret)
