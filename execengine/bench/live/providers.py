"""Model endpoints for the live benchmark, with the usage each provider reports.

Two API shapes: OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp, Ollama,
OpenRouter, ...; through :class:`~execengine.agent.client.ChatCompletionsClient`) and
Anthropic's Messages API. Both take the transcript in OpenAI chat format and return a
:class:`Turn`: the text, the tool calls, the provider's usage, and how many times the request
was retried (rate limits, server errors).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from execengine.agent.client import ChatCompletionsClient
from execengine.errors import ModelError

ANTHROPIC_VERSION = "2023-06-01"
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class Usage:
    """Tokens as the provider reported them. ``prompt`` is every input token (cached and
    written included); ``completion`` includes ``reasoning``."""

    prompt: int = 0
    cached: int = 0
    cache_write: int = 0
    completion: int = 0
    reasoning: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt + other.prompt, self.cached + other.cached,
                     self.cache_write + other.cache_write, self.completion + other.completion,
                     self.reasoning + other.reasoning)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Turn:
    text: str
    calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    retries: int = 0


class Provider(Protocol):
    model: str

    def complete(self, system: str, messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]]) -> Turn: ...


def parse_target(target: str) -> tuple[str, str]:
    """``URL/NAME`` -> (base URL, model name). The name starts after ``/v1/`` when the URL
    has one (names may hold slashes: ``.../v1/openai/gpt-4o``), else after the last ``/``."""
    if not target.startswith(("http://", "https://")):
        raise ValueError(f"--model wants URL/NAME (e.g. https://api.openai.com/v1/gpt-4.1), "
                         f"got {target!r}")
    base, sep, name = target.partition("/v1/")
    if sep:
        base += "/v1"
    else:
        base, _, name = target.rstrip("/").rpartition("/")
    if not name or not urlsplit(base).netloc:
        raise ValueError(f"--model {target!r}: no model name after the endpoint URL")
    return base, name


class OpenAIChat:
    """Chat completions; counts retries; reads cached and reasoning tokens when reported."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout: float = 300.0, max_retries: int = 4, retry_backoff: float = 2.0,
                 ) -> None:
        self.model = model
        self._attempts = 0
        outer = self

        class Counting(ChatCompletionsClient):
            def _post(self, data: bytes) -> Any:
                outer._attempts += 1
                return super()._post(data)

        self._client = Counting(base_url, model, api_key=api_key, timeout=timeout,
                                max_retries=max_retries, retry_backoff=retry_backoff)

    def complete(self, system: str, messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]]) -> Turn:
        self._attempts = 0
        resp = self._client.complete([{"role": "system", "content": system}, *messages],
                                     list(tools) or None)
        msg = resp.message
        calls = tuple(ToolCall(str(c.get("id") or f"call_{i}"),
                               str(c.get("function", {}).get("name", "")),
                               str(c.get("function", {}).get("arguments") or "{}"))
                      for i, c in enumerate(msg.get("tool_calls") or ()))
        u = resp.usage or {}
        usage = Usage(prompt=int(u.get("prompt_tokens") or 0),
                      cached=int((u.get("prompt_tokens_details") or {}).get("cached_tokens")
                                 or 0),
                      completion=int(u.get("completion_tokens") or 0),
                      reasoning=int((u.get("completion_tokens_details") or {})
                                    .get("reasoning_tokens") or 0))
        return Turn(str(msg.get("content") or ""), calls, usage, self._attempts - 1)


class AnthropicMessages:
    """Anthropic's Messages API (``POST {base}/messages``), standard library only. A cache
    breakpoint goes on the last message, as agents place it."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout: float = 300.0, max_retries: int = 4, retry_backoff: float = 2.0,
                 max_tokens: int = 8192) -> None:
        self.model = model
        self.url = base_url.rstrip("/") + "/messages"
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_tokens = max_tokens
        self._headers = {"Content-Type": "application/json",
                         "anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            self._headers["x-api-key"] = api_key

    def complete(self, system: str, messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]]) -> Turn:
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                                "system": system, "messages": to_anthropic(messages)}
        if tools:
            body["tools"] = [{"name": t["function"]["name"],
                              "description": t["function"].get("description", ""),
                              "input_schema": t["function"].get("parameters") or
                              {"type": "object"}} for t in tools]
        data = json.dumps(body).encode()
        retries = 0
        while True:
            try:
                reply = self._post(data)
                break
            except ModelError as exc:
                if not exc.retryable or retries >= self.max_retries:
                    raise
                time.sleep(self.retry_backoff * (2 ** retries))
                retries += 1
        text = "".join(b.get("text", "") for b in reply.get("content", [])
                       if b.get("type") == "text")
        calls = tuple(ToolCall(str(b.get("id", "")), str(b.get("name", "")),
                               json.dumps(b.get("input") or {}))
                      for b in reply.get("content", []) if b.get("type") == "tool_use")
        u = reply.get("usage") or {}
        read, write = int(u.get("cache_read_input_tokens") or 0), int(
            u.get("cache_creation_input_tokens") or 0)
        usage = Usage(prompt=int(u.get("input_tokens") or 0) + read + write, cached=read,
                      cache_write=write, completion=int(u.get("output_tokens") or 0))
        return Turn(text, calls, usage, retries)

    def _post(self, data: bytes) -> Any:
        req = urllib.request.Request(self.url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                text = exc.read(65536).decode("utf-8", "replace")
            raise ModelError(f"model endpoint {self.url} answered HTTP {exc.code}: "
                             f"{text[:500]}", status=exc.code, body=text,
                             retryable=exc.code in RETRY_STATUSES) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ModelError(f"cannot reach model endpoint {self.url}: "
                             f"{getattr(exc, 'reason', exc)}", retryable=True) from exc
        except ValueError as exc:
            raise ModelError(f"model endpoint {self.url} sent invalid JSON") from exc


def to_anthropic(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as Anthropic content blocks (tool results in user turns)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""),
                     "content": str(m.get("content", ""))}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list) \
                    and out[-1]["content"] and out[-1]["content"][0].get("type") == "tool_result":
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": str(m["content"])})
            for c in m.get("tool_calls") or ():
                fn = c.get("function", {})
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                blocks.append({"type": "tool_use", "id": c.get("id", ""),
                               "name": fn.get("name", ""), "input": args})
            out.append({"role": "assistant", "content": blocks or [{"type": "text",
                                                                    "text": ""}]})
        else:
            out.append({"role": "user", "content": [{"type": "text",
                                                      "text": str(m.get("content", ""))}]})
    if out:
        last = out[-1]["content"][-1]
        last["cache_control"] = {"type": "ephemeral"}
    return out


def resolve_api(target: str, api: str = "auto") -> str:
    """``anthropic`` for api.anthropic.com (or when asked), else ``openai``."""
    if api != "auto":
        return api
    base, _ = parse_target(target)
    return "anthropic" if "anthropic.com" in urlsplit(base).netloc else "openai"


def make_provider(target: str, *, api: str = "auto", api_key: str | None = None,
                  retry_backoff: float = 2.0) -> Provider:
    base, name = parse_target(target)
    if resolve_api(target, api) == "anthropic":
        return AnthropicMessages(base, name, api_key=api_key, retry_backoff=retry_backoff)
    return OpenAIChat(base, name, api_key=api_key, retry_backoff=retry_backoff)
