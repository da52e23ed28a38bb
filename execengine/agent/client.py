"""The model seam: a chat-completions interface, the real HTTP client, and a scripted fake.

:class:`ChatModel` is all the agent loop needs: ``complete(messages, tools) ->
ChatResponse``. :class:`ChatCompletionsClient` speaks the OpenAI-compatible protocol
(``POST {base_url}/chat/completions``) with the standard library's ``urllib``: no SDK, any
compatible server (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, OpenRouter). Rate limits
and server errors (429, 5xx) are retried a few times with backoff; other HTTP errors raise
:class:`ModelError` carrying the status and the provider's message. :class:`ScriptedModel`
replays prepared responses (tests, demos).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from execengine.config import Config
from execengine.errors import ConfigError, ModelError

MAX_RESPONSE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ChatResponse:
    """One choice of a chat completion."""

    message: Mapping[str, Any]
    finish_reason: str | None = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""


class ChatModel(Protocol):
    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
    ) -> ChatResponse: ...


def parse_completion(data: Any) -> ChatResponse:
    """The first choice of a decoded chat-completions response body."""
    if not isinstance(data, Mapping):
        raise ModelError(f"model response is not a JSON object: {str(data)[:200]!r}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        if isinstance(data.get("error"), (Mapping, str)):
            raise ModelError(f"model returned an error: {_error_text(data)}")
        raise ModelError("model response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise ModelError("model response choice has no message")
    usage = data.get("usage")
    return ChatResponse(
        message=dict(message),
        finish_reason=choice.get("finish_reason"),
        usage=dict(usage) if isinstance(usage, Mapping) else {},
        model=str(data.get("model") or ""),
    )


def _error_text(data: Any) -> str:
    if isinstance(data, Mapping):
        err = data.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if data.get("message"):
            return str(data["message"])
    return str(data)[:500]


class ChatCompletionsClient:
    """A minimal OpenAI-compatible chat-completions client (standard library only)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        retry_backoff: float = 1.0,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not base_url:
            raise ConfigError("no model endpoint: set agent.base_url or $OPENAI_BASE_URL",
                              key="agent.base_url")
        if not model:
            raise ConfigError("no model: set agent.model or $EXECENGINE_MODEL",
                              key="agent.model")
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.extra_body = dict(extra_body or {})
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "User-Agent": "execengine-agent/0.1", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    @classmethod
    def from_config(
        cls, config: Config, *, base_url: str | None = None, model: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ChatCompletionsClient:
        """Endpoint, model and key from arguments, then the config, then the environment."""
        env = os.environ if environ is None else environ
        agent = config.agent
        return cls(
            base_url or agent.base_url or env.get("OPENAI_BASE_URL", ""),
            model or agent.model or env.get("EXECENGINE_MODEL", ""),
            api_key=env.get(agent.api_key_env) or None,
            timeout=agent.request_timeout,
        )

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
    ) -> ChatResponse:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages),
                                **self.extra_body}
        if tools:
            body["tools"] = list(tools)
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            try:
                return parse_completion(self._post(data))
            except ModelError as exc:
                if not exc.retryable or attempt >= self.max_retries:
                    raise
                time.sleep(self.retry_backoff * (2 ** attempt))
                attempt += 1

    def _post(self, data: bytes) -> Any:
        req = urllib.request.Request(self.url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            with exc:
                text = exc.read(65536).decode("utf-8", "replace")
            try:
                detail = _error_text(json.loads(text))
            except ValueError:
                detail = text.strip()[:500] or exc.reason
            raise ModelError(f"model endpoint {self.url} answered HTTP {exc.code}: {detail}",
                             status=exc.code, body=text) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise ModelError(f"model endpoint {self.url} did not answer within "
                                 f"{self.timeout:g}s") from exc
            raise ModelError(f"cannot reach model endpoint {self.url}: {reason}",
                             retryable=True) from exc
        if len(raw) > MAX_RESPONSE_BYTES:
            raise ModelError(f"model response larger than {MAX_RESPONSE_BYTES} bytes")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ModelError(f"model endpoint {self.url} sent invalid JSON: "
                             f"{raw[:200]!r}") from exc


class ScriptedModel:
    """A fake :class:`ChatModel` replaying prepared responses; records what it was sent.

    Each response is a :class:`ChatResponse` or an assistant message dict (finish reason
    ``tool_calls`` when it has calls, else ``stop``).
    """

    def __init__(self, responses: Iterable[ChatResponse | Mapping[str, Any]]) -> None:
        self._responses = list(responses)
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
    ) -> ChatResponse:
        with self._lock:
            self.requests.append({"messages": json.loads(json.dumps(list(messages))),
                                  "tools": list(tools or [])})
            if not self._responses:
                raise ModelError("scripted model has no responses left")
            item = self._responses.pop(0)
        if isinstance(item, ChatResponse):
            return item
        reason = "tool_calls" if item.get("tool_calls") else "stop"
        return ChatResponse(dict(item), reason)
