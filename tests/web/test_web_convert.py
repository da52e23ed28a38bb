from __future__ import annotations

import pytest

from execengine.web.convert import classify, convert, html_to_markdown

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>  The   Article </title>
<style>body { color: red }</style><script>var tracking = "SCRIPT-TEXT";</script></head>
<body>
<nav><a href="/">Home</a> <a href="/about">NAV-LINK</a></nav>
<div role="banner">BANNER-TEXT</div>
<main>
  <h1>Main heading</h1>
  <p>First paragraph with <strong>bold</strong> and <a href="/docs/x">a relative link</a>.</p>
  <p hidden>HIDDEN-TEXT</p>
  <ul><li>alpha</li><li>beta</li></ul>
  <pre><code>print("code")</code></pre>
  <p>Entities: &lt;tag&gt; &amp; caf&eacute;</p>
</main>
<aside>SIDEBAR-TEXT</aside>
<form><input name=q><button>SEARCH-BUTTON</button></form>
<footer>FOOTER-TEXT</footer>
<noscript>NOSCRIPT-TEXT</noscript>
</body></html>"""


def test_html_becomes_markdown_without_page_chrome() -> None:
    doc = convert(PAGE.encode(), "text/html; charset=utf-8", "https://example.org/a/b.html")
    assert doc.kind == "html" and doc.error is None
    assert doc.title == "The Article"
    assert "# Main heading" in doc.content
    assert "**bold**" in doc.content
    assert "[a relative link](https://example.org/docs/x)" in doc.content
    assert "* alpha" in doc.content and 'print("code")' in doc.content
    assert "<tag> & café" in doc.content
    for noise in ("SCRIPT-TEXT", "color: red", "NAV-LINK", "BANNER-TEXT", "HIDDEN-TEXT",
                  "SIDEBAR-TEXT", "SEARCH-BUTTON", "FOOTER-TEXT", "NOSCRIPT-TEXT"):
        assert noise not in doc.content, noise


def test_main_region_is_kept_only_when_it_holds_the_content() -> None:
    page = "<body><main><p>tiny</p></main><div><p>" + "real content " * 100 + "</p></div></body>"
    _, text = html_to_markdown(page)
    assert "tiny" in text and "real content" in text
    page = "<body><div>intro " * 3 + "<article><p>" + "story " * 100 + "</p></article></body>"
    _, text = html_to_markdown(page)
    assert "intro" not in text and "story" in text


@pytest.mark.parametrize(("page", "title"), [
    ('<head><meta property="og:title" content="From OG"></head><body>x</body>', "From OG"),
    ("<body><h1>From <em>H1</em></h1><p>x</p></body>", "From H1"),
    ("<p>no title at all</p>", ""),
])
def test_title_fallbacks(page: str, title: str) -> None:
    assert html_to_markdown(page)[0] == title


def test_unclosed_head_and_stray_tags_do_not_lose_the_body() -> None:
    title, text = html_to_markdown("<html><head><title>T</title><body><p>kept</p><nav>x")
    assert (title, text) == ("T", "kept")


def test_legacy_charset_from_meta_tag() -> None:
    body = '<meta charset="iso-8859-1"><p>Grüße</p>'.encode("latin-1")
    assert convert(body, "text/html").content == "Grüße"


def test_json_is_pretty_printed_and_bad_json_passes_through() -> None:
    assert convert(b'{"a": [1, "\\u00e9"]}', "application/json").content == (
        '{\n  "a": [\n    1,\n    "é"\n  ]\n}')
    assert convert(b"{not json", "application/problem+json").content == "{not json"


def test_plain_text_passes_through_tidied() -> None:
    doc = convert(b"line one   \r\n\r\n\r\n\r\nline two\n", "text/plain")
    assert (doc.kind, doc.content, doc.title) == ("text", "line one\n\nline two", "")


@pytest.mark.parametrize(("body", "ctype", "what"), [
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3 binary", "application/pdf", "a PDF document of 21 bytes"),
    (b"%PDF-1.4 sent as octets", "application/octet-stream", "a PDF document"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "image/png", "binary content (image/png)"),
    (b"PK\x03\x04\x00\x00", "", "binary content (unknown type)"),
])
def test_binary_bodies_are_reported_not_dumped(body: bytes, ctype: str, what: str) -> None:
    doc = convert(body, ctype)
    assert doc.kind == "binary" and doc.content == ""
    assert doc.error is not None and doc.error.startswith(what)


@pytest.mark.parametrize(("body", "kind"), [
    (b"<!DOCTYPE html><p>x", "html"),
    (b"  <html><body>x", "html"),
    (b'[{"a": 1}]', "json"),
    (b"just words", "text"),
])
def test_missing_content_type_is_sniffed(body: bytes, kind: str) -> None:
    assert classify(body, "") == kind


def test_xml_and_textual_application_types_pass_through() -> None:
    assert convert(b"<rss><item>x</item></rss>", "application/rss+xml").kind == "xml"
    assert convert(b"a: 1", "application/yaml").content == "a: 1"
