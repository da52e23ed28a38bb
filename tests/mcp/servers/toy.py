"""A scripted MCP server (stdio) for the client tests, built on the official SDK.

Tools: ``echo`` (text), ``add`` (structured output), ``picture`` (an image and a resource),
``fail`` (isError), ``crash`` (the process exits mid-call), ``hang`` (never answers),
``slow`` (answers after a delay), ``env`` (reads one environment variable), ``stray``
(starts a detached sleeper), ``grow`` (adds a tool and announces tools/list_changed).
``--tools N`` instead serves N generated tools.
``--never-start`` reads stdin but never answers the handshake.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import EmbeddedResource, ImageContent, TextResourceContents
from pydantic import BaseModel


class Sum(BaseModel):
    total: int
    terms: list[int]


def toy() -> MCPServer:
    server = MCPServer("toy")

    @server.tool(description="Return the text unchanged.")
    def echo(text: str, times: int = 1) -> str:
        return text * times

    @server.tool(description="Add integers.")
    def add(a: int, b: int) -> Sum:
        return Sum(total=a + b, terms=[a, b])

    @server.tool(description="A picture and a resource.")
    def picture() -> list[ImageContent | EmbeddedResource]:
        return [
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
            EmbeddedResource(type="resource", resource=TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="some notes")),
        ]

    @server.tool(description="Always fails.")
    def fail(reason: str) -> str:
        raise ValueError(f"failed on purpose: {reason}")

    @server.tool(description="Exit the server process in the middle of the call.")
    def crash() -> str:
        sys.stderr.write("toy: crashing now\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(description="Never answer.")
    async def hang() -> str:
        await asyncio.sleep(3600)
        return "late"

    @server.tool(description="Answer after a delay.")
    async def slow(seconds: float, tag: str) -> str:
        await asyncio.sleep(seconds)
        return tag

    @server.tool(description="Start a detached process (its own session) that sleeps.")
    def stray(marker: str) -> int:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker],
                                start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid

    @server.tool(description="Read an environment variable.")
    def env(name: str) -> str:
        return os.environ.get(name, "<unset>")

    @server.tool(description="Add a tool named grown and announce the change.")
    async def grow(ctx: Context) -> str:
        def grown() -> str:
            return "grown here"

        server.add_tool(grown, name="grown", description="Added at run time.")
        await ctx.session.send_tool_list_changed()
        return "ok"

    sys.stderr.write(f"toy: started pid {os.getpid()}\n")
    sys.stderr.flush()
    return server


def generated(count: int) -> MCPServer:
    server = MCPServer("generated")
    verbs = ("get", "list", "create", "update", "delete", "search", "sync", "archive")
    nouns = ("invoice", "customer", "ticket", "repo", "issue", "order", "report", "user",
             "project", "file", "event", "payment", "contract", "asset", "alert", "build")
    for i in range(count):
        verb, noun = verbs[i % len(verbs)], nouns[(i // len(verbs)) % len(nouns)]
        name = f"{verb}_{noun}_{i}"

        def make(n: str):
            def fn(id: str, limit: int = 10, include_archived: bool = False) -> str:
                return f"{n}:{id}:{limit}:{include_archived}"
            return fn

        server.add_tool(make(name), name=name, description=(
            f"{verb.capitalize()} the {noun} records of the tenant (number {i}); returns a "
            "JSON document with the matching rows, paging cursors and audit metadata."))
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--never-start", action="store_true")
    args = parser.parse_args()
    if args.never_start:
        sys.stderr.write("toy: pretending to start\n")
        sys.stderr.flush()
        time.sleep(3600)
        return
    server = generated(args.tools) if args.tools else toy()
    server.run("stdio")


if __name__ == "__main__":
    main()
