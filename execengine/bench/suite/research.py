"""Multi-step web research: search, extract pages (up to 20 URLs a call), filter, summarise.

Only the web tools are offered (a research agent without a shell), so each has one strategy;
the local web is on loopback, which a sandboxed shell could not reach anyway."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from execengine.bench.helpers import fact
from execengine.bench.workflow import Call, Plan, Workflow, call

if TYPE_CHECKING:
    from execengine.bench.fixtures import Fixtures, Project

FAMILY = "research"
TOPICS = ("database", "web framework", "message queue", "plotting")
LANGUAGES = ("Python", "Rust", "Go", "TypeScript")
TOOLSETS = ("web",)
#: web_extract takes up to 20 URLs a call
EXTRACT_MAX = 20
PERMISSIVE = ("MIT", "Apache-2.0", "BSD-3-Clause")

# The start of every script, written as a model would write it (shares no code with the plans).
SCRIPT_HEAD = '''import json, re
from hermes_tools import web_extract, web_search

def urls(query, limit):
    return [r["url"] for r in web_search(query, limit=limit)["data"]["web"]]

def pages(urls):
    out = []
    for i in range(0, len(urls), 20):
        out += [p for p in web_extract(urls[i:i + 20])["results"] if not p.get("error")]
    return out

def fact(page, label):
    return re.search(re.escape(label) + r": (\\S+)", page["content"]).group(1)

'''


def _urls(result: Any) -> list[str]:
    return [r["url"] for r in result.get("data", {}).get("web", [])]


def _pages(results: Sequence[Any]) -> list[dict[str, Any]]:
    return [p for res in results for p in res.get("results", []) if not p.get("error")]


def _extracts(urls: Sequence[str]) -> list[Call]:
    return [call("web_extract", urls=list(urls[i:i + EXTRACT_MAX]))
            for i in range(0, len(urls), EXTRACT_MAX)]


def _search_and_extract(queries: Sequence[str], limit: int) -> Plan:
    """Every search in one batch, then every page in one batch of extracts."""
    found = yield [call("web_search", query=q, limit=limit) for q in queries]
    urls = [u for f in found for u in _urls(f)]
    results = yield _extracts(urls)
    return _pages(results)


# -- expected answers, from the generated records ------------------------------------------

def _hits(fx: Fixtures, query: str, limit: int) -> list[Project]:
    """The fixtures' search rule: every query word in title, topic or language; by stars."""
    words = query.lower().split()
    found = [p for p in fx.truth.projects
             if all(w in f"{p.title} {p.topic} {p.language}".lower() for w in words)]
    return sorted(found, key=lambda p: -p.stars)[:limit]


def _version(v: str) -> list[int]:
    return [int(x) for x in v.split(".")]


def license_check(topic: str, limit: int) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        pages = yield from _search_and_extract([topic], limit)
        return {p["title"]: fact(p["content"], "License") for p in pages}

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + f"""print(json.dumps({{p["title"]: fact(p, "License")
                  for p in pages(urls({topic!r}, {limit}))}}))
"""
    return Workflow(f"license-check-{topic.replace(' ', '-')}-{limit}", FAMILY,
                    f"Search for '{topic}' projects and report the license of the top {limit}.",
                    plan, script, toolsets=TOOLSETS, cluster="license-check",
                    truth=lambda fx: {p.title: p.license for p in _hits(fx, topic, limit)},
                    answer_format='{"<project title>": "<license>"}')


def release_versions(topic: str) -> Workflow:
    def plan(fx: Fixtures) -> Plan:
        pages = yield from _search_and_extract([topic], 10)
        rows = [[p["title"], fact(p["content"], "Latest release")] for p in pages]
        rows.sort(key=lambda r: r[0])
        return sorted(rows, key=lambda r: [int(x) for x in r[1].split(".")], reverse=True)

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + f"""rows = sorted([p["title"], fact(p, "Latest release")]
              for p in pages(urls({topic!r}, 10)))
rows.sort(key=lambda r: tuple(map(int, r[1].split("."))), reverse=True)
print(json.dumps(rows))
"""

    def truth(fx: Fixtures) -> list[list[str]]:
        rows = sorted([p.title, p.version] for p in _hits(fx, topic, 10))
        return sorted(rows, key=lambda r: _version(r[1]), reverse=True)

    return Workflow(f"release-versions-{topic.replace(' ', '-')}", FAMILY,
                    f"Latest release of every '{topic}' project, newest first.",
                    plan, script, toolsets=TOOLSETS, truth=truth,
                    answer_format='[["<project title>", "<version>"], ...] newest first, '
                                  'equal versions by title')


def topic_survey() -> Workflow:
    """Every topic searched at once, every page extracted at once; best score per topic."""
    def plan(fx: Fixtures) -> Plan:
        pages = yield from _search_and_extract(TOPICS, 10)
        out = {}
        for topic in TOPICS:
            mine = [p for p in pages if p["title"].endswith(topic)]
            best = min(mine, key=lambda p: (-float(fact(p["content"], "Benchmark score")),
                                            p["title"]))
            out[topic] = [best["title"], float(fact(best["content"], "Benchmark score"))]
        return out

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + f"""topics = {list(TOPICS)!r}
found = pages([u for t in topics for u in urls(t, 10)])
out = {{}}
for t in topics:
    mine = [(-float(fact(p, "Benchmark score")), p["title"]) for p in found
            if p["title"].endswith(t)]
    score, title = min(mine)
    out[t] = [title, -score]
print(json.dumps(out))
"""

    def truth(fx: Fixtures) -> dict[str, Any]:
        out = {}
        for topic in TOPICS:
            best = min(_hits(fx, topic, 10), key=lambda p: (-p.score, p.title))
            out[topic] = [best.title, best.score]
        return out

    return Workflow("topic-survey", FAMILY,
                    "For each topic (database, web framework, message queue, plotting), find "
                    "the project with the best benchmark score.", plan, script,
                    toolsets=TOOLSETS, truth=truth,
                    answer_format='{"<topic>": ["<project title>", <score>]}')


def language_stars() -> Workflow:
    """Per language: total stars and the top project, from one search each."""
    def plan(fx: Fixtures) -> Plan:
        pages = yield from _search_and_extract(LANGUAGES, 10)
        out = {}
        for lang in LANGUAGES:
            stars = {p["title"]: int(fact(p["content"], "Stars")) for p in pages
                     if fact(p["content"], "Language") == lang}
            top = max(sorted(stars), key=lambda t: stars[t]) if stars else ""
            out[lang] = {"total": sum(stars.values()), "top": top}
        return out

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + f"""langs = {list(LANGUAGES)!r}
found = pages([u for lang in langs for u in urls(lang, 10)])
out = {{}}
for lang in langs:
    stars = {{p["title"]: int(fact(p, "Stars")) for p in found if fact(p, "Language") == lang}}
    top = max(sorted(stars), key=stars.get) if stars else ""
    out[lang] = {{"total": sum(stars.values()), "top": top}}
print(json.dumps(out))
"""

    def truth(fx: Fixtures) -> dict[str, Any]:
        out = {}
        for lang in LANGUAGES:
            hits = [p for p in _hits(fx, lang, 10) if p.language == lang]
            top = max(sorted(hits, key=lambda p: p.title), key=lambda p: p.stars) if hits \
                else None
            out[lang] = {"total": sum(p.stars for p in hits), "top": top.title if top else ""}
        return out

    return Workflow("language-stars", FAMILY,
                    "Total GitHub stars per language (Python, Rust, Go, TypeScript; the top 10 "
                    "search results each) and the most-starred project of each.",
                    plan, script, toolsets=TOOLSETS, truth=truth,
                    answer_format='{"<language>": {"total": <stars>, "top": "<project title>"}}')


def deep_research() -> Workflow:
    """Every project: its page, a search for its exact title (is it the top hit?) and a
    search for rivals (same language and topic); the permissively licensed ones."""
    def plan(fx: Fixtures) -> Plan:
        found = yield [call("web_search", query=t, limit=10) for t in TOPICS]
        urls = [u for f in found for u in _urls(f)]
        pages = _pages((yield _extracts(urls)))
        rival_queries = sorted({f"{fact(p['content'], 'Language')} "
                                f"{next(t for t in TOPICS if p['title'].endswith(t))}"
                                for p in pages})
        checks = yield ([call("web_search", query=p["title"], limit=3) for p in pages]
                        + [call("web_search", query=q, limit=10) for q in rival_queries])
        same, rivals = checks[:len(pages)], dict(zip(rival_queries, checks[len(pages):],
                                                     strict=True))
        out = {}
        for p, hit in zip(pages, same, strict=True):
            lang = fact(p["content"], "Language")
            topic = next(t for t in TOPICS if p["title"].endswith(t))
            out[p["title"]] = {
                "license": fact(p["content"], "License"),
                "maintainer": fact(p["content"], "Maintainer"),
                "top_hit": (_urls(hit) or [""])[0] == p["url"],
                "rivals": len(_urls(rivals[f"{lang} {topic}"])) - 1,
            }
        return {t: v for t, v in sorted(out.items()) if v["license"] in PERMISSIVE}

    def script(fx: Fixtures) -> str:
        return SCRIPT_HEAD + f"""topics = {list(TOPICS)!r}
found = pages([u for t in topics for u in urls(t, 10)])
topic_of = {{p["title"]: next(t for t in topics if p["title"].endswith(t)) for p in found}}
rivals = {{}}
for q in sorted({{fact(p, "Language") + " " + topic_of[p["title"]] for p in found}}):
    rivals[q] = len(urls(q, 10)) - 1
out = {{}}
for p in found:
    top = urls(p["title"], 3)
    lic = fact(p, "License")
    if lic in {list(PERMISSIVE)!r}:
        out[p["title"]] = {{"license": lic, "maintainer": fact(p, "Maintainer"),
                           "top_hit": bool(top) and top[0] == p["url"],
                           "rivals": rivals[fact(p, "Language") + " " + topic_of[p["title"]]]}}
print(json.dumps(out))
"""

    def truth(fx: Fixtures) -> dict[str, Any]:
        out = {}
        for topic in TOPICS:
            for p in _hits(fx, topic, 10):
                if p.license not in PERMISSIVE:
                    continue
                same = _hits(fx, p.title, 3)
                out[p.title] = {"license": p.license, "maintainer": p.maintainer,
                                "top_hit": bool(same) and same[0].slug == p.slug,
                                "rivals": len(_hits(fx, f"{p.language} {topic}", 10)) - 1}
        return out

    return Workflow("deep-research", FAMILY,
                    "For every project in the four topics: license, maintainer, whether a "
                    "search for its name finds it first, and how many rivals share its "
                    "language and topic; keep the permissively licensed ones.",
                    plan, script, toolsets=TOOLSETS, truth=truth,
                    answer_format='{"<project title>": {"license": "<license>", "maintainer": '
                                  '"<team>", "top_hit": <bool>, "rivals": <count>}} for MIT, '
                                  'Apache-2.0 and BSD-3-Clause projects only')


WORKFLOWS = [
    license_check("database", 4),
    release_versions("web framework"),
    license_check("plotting", 6),
    language_stars(),
    topic_survey(),
    deep_research(),
]
