"""The web toolset: ``web_search`` and ``web_extract``.

Results follow the shapes scripts written for ``hermes_tools`` expect:
``web_search`` → ``{"data": {"web": [{"title", "url", "description"}, ...]}}`` and
``web_extract`` → ``{"results": [{"url", "title", "content", "error"?}, ...]}``. Failures
are values: a whole call that cannot run answers ``{"error": ...}``; one URL that fails
gets an ``error`` in its own entry while the others succeed.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from execengine.config import Config
from execengine.confine.domains import DomainPolicy, guard_fetcher
from execengine.confine.policy import policy_of
from execengine.context import ToolContext
from execengine.discovery import ToolSpecs
from execengine.errors import WebError
from execengine.policy import ToolPolicy
from execengine.web.convert import convert
from execengine.web.fetch import Fetcher
from execengine.web.providers import (
    MAX_RESULTS,
    SearchProvider,
    api_key,
    make_provider,
    mask,
    provider_status,
)
from execengine.web.spill import SpillStore, head_tail

specs = ToolSpecs()
log = logging.getLogger(__name__)

#: URLs one web_extract call accepts, and pages fetched at once
MAX_URLS = 20
MAX_PARALLEL = 8
SPILL = "web.spill"

WEB_SEARCH_SCHEMA = {
    "description": "Search the web. Returns up to `limit` results, each with title, url and "
    "description. Use web_extract to read a page.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for"},
            "limit": {"type": "integer", "description": "Number of results (1-20)",
                      "default": 5, "minimum": 1, "maximum": MAX_RESULTS},
        },
        "required": ["query"],
    },
}

WEB_EXTRACT_SCHEMA = {
    "description": "Fetch web pages and return their readable content as markdown (HTML "
    "converted; text and JSON as is; PDFs and binary files reported, not extracted). Long "
    "pages keep their beginning and end, and the result names a file holding the full "
    "text. Internal and private network addresses are refused.",
    "parameters": {
        "type": "object",
        "properties": {
            "urls": {"type": "array", "items": {"type": "string"},
                     "description": f"http(s) URLs to fetch (at most {MAX_URLS})"},
            "char_limit": {"type": ["integer", "null"], "minimum": 100,
                           "description": "Characters of content kept per page "
                           "(default from web.char_limit)"},
        },
        "required": ["urls"],
    },
}


def search_available(config: Config) -> bool | str:
    return provider_status(config.web)


def _fetcher(ctx: ToolContext) -> Fetcher:
    given = ctx.call.fetcher
    fetcher = given if given is not None else Fetcher.from_config(ctx.config.web)
    policy = policy_of(ctx)
    if policy is not None and policy.network == "allowlist":
        # a script under a network allow-list: its web tools obey the same list
        fetcher = guard_fetcher(fetcher, DomainPolicy.of(policy.allowed_domains,
                                                         policy.denied_domains))
    return fetcher


def web_search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return {"error": "web_search needs a non-empty 'query' string"}
    limit = args.get("limit", 5)
    if limit is None:
        limit = 5
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        return {"error": f"'limit' must be a positive integer, got {limit!r}"}
    limit = min(limit, MAX_RESULTS)
    web = ctx.config.web
    secret = api_key(getattr(web, web.provider)) if web.provider in ("brave", "tavily") else None
    provider: SearchProvider
    try:
        given = ctx.call.search_provider
        provider = given if given is not None else make_provider(web, _fetcher(ctx))
        results = provider.search(query.strip(), limit)
    except WebError as exc:
        return {"error": mask(str(exc), secret)}
    items = [{k: mask(v, secret) for k, v in r.as_dict().items()} for r in results[:limit]]
    return {"data": {"web": items}}


def web_extract(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    urls = args.get("urls")
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not urls:
        return {"error": "web_extract needs 'urls': a non-empty list of http(s) URLs"}
    if len(urls) > MAX_URLS:
        return {"error": f"web_extract takes at most {MAX_URLS} URLs per call, got {len(urls)}; "
                "split them over several calls"}
    limit = args.get("char_limit")
    if limit is None:
        limit = ctx.config.web.char_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 100:
        return {"error": f"'char_limit' must be an integer >= 100, got {limit!r}"}
    fetcher = _fetcher(ctx)
    store = ctx.services.web_spill
    keys = [u if isinstance(u, str) else repr(u) for u in urls]
    unique = dict(zip(keys, urls, strict=True))  # each distinct URL is fetched once
    workers = max(1, min(MAX_PARALLEL, len(unique)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="web_extract") as pool:
        done = dict(zip(unique, pool.map(
            lambda u: extract_one(u, fetcher, store, limit), unique.values()), strict=True))
    return {"results": [dict(done[k]) for k in keys]}


def extract_one(url: Any, fetcher: Fetcher, store: SpillStore, limit: int) -> dict[str, Any]:
    """One page as a result entry; never raises for an expected failure."""
    entry: dict[str, Any] = {"url": url if isinstance(url, str) else repr(url),
                             "title": "", "content": ""}
    if not isinstance(url, str):
        entry["error"] = f"not a URL string: {url!r}"
        return entry
    try:
        resp = fetcher.fetch(url)
    except WebError as exc:
        entry["error"] = str(exc)
        return entry
    except Exception as exc:  # one odd page must not sink the others
        log.exception("web_extract of %s failed", url)
        entry["error"] = f"fetching failed: {type(exc).__name__}: {exc}"
        return entry
    if resp.url != entry["url"]:
        entry["final_url"] = resp.url
    entry["status"] = resp.status
    entry["content_type"] = resp.content_type
    doc = convert(resp.body, resp.headers.get("content-type", ""), resp.url)
    entry["title"] = doc.title
    notes = []
    if not resp.ok:
        notes.append(f"HTTP {resp.status} {resp.reason}".strip())
    if doc.error:
        notes.append(doc.error)
    if notes:
        entry["error"] = "; ".join(notes)
    content = doc.content
    if resp.truncated:
        entry["body_truncated"] = (f"the body was cut at web.max_bytes "
                                   f"({fetcher.max_bytes:,} bytes)")
    if len(content) > limit:
        path = store.save(content, resp.url)
        cut = head_tail(content, limit, path=path)
        content = cut.text
        entry["truncated"] = True
        entry["total_chars"] = cut.total
        entry["full_text_path"] = path
    entry["content"] = content
    return entry


#: web_search holds the provider's API key: in a distributed batch it is served on the driver
specs.register("web_search", "web", WEB_SEARCH_SCHEMA, web_search,
               check_fn=search_available, emoji="🔍",
               policy=ToolPolicy(script_callable=True, read_only=True, parallel_safe=True,
                                 driver_held=True))
specs.register("web_extract", "web", WEB_EXTRACT_SCHEMA, web_extract, emoji="🌐",
               policy=ToolPolicy(script_callable=True, read_only=True, parallel_safe=True))
