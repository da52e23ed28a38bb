"""Generated fixtures the workflows run on, deterministic for a given seed.

- ``proj/``: a Python package ``shop`` whose modules call a deprecated helper
  (``legacy_round``) and an old config loader (``fetch_config``) — call sites to refactor —
  and a ``unittest`` suite of which a known set of tests fails, each for its own reason.
- ``configs/``: one folder per service with ``config.yaml``, ``config.json`` or
  ``config.ini`` holding settings (port, region, replicas, log level, timeout, owner) and
  nothing else, and a ``README.md`` of two sentences.
- a local web on 127.0.0.1: pages about fictional software projects (license, language,
  release, stars, maintainer, a benchmark score) with a navigation bar, two distinct
  paragraphs of prose and a footer, and a SearXNG-format search endpoint
  ``/search?q=...&format=json``.

The generated records (``Fixtures.truth``) are kept while generating: every workflow computes
its expected answer from them, never by parsing what the tools return.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REGIONS = ("eu-west", "us-east", "ap-south")
LOG_LEVELS = ("debug", "info", "warning", "error")
TEAMS = ("payments", "search", "platform", "growth")
LICENSES = ("MIT", "Apache-2.0", "BSD-3-Clause", "GPL-3.0", "MPL-2.0")
LANGUAGES = ("Python", "Rust", "Go", "TypeScript")
WORDS = ("stream", "graph", "cache", "query", "vector", "packet", "ledger", "schema", "relay",
         "forge", "pixel", "quartz", "tensor", "harbor", "signal", "beacon", "cipher", "delta")
PROSE = (
    "The project grew out of an internal tool and is now maintained by a small group of "
    "volunteers. Contributions are welcome; please read the contributing guide before opening "
    "a pull request, and run the full test suite locally first. ",
    "Releases follow semantic versioning. Deprecations are announced one minor release ahead "
    "and removed in the next major release, with migration notes in the changelog. ",
    "Documentation covers installation, configuration, a tutorial, the API reference and a "
    "frequently asked questions page. Community support happens on the discussion forum. ",
    "Performance depends on the workload; the benchmark below was measured on a four-core "
    "machine with default settings, warm caches and no other load on the system. ",
)


@dataclass(frozen=True)
class Service:
    name: str
    fmt: str
    port: int
    region: str
    replicas: int
    log_level: str
    timeout: int
    owner: str


@dataclass(frozen=True)
class Project:
    slug: str
    title: str
    license: str
    language: str
    version: str
    stars: int
    maintainer: str
    score: float
    topic: str


@dataclass
class Truth:
    services: list[Service] = field(default_factory=list)
    projects: list[Project] = field(default_factory=list)
    #: module path (relative to proj/) -> number of legacy_round( call sites
    legacy_calls: dict[str, int] = field(default_factory=dict)
    fetch_calls: dict[str, int] = field(default_factory=dict)
    #: failing test module (``tests.test_x``) -> the source file it exercises
    failing_tests: dict[str, str] = field(default_factory=dict)
    #: module name (``cache_03``) -> names of the functions it defines, in order
    functions: dict[str, list[str]] = field(default_factory=dict)
    #: service name -> words in its README.md
    readme_words: dict[str, int] = field(default_factory=dict)


class Fixtures:
    """All fixtures in a fresh temporary directory, with the web server running.

    A context manager; :meth:`close` stops the server and removes the directory (idempotent).
    """

    def __init__(self, *, seed: int = 7, services: int = 40, projects: int = 24,
                 modules: int = 16) -> None:
        self._rng = random.Random(seed)
        self.truth = Truth()
        self.root = Path(tempfile.mkdtemp(prefix="execengine-bench-"))
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        try:
            self._make_configs(services)
            self._make_project(modules)
            self._make_web(projects)
        except BaseException:
            self.close()
            raise

    # -- layout ------------------------------------------------------------------------

    @property
    def proj(self) -> Path:
        return self.root / "proj"

    @property
    def configs(self) -> Path:
        return self.root / "configs"

    @property
    def base_url(self) -> str:
        assert self._server is not None, "fixtures are closed"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def task_vars(self) -> dict[str, str]:
        """Names a task may mention: ``{first_config}``, ``{first_three_configs}``,
        ``{first_project}``."""
        first = [f"configs/{s.name}/config.{s.fmt}"
                 for s in sorted(self.truth.services, key=lambda s: s.name)[:3]]
        return {"first_config": first[0] if first else "",
                "first_three_configs": ", ".join(first),
                "first_project": self.truth.projects[0].title if self.truth.projects else ""}

    def reset_project(self) -> None:
        """Restore ``proj/`` to its generated state (refactoring workflows change it)."""
        shutil.rmtree(self.proj / "shop")
        shutil.copytree(self.root / ".pristine" / "shop", self.proj / "shop")

    # -- configs -------------------------------------------------------------------------

    def _make_configs(self, count: int) -> None:
        rng = self._rng
        for i in range(count):
            svc = Service(
                name=f"svc-{rng.choice(WORDS)}-{i:02d}", fmt=("yaml", "json", "ini")[i % 3],
                port=8000 + rng.randrange(0, 900), region=rng.choice(REGIONS),
                replicas=rng.randint(1, 9), log_level=rng.choice(LOG_LEVELS),
                timeout=rng.choice((5, 10, 15, 30, 60)), owner=rng.choice(TEAMS),
            )
            self.truth.services.append(svc)
            folder = self.configs / svc.name
            folder.mkdir(parents=True)
            notes = " ".join(rng.sample(PROSE, 2)).strip()
            readme = f"# {svc.name}\n\n{notes}\n"
            (folder / "README.md").write_text(readme)
            self.truth.readme_words[svc.name] = len(readme.split())
            (folder / f"config.{svc.fmt}").write_text(_render_config(svc))

    # -- source tree ---------------------------------------------------------------------

    def _make_project(self, modules: int) -> None:
        rng = self._rng
        pkg = self.proj / "shop"
        tests = self.proj / "tests"
        pkg.mkdir(parents=True)
        tests.mkdir()
        (pkg / "__init__.py").write_text('"""A small shop."""\n')
        (pkg / "money.py").write_text(_MONEY)
        (tests / "__init__.py").write_text("")
        for i in range(modules):
            name = f"{rng.choice(WORDS)}_{i:02d}"
            legacy = rng.randint(0, 4)
            fetch = rng.randint(0, 2)
            buggy = i % 4 == 1
            source, functions = _module_source(name, legacy, fetch, buggy, rng)
            (pkg / f"{name}.py").write_text(source)
            self.truth.functions[name] = functions
            if legacy:
                self.truth.legacy_calls[f"shop/{name}.py"] = legacy
            if fetch:
                self.truth.fetch_calls[f"shop/{name}.py"] = fetch
            (tests / f"test_{name}.py").write_text(_test_source(name))
            if buggy:
                self.truth.failing_tests[f"tests.test_{name}"] = f"shop/{name}.py"
        shutil.copytree(pkg, self.root / ".pristine" / "shop")

    # -- web -----------------------------------------------------------------------------

    def _make_web(self, count: int) -> None:
        rng = self._rng
        topics = ("database", "web framework", "message queue", "plotting")
        pages: dict[str, str] = {}
        for i in range(count):
            word = WORDS[i % len(WORDS)]
            proj = Project(
                slug=f"{word}{i}", title=f"{word.capitalize()}{i} {topics[i % 4]}",
                license=rng.choice(LICENSES), language=rng.choice(LANGUAGES),
                version=f"{rng.randint(0, 5)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
                stars=rng.randint(50, 60000), maintainer=f"{rng.choice(TEAMS)}-team",
                score=round(rng.uniform(10, 99), 1), topic=topics[i % 4],
            )
            self.truth.projects.append(proj)
            pages[f"/pages/{proj.slug}.html"] = _page(proj, rng)
        pages["/"] = "<html><body><h1>Index</h1>" + "".join(
            f'<a href="/pages/{p.slug}.html">{p.title}</a>' for p in self.truth.projects
        ) + "</body></html>"
        projects = list(self.truth.projects)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/search":
                    query = parse_qs(url.query).get("q", [""])[0]
                    body = json.dumps(_search(query, projects, self.headers.get("Host", "")))
                    self._send(200, "application/json", body)
                elif url.path in pages:
                    self._send(200, "text/html; charset=utf-8", pages[url.path])
                else:
                    self._send(404, "text/plain", "not found")

            def _send(self, status: int, ctype: str, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="bench-web", daemon=True)
        self._thread.start()

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Fixtures:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- generators ----------------------------------------------------------------------------

def _render_config(svc: Service) -> str:
    settings = {"name": svc.name, "port": svc.port, "region": svc.region,
                "replicas": svc.replicas, "log_level": svc.log_level,
                "timeout": svc.timeout, "owner": svc.owner}
    if svc.fmt == "json":
        return json.dumps({"service": settings,
                           "features": {"tracing": True, "canary": svc.replicas > 4}}, indent=2)
    if svc.fmt == "ini":
        lines = ["[service]"] + [f"{k} = {v}" for k, v in settings.items()]
        return "\n".join([*lines, "", "[features]", "tracing = true", ""])
    lines = ["service:"] + [f"  {k}: {v}" for k, v in settings.items()]
    return "\n".join([*lines, "features:", "  tracing: true", ""])


_MONEY = '''"""Money helpers."""


def round_money(value):
    """Round to cents, half up."""
    return int(value * 100 + 0.5) / 100


def legacy_round(value):
    """Deprecated: use round_money."""
    return round_money(value)


def fetch_config(name):
    """Deprecated: use load_settings."""
    return load_settings(name)


def load_settings(name):
    return {"name": name, "tax": 0.2}
'''


def _module_source(name: str, legacy: int, fetch: int, buggy: bool, rng: random.Random,
                   ) -> tuple[str, list[str]]:
    """The module's text and the functions it defines, in order."""
    lines = [f'"""The {name.split("_")[0]} part of the shop."""', "",
             "from shop.money import fetch_config, legacy_round, load_settings, round_money", "",
             "", "def total(prices):",
             f'    """Sum of prices with tax, rounded to cents ({name})."""',
             '    tax = load_settings("shop")["tax"]']
    if buggy:
        lines.append("    return round_money(sum(prices) * (1 + tax) - 1)  # off by one")
    else:
        lines.append("    return round_money(sum(prices) * (1 + tax))")
    functions = ["total"]
    for j in range(legacy):
        lines += ["", "", f"def helper_{j}(x):", f"    return legacy_round(x * {j + 2})"]
        functions.append(f"helper_{j}")
    for j in range(fetch):
        lines += ["", "", f"def settings_{j}():", f'    return fetch_config("{name}-{j}")']
        functions.append(f"settings_{j}")
    for j in range(rng.randint(2, 5)):
        lines += ["", "", f"def discounted_{j}(items):",
                  f'    """Prices above {j} with a {j + 1}.5x multiplier, rounded to cents."""',
                  f"    return [round_money(i * {j + 1}.5) for i in items if i > {j}]"]
        functions.append(f"discounted_{j}")
    return "\n".join(lines) + "\n", functions


def _test_source(name: str) -> str:
    return (f"import unittest\n\nfrom shop.{name} import total\n\n\n"
            "class TotalTest(unittest.TestCase):\n"
            "    def test_total(self):\n"
            "        self.assertEqual(total([10, 20]), 36.0)\n\n"
            "    def test_empty(self):\n"
            "        self.assertEqual(total([]), 0)\n")


def _page(p: Project, rng: random.Random) -> str:
    prose = "".join(f"<p>{text.strip()}</p>" for text in rng.sample(PROSE, 2))
    nav = "".join(f'<li><a href="/pages/x{i}.html">Related {i}</a></li>' for i in range(8))
    return f"""<!doctype html>
<html><head><title>{p.title}</title></head><body>
<nav><ul>{nav}</ul></nav>
<h1>{p.title}</h1>
<p>{p.title} is an open-source {p.topic} written in {p.language}.</p>
{prose}
<h2>Facts</h2>
<ul>
<li>License: {p.license}</li>
<li>Language: {p.language}</li>
<li>Latest release: {p.version}</li>
<li>Stars: {p.stars}</li>
<li>Maintainer: {p.maintainer}</li>
<li>Benchmark score: {p.score}</li>
</ul>
<footer><p>Copyright the {p.title} authors. All trademarks belong to their owners.</p></footer>
</body></html>"""


def _search(query: str, projects: list[Project], host: str) -> dict[str, Any]:
    """SearXNG's JSON shape; a project matches when every query word is in its title, topic
    or language (case-insensitive); ordered by stars."""
    words = [w for w in query.lower().split() if w]
    hits = [p for p in projects
            if all(w in f"{p.title} {p.topic} {p.language}".lower() for w in words)]
    hits.sort(key=lambda p: -p.stars)
    base = f"http://{host}" if host else ""
    results = [{"url": f"{base}/pages/{p.slug}.html", "title": p.title,
                "content": f"{p.title}: an open-source {p.topic} written in {p.language}.",
                "engine": "bench", "score": 1.0 / (i + 1)} for i, p in enumerate(hits)]
    return {"query": query, "number_of_results": len(results), "results": results,
            "answers": [], "suggestions": [], "unresponsive_engines": []}
