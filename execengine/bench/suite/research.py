"""Multi-step web research: search, extract several pages, filter, summarise."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import fact, prelude
from execengine.bench.workflow import Plan, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures

FAMILY = "research"
TOPICS = ("database", "web framework", "message queue", "plotting")
LANGUAGES = ("Python", "Rust", "Go", "TypeScript")
TOOLSETS = ("web",)
PRELUDE = prelude("web_extract", "web_search")


def _urls(result: Any) -> list[str]:
    return [r["url"] for r in result.get("data", {}).get("web", [])]


def _pages(result: Any) -> list[dict[str, Any]]:
    return [p for p in result.get("results", []) if not p.get("error")]


def _search_then_extract_each(query: str, limit: int) -> Plan:
    (found,) = yield [call("web_search", query=query, limit=limit)]
    pages = []
    for url in _urls(found):
        (res,) = yield [call("web_extract", urls=[url])]
        pages += _pages(res)
    return pages


_SCRIPT_HELPERS = """
def urls(found):
    return [r["url"] for r in found.get("data", {}).get("web", [])]

def pages(res):
    return [p for p in res.get("results", []) if not p.get("error")]
"""


def license_check(topic: str, limit: int) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        pages = yield from _search_then_extract_each(topic, limit)
        return {p["title"]: fact(p["content"], "License") for p in pages}

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
out = {{}}
for url in urls(web_search({topic!r}, limit={limit})):
    for p in pages(web_extract([url])):
        out[p["title"]] = fact(p["content"], "License")
print(json.dumps(out))
"""
    return Workflow(f"license-check-{topic.replace(' ', '-')}-{limit}", FAMILY,
                    f"Search for '{topic}' projects and report the license of the top {limit}.",
                    plan, script, toolsets=TOOLSETS)


def release_versions(topic: str) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        pages = yield from _search_then_extract_each(topic, 10)
        rows = [[p["title"], fact(p["content"], "Latest release")] for p in pages]
        return sorted(rows, key=lambda r: [int(x) for x in r[1].split(".")], reverse=True)

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
rows = []
for url in urls(web_search({topic!r}, limit=10)):
    for p in pages(web_extract([url])):
        rows.append([p["title"], fact(p["content"], "Latest release")])
rows.sort(key=lambda r: [int(x) for x in r[1].split(".")], reverse=True)
print(json.dumps(rows))
"""
    return Workflow(f"release-versions-{topic.replace(' ', '-')}", FAMILY,
                    f"Latest release of every '{topic}' project, newest first.",
                    plan, script, toolsets=TOOLSETS)


def topic_survey() -> Workflow:
    """Per topic: search, then extract every result in one parallel batch; best score wins."""
    def plan(fx: Fixtures) -> Plan:
        out = {}
        for topic in TOPICS:
            (found,) = yield [call("web_search", query=topic, limit=10)]
            results = yield [call("web_extract", urls=[u]) for u in _urls(found)]
            pages = [p for r in results for p in _pages(r)]
            best = max(pages, key=lambda p: float(fact(p["content"], "Benchmark score")))
            out[topic] = [best["title"], float(fact(best["content"], "Benchmark score"))]
        return out

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
out = {{}}
for topic in {list(TOPICS)!r}:
    found = []
    for url in urls(web_search(topic, limit=10)):
        found += pages(web_extract([url]))
    best = max(found, key=lambda p: float(fact(p["content"], "Benchmark score")))
    out[topic] = [best["title"], float(fact(best["content"], "Benchmark score"))]
print(json.dumps(out))
"""
    return Workflow("topic-survey", FAMILY,
                    "For each topic (database, web framework, message queue, plotting), find "
                    "the project with the best benchmark score.", plan, script, toolsets=TOOLSETS)


def language_stars() -> Workflow:
    """Per language: search, then one multi-URL extract; total stars and the top project."""
    def plan(fx: Fixtures) -> Plan:
        out = {}
        for lang in LANGUAGES:
            (found,) = yield [call("web_search", query=lang, limit=10)]
            (res,) = yield [call("web_extract", urls=_urls(found))]
            stars = {p["title"]: int(fact(p["content"], "Stars")) for p in _pages(res)}
            top = max(stars, key=lambda t: stars[t]) if stars else ""
            out[lang] = {"total": sum(stars.values()), "top": top}
        return out

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
out = {{}}
for lang in {list(LANGUAGES)!r}:
    res = web_extract(urls(web_search(lang, limit=10)))
    stars = {{p["title"]: int(fact(p["content"], "Stars")) for p in pages(res)}}
    top = max(stars, key=lambda t: stars[t]) if stars else ""
    out[lang] = {{"total": sum(stars.values()), "top": top}}
print(json.dumps(out))
"""
    return Workflow("language-stars", FAMILY,
                    "Total GitHub stars per language and the most-starred project of each.",
                    plan, script, toolsets=TOOLSETS)


def deep_research() -> Workflow:
    """Every project: its page, a search for its exact title (is it the top hit?) and a
    search for competitors (same language and topic); report the maintained-by table for
    permissive licenses and each project's competitor count."""
    def plan(fx: Fixtures) -> Plan:
        urls: list[str] = []
        for topic in TOPICS:
            (found,) = yield [call("web_search", query=topic, limit=10)]
            urls += _urls(found)
        out = {}
        for url in urls:
            (res,) = yield [call("web_extract", urls=[url])]
            for p in _pages(res):
                (same,) = yield [call("web_search", query=p["title"], limit=3)]
                lang = fact(p["content"], "Language")
                topic = next(t for t in TOPICS if t in p["title"])
                (rivals,) = yield [call("web_search", query=f"{lang} {topic}", limit=10)]
                out[p["title"]] = {
                    "license": fact(p["content"], "License"),
                    "maintainer": fact(p["content"], "Maintainer"),
                    "top_hit": (_urls(same) or [""])[0] == url,
                    "rivals": len(_urls(rivals)) - 1,
                }
        return {t: v for t, v in sorted(out.items())
                if v["license"] in ("MIT", "Apache-2.0", "BSD-3-Clause")}

    def script(fx: Fixtures) -> str:
        return PRELUDE + _SCRIPT_HELPERS + f"""
TOPICS = {list(TOPICS)!r}
out = {{}}
for url in [u for t in TOPICS for u in urls(web_search(t, limit=10))]:
    for p in pages(web_extract([url])):
        same = urls(web_search(p["title"], limit=3))
        lang = fact(p["content"], "Language")
        topic = next(t for t in TOPICS if t in p["title"])
        rivals = urls(web_search(lang + " " + topic, limit=10))
        out[p["title"]] = {{"license": fact(p["content"], "License"),
                           "maintainer": fact(p["content"], "Maintainer"),
                           "top_hit": (same or [""])[0] == url, "rivals": len(rivals) - 1}}
print(json.dumps({{t: v for t, v in sorted(out.items())
                  if v["license"] in ("MIT", "Apache-2.0", "BSD-3-Clause")}}))
"""
    return Workflow("deep-research", FAMILY,
                    "For every project in the four topics: license, maintainer, whether a "
                    "search for its name finds it first, and how many rivals share its "
                    "language and topic; keep the permissively licensed ones.",
                    plan, script, toolsets=TOOLSETS)


WORKFLOWS = [
    license_check("database", 4),
    release_versions("web framework"),
    license_check("plotting", 6),
    language_stars(),
    topic_survey(),
    deep_research(),
]
