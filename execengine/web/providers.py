"""Search providers behind ``web_search``: a small interface, a fake, and three real ones.

A :class:`SearchProvider` turns ``(query, limit)`` into :class:`SearchResult` values.
Real providers speak HTTP through the same :class:`~execengine.web.fetch.Fetcher` as
``web_extract`` (same limits and guard; the endpoint the operator configured is trusted even
when it is a private address, as a self-hosted SearXNG usually is).

- SearXNG: ``GET {url}/search?q=...&format=json``; results in ``results[]`` (``title``,
  ``url``, ``content``). The instance must enable the JSON format.
- Brave: ``GET /res/v1/web/search?q=...&count=N`` with the key in ``X-Subscription-Token``;
  results in ``web.results[]`` (``title``, ``url``, ``description``).
- Tavily: ``POST /search`` with a JSON body ``{"api_key", "query", "max_results"}``;
  results in ``results[]`` (``title``, ``url``, ``content``).

API keys come from ``api_key_env`` (preferred) or ``api_key``; they are sent only to the
configured endpoint, dropped on a redirect to another origin, and masked in every message.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

from execengine.errors import ProviderError, WebError
from execengine.web.fetch import Fetcher, Response

if TYPE_CHECKING:
    from execengine.config import KeyedProviderConfig, WebConfig

MAX_RESULTS = 20
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    description: str

    def as_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "description": self.description}


class SearchProvider(Protocol):
    """What ``web_search`` needs from a back-end."""

    name: str

    def search(self, query: str, limit: int) -> list[SearchResult]:
        """At most ``limit`` results; raises :class:`ProviderError` when it cannot."""
        ...


@dataclass
class StaticProvider:
    """The fake: answers every query with the same results and records the queries."""

    results: list[SearchResult] = field(default_factory=list)
    name: str = "static"
    queries: list[tuple[str, int]] = field(default_factory=list)

    def search(self, query: str, limit: int) -> list[SearchResult]:
        self.queries.append((query, limit))
        return self.results[:limit]


class _HTTPProvider:
    name = "http"

    def __init__(self, url: str, fetcher: Fetcher, *, secret: str | None = None) -> None:
        self.url = url
        self.secret = secret
        host = urlsplit(url).hostname
        self.fetcher = fetcher.trusting([host]) if host else fetcher

    def _json(self, url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None,
              body: bytes | None = None, secret_headers: tuple[str, ...] = ()) -> Any:
        try:
            resp = self.fetcher.fetch(url, method=method, headers=headers, body=body,
                                      secret_headers=secret_headers)
        except WebError as exc:
            raise ProviderError(self.mask(f"{self.name} request failed: {exc}")) from None
        if not resp.ok:
            raise ProviderError(self.mask(self._status_message(resp)))
        if resp.truncated:
            raise ProviderError(f"{self.name} answer exceeds web.max_bytes "
                                f"({self.fetcher.max_bytes:,} bytes)")
        try:
            return resp.json()
        except ValueError:
            raise ProviderError(
                f"{self.name} did not answer JSON (HTTP {resp.status}, content type "
                f"{resp.content_type or 'none'})") from None

    def _status_message(self, resp: Response) -> str:
        snippet = " ".join(resp.text()[:300].split())
        return (f"{self.name} answered HTTP {resp.status} {resp.reason}"
                + (f": {snippet}" if snippet else ""))

    def mask(self, text: str) -> str:
        return mask(text, self.secret)


class SearxngProvider(_HTTPProvider):
    name = "searxng"

    def __init__(self, url: str, fetcher: Fetcher) -> None:
        base = url.rstrip("/")
        super().__init__(base if base.endswith("/search") else base + "/search", fetcher)

    def search(self, query: str, limit: int) -> list[SearchResult]:
        data = self._json(f"{self.url}?{urlencode({'q': query, 'format': 'json'})}")
        items = data.get("results") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise ProviderError("searxng answer has no 'results' list")
        return _collect(items, "content", limit)

    def _status_message(self, resp: Response) -> str:
        msg = super()._status_message(resp)
        if resp.status == 403:
            msg += (" (is the JSON format enabled? settings.yml: search.formats must "
                    "include json)")
        return msg


class BraveProvider(_HTTPProvider):
    name = "brave"

    def search(self, query: str, limit: int) -> list[SearchResult]:
        params = urlencode({"q": query, "count": min(limit, MAX_RESULTS)})
        data = self._json(
            f"{self.url}?{params}",
            headers={"X-Subscription-Token": self.secret or "",
                     "Accept": "application/json"},
            secret_headers=("X-Subscription-Token",),
        )
        web = data.get("web") if isinstance(data, dict) else None
        items = web.get("results", []) if isinstance(web, dict) else None
        if items is None and isinstance(data, dict) and "web" not in data:
            items = []  # Brave omits "web" when nothing matched
        if not isinstance(items, list):
            raise ProviderError("brave answer has no 'web.results' list")
        return _collect(items, "description", limit)


class TavilyProvider(_HTTPProvider):
    name = "tavily"

    def search(self, query: str, limit: int) -> list[SearchResult]:
        body = json.dumps({"api_key": self.secret, "query": query,
                           "max_results": min(limit, MAX_RESULTS)}).encode()
        data = self._json(self.url, method="POST", body=body,
                          headers={"Content-Type": "application/json",
                                   "Accept": "application/json"})
        items = data.get("results") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise ProviderError("tavily answer has no 'results' list")
        return _collect(items, "content", limit)


def _collect(items: list[Any], text_key: str, limit: int) -> list[SearchResult]:
    out: list[SearchResult] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        out.append(SearchResult(_plain(item.get("title")), item["url"],
                                _plain(item.get(text_key))))
        if len(out) >= limit:
            break
    return out


def _plain(value: Any) -> str:
    """Snippets may carry <strong> highlighting and entities; the model wants text."""
    if not isinstance(value, str):
        return ""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", value)).split())


def mask(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "***")
    return text


# -- configuration ---------------------------------------------------------------------


def api_key(cfg: KeyedProviderConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The key from ``api_key_env`` (preferred) or ``api_key``; None when neither is set."""
    env = os.environ if environ is None else environ
    if cfg.api_key_env and env.get(cfg.api_key_env):
        return env[cfg.api_key_env]
    return cfg.api_key or None


def provider_status(web: WebConfig, environ: Mapping[str, str] | None = None) -> bool | str:
    """True when ``web.provider`` is usable; otherwise a reason (the ``web_search`` check)."""
    if web.provider is None:
        return ("no search provider configured (set web.provider to searxng, brave or "
                "tavily in config.yaml)")
    if web.provider == "searxng":
        if not web.searxng.url:
            return "web.provider is searxng but web.searxng.url is not set"
        return True
    cfg: KeyedProviderConfig = getattr(web, web.provider)
    if api_key(cfg, environ):
        return True
    where = (f"environment variable {cfg.api_key_env} is empty or unset"
             if cfg.api_key_env else f"set web.{web.provider}.api_key_env")
    return f"web.provider is {web.provider} but it has no API key ({where})"


def make_provider(web: WebConfig, fetcher: Fetcher,
                  environ: Mapping[str, str] | None = None) -> SearchProvider:
    """The configured provider; :class:`ProviderError` when it is not usable."""
    status = provider_status(web, environ)
    if status is not True:
        raise ProviderError(str(status))
    if web.provider == "searxng":
        return SearxngProvider(web.searxng.url or "", fetcher)
    if web.provider == "brave":
        return BraveProvider(web.brave.url or BRAVE_URL, fetcher,
                             secret=api_key(web.brave, environ))
    return TavilyProvider(web.tavily.url or TAVILY_URL, fetcher,
                          secret=api_key(web.tavily, environ))
