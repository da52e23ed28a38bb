from __future__ import annotations

import json
import socket
import urllib.request

from execengine.bench.fixtures import Fixtures


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def test_fixtures_generate_and_clean_up() -> None:
    with Fixtures(services=6, projects=8, modules=4) as fx:
        root = fx.root
        assert len(list(fx.configs.glob("*/config.*"))) == 6
        assert {p.suffix for p in fx.configs.glob("*/config.*")} == {".yaml", ".json", ".ini"}
        # the search endpoint speaks SearXNG's JSON
        status, body = _get(fx.base_url + "/search?q=database&format=json")
        found = json.loads(body)
        assert status == 200 and found["query"] == "database"
        hits = found["results"]
        assert hits and all(set(h) >= {"url", "title", "content"} for h in hits)
        stars = {p.slug: p.stars for p in fx.truth.projects}
        ranked = [stars[h["url"].rsplit("/", 1)[1][:-5]] for h in hits]
        assert ranked == sorted(ranked, reverse=True)
        # every page states its facts
        proj = fx.truth.projects[0]
        status, page = _get(f"{fx.base_url}/pages/{proj.slug}.html")
        assert status == 200 and f"License: {proj.license}" in page
        assert _get(fx.base_url + "/nope")[0] == 404
        # refactoring workflows can restore the package
        victim = next(fx.proj.glob("shop/*_*.py"))
        original = victim.read_text()
        victim.write_text("broken")
        fx.reset_project()
        assert victim.read_text() == original
        port = int(fx.base_url.rsplit(":", 1)[1])
    assert not root.exists()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    fx.close()  # idempotent


def test_same_seed_same_fixtures() -> None:
    with Fixtures(seed=3, services=5, projects=4, modules=3) as a, \
            Fixtures(seed=3, services=5, projects=4, modules=3) as b:
        assert a.truth.services == b.truth.services
        assert a.truth.projects == b.truth.projects
        assert a.truth.failing_tests == b.truth.failing_tests


def test_no_filler_in_configs_and_no_doubled_paragraphs() -> None:
    import re

    from execengine.bench.fixtures import PROSE

    with Fixtures(services=6, projects=4, modules=2) as fx:
        for path in fx.configs.glob("*/config.*"):
            text = path.read_text()
            assert not any(p.strip()[:30] in text for p in PROSE), path
        for p in fx.truth.projects:
            _, page = _get(f"{fx.base_url}/pages/{p.slug}.html")
            paragraphs = re.findall(r"<p>(.*?)</p>", page)
            assert len(paragraphs) == len(set(paragraphs))
            assert not any(para.count(para[:40]) > 1 for para in paragraphs)
        assert sum(fx.truth.readme_words.values()) > 0
        assert all(f[0] == "total" for f in fx.truth.functions.values())
