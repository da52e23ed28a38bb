"""Fetched bodies to text a model can read.

HTML becomes markdown with ``html2text``, after a stdlib pass that drops what is not the
page's content (scripts, styles, navigation, footers, sidebars, forms, hidden elements) and,
when the page has a ``<main>`` (or a single ``<article>``) holding most of its text, keeps
only that. The title comes from ``<title>`` (else ``og:title``, else the first ``<h1>``).
Plain text passes through; JSON is pretty-printed; XML and other textual types pass through.
PDFs, images, archives and other binary bodies are reported, never dumped.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser

import html2text

from execengine.web.encoding import decode_text

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXTUAL_APP = frozenset({
    "application/javascript", "application/x-javascript", "application/ecmascript",
    "application/x-yaml", "application/yaml", "application/toml", "application/x-sh",
    "application/sql", "application/graphql", "application/x-ndjson", "application/csv",
})
_SKIP = frozenset({
    "script", "style", "noscript", "nav", "footer", "aside", "form", "svg", "iframe",
    "template", "button", "select", "dialog", "canvas", "object", "head", "menu",
})
_NOISE_ROLES = frozenset({
    "navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar",
    "dialog", "alert",
})
_VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr", "param",
})


@dataclass(frozen=True)
class Document:
    """What a page says: its title and readable content, or why there is none."""

    title: str
    content: str
    kind: str  #: "html", "text", "json", "xml" or "binary"
    error: str | None = None


def convert(body: bytes, content_type: str = "", url: str = "") -> Document:
    """Turn a response body into a :class:`Document` (see the module docstring)."""
    media = content_type.split(";", 1)[0].strip().lower()
    kind = classify(body, media)
    if kind == "binary":
        return Document("", "", "binary", _binary_note(body, media))
    text = decode_text(body, content_type or None, html=kind == "html")
    if kind == "html":
        title, markdown = html_to_markdown(text, url)
        return Document(title, markdown, "html")
    if kind == "json":
        with contextlib.suppress(ValueError):
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return Document("", tidy(text), kind)


def classify(body: bytes, media: str) -> str:
    """Decide how to treat a body from its media type, sniffing when it is missing."""
    if media in HTML_TYPES:
        return "html"
    if media in ("application/json", "text/json") or media.endswith("+json"):
        return "json"
    if media in ("application/xml", "text/xml") or media.endswith("+xml"):
        return "xml"
    if media.startswith("text/") or media in _TEXTUAL_APP:
        return "text"
    if media and media not in ("application/octet-stream", "binary/octet-stream"):
        return "binary"
    head = body[:1024]
    if head.startswith(b"%PDF-") or b"\x00" in head:
        return "binary"
    lowered = head.lstrip().lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or b"<body" in lowered:
        return "html"
    if lowered[:1] in (b"{", b"["):
        return "json"
    return "text"


def _binary_note(body: bytes, media: str) -> str:
    if media == "application/pdf" or body.startswith(b"%PDF-"):
        what = "a PDF document"
    else:
        what = f"binary content ({media or 'unknown type'})"
    return f"{what} of {len(body):,} bytes; text extraction is not supported for it"


def tidy(text: str) -> str:
    """Strip trailing spaces and collapse runs of blank lines."""
    text = re.sub(r"[ \t]+\n", "\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def html_to_markdown(page: str, url: str = "") -> tuple[str, str]:
    """``(title, markdown)`` of an HTML page."""
    cleaner = _Cleaner()
    try:
        cleaner.feed(page)
        cleaner.close()
    except Exception:  # html.parser is lenient; this is belt and braces
        cleaner = _Cleaner()
    kept = cleaner.result()
    markdown = _markdown(kept, url)
    if not markdown and page.strip():
        markdown = _markdown(page, url)  # the filter swallowed everything: be literal
    return cleaner.title(), markdown


def _markdown(page: str, url: str) -> str:
    conv = html2text.HTML2Text(baseurl=url)
    conv.body_width = 0
    conv.unicode_snob = True
    conv.images_to_alt = True
    conv.default_image_alt = ""
    conv.ignore_images = False
    conv.skip_internal_links = True
    return tidy(conv.handle(page))


class _Cleaner(HTMLParser):
    """Re-emits the HTML without noise elements and remembers title and main region."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip_tag: str | None = None
        self.skip_depth = 0
        self._title: list[str] = []
        self._in_title = False
        self._title_done = False
        self._og_title = ""
        self._h1: list[str] = []
        self._h1_state = 0  # 0 not seen, 1 inside, 2 done
        self.regions: dict[str, list[tuple[int, int]]] = {"main": [], "article": []}
        self._open: dict[str, list[int]] = {"main": [], "article": []}

    # -- parser callbacks ---------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self._title_done:
            self._in_title = True
        if tag == "meta":
            found = dict(attrs)
            if found.get("property") == "og:title" and found.get("content"):
                self._og_title = found["content"] or ""
        if self.skip_tag == "head" and tag == "body":
            self.skip_tag, self.skip_depth = None, 0  # an unclosed <head> ends at <body>
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        if self._is_noise(tag, attrs):
            if tag not in _VOID:
                self.skip_tag, self.skip_depth = tag, 1
            return
        if tag == "h1" and self._h1_state == 0:
            self._h1_state = 1
        if tag in self._open:
            self._open[tag].append(len(self.out))
        self.out.append(self.get_starttag_text() or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip_tag is None and not self._is_noise(tag, attrs):
            self.out.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            self._title_done = self._title_done or bool(self._title)
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_depth -= 1
                if self.skip_depth == 0:
                    self.skip_tag = None
            return
        if tag == "h1" and self._h1_state == 1:
            self._h1_state = 2
        self.out.append(f"</{tag}>")
        if self._open.get(tag):
            start = self._open[tag].pop()
            if not self._open[tag]:
                self.regions[tag].append((start, len(self.out)))

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title.append(data)
            return
        if self.skip_tag is not None:
            return
        if self._h1_state == 1:
            self._h1.append(data)
        self.out.append(html.escape(data, quote=False))

    # -- results ------------------------------------------------------------------------

    @staticmethod
    def _is_noise(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        if tag in _SKIP:
            return True
        found = dict(attrs)
        if "hidden" in found or found.get("aria-hidden") == "true":
            return True
        return (found.get("role") or "").lower() in _NOISE_ROLES

    def title(self) -> str:
        for candidate in ("".join(self._title), self._og_title, "".join(self._h1)):
            text = " ".join(candidate.split())
            if text:
                return text
        return ""

    def result(self) -> str:
        """The kept HTML: the main region when it holds most of the text, else all."""
        whole = "".join(self.out)
        region = self.regions["main"][:1] or (
            self.regions["article"] if len(self.regions["article"]) == 1 else [])
        if region:
            start, end = region[0]
            part = "".join(self.out[start:end])
            if len(_visible(part)) >= 0.2 * len(_visible(whole)):
                return part
        return whole


def _visible(fragment: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", fragment)).strip()
