"""Every relative link and anchor in README.md and docs/ resolves.

README.md is read as GitHub renders it (its heading anchors), the pages under docs/ as the
MkDocs site does (Python-Markdown's ``toc`` anchors); links to web addresses are not
followed. ``mkdocs build --strict`` in CI checks the site's pages again, with API
references; this test needs nothing installed and covers the README too."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def github_anchor(heading: str) -> str:
    text = CODE.sub(lambda m: m.group(0).strip("`"), heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def mkdocs_anchor(heading: str) -> str:
    """Python-Markdown's ``toc`` slugify (the unicode-stripping default)."""
    text = CODE.sub(lambda m: m.group(0).strip("`"), heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    slug = github_anchor if path.name == "README.md" else mkdocs_anchor
    found: set[str] = set()
    for m in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base, n = slug(m.group(2)), 1
        name = base
        while name in found:  # a repeated heading gets -1, -2, ...
            name, n = f"{base}-{n}" if path.name == "README.md" else f"{base}_{n}", n + 1
        found.add(name)
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    text = CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    bad = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if root not in dest.parents and dest != root:
            bad.append(f"{target}: outside the repository")
        elif not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no such anchor in {dest.relative_to(root)}")
    return bad


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def test_every_link_and_anchor_resolves():
    found = {str(p.relative_to(ROOT)): broken_links(p) for p in documents()}
    assert {k: v for k, v in found.items() if v} == {}
    assert len(found) > 10  # README.md and the docs were read


def test_the_check_can_fail(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## Some `code` here: yes\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n## Install and run\n\n"
        "[ok](docs/page.md) [ok](docs/page.md#some-code-here-yes) [ok](#install-and-run)\n"
        "[web](https://example.org/x) `[not a link](nowhere.md)`\n"
        "```\n[in a fence](nowhere.md)\n```\n"
        "[gone](docs/missing.md) [bad anchor](docs/page.md#nope) [bad](#no-such-heading)\n"
        "![picture](docs/missing.png)\n")
    assert broken_links(readme, tmp_path) == [
        "docs/missing.md: no such file",
        "docs/page.md#nope: no such anchor in docs/page.md",
        "#no-such-heading: no such anchor in README.md",
        "docs/missing.png: no such file",
    ]


def test_anchor_rules():
    heading = "Against the reference system: `--reference PYTHON`"
    assert github_anchor(heading) == "against-the-reference-system---reference-python"
    assert mkdocs_anchor(heading) == "against-the-reference-system-reference-python"
