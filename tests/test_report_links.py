"""Report links are percent-encoded whatever the file names (issue 34 item 7): a report written to a
name holding ``#``, ``%``, ``?``, a space or a non-ASCII letter links every thumbnail to its
full-size page, and the link resolves, as a browser resolves it (``urllib.parse.urljoin`` against
the report's ``file:`` URL, RFC 3986), to the copied file, byte for byte the corpus' image.
"""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit
from urllib.request import pathname2url, url2pathname

import pytest

import vdr
from vdr.cli import main
from vdr.report.render import relative_url

NAMES = ["rep #1.html", "50% done.html", "why?.html", "a b.html", "r\u00e9sum\u00e9 #%? .html"]


def _browser_target(report: Path, href: str) -> Path:
    """The file a browser opens for ``href`` in the page ``report`` (RFC 3986 resolution)."""
    url = urljoin("file://" + pathname2url(str(report)), href)
    parts = urlsplit(url)
    assert parts.scheme == "file" and not parts.query and not parts.fragment, url  # nothing cut off as ?query or #fragment
    return Path(url2pathname(parts.path))


@pytest.mark.parametrize("name", NAMES)
def test_links_resolve_to_the_copied_pages(lexical_results, sample_corpus, tmp_path, name):
    out = tmp_path / name
    paths = vdr.report(lexical_results, out)
    body = paths.html.read_text(encoding="utf-8").split("</style>", 1)[1]
    hrefs = [html_lib.unescape(h) for h in re.findall(r'<a class="full" href="([^"]+)"', body)]
    assert len(hrefs) > 20
    corpus = vdr.Corpus.load(sample_corpus)
    pages = dict(zip(hrefs, re.findall(r'<a class="full" href="[^"]+"[^>]*><div class="pg pg\d+" role="img" aria-label="([^"]+)"',
                                       body)))
    for href in hrefs:
        assert not set(href) & set("#? ")  # never raw: a browser would cut or misread them
        target = _browser_target(paths.html, href)
        assert target.parent == paths.pages
        assert target.read_bytes() == corpus.image_path(html_lib.unescape(pages[href])).read_bytes()


def test_cli_report_out_with_special_characters(lexical_results, tmp_path):
    out = tmp_path / "my report #3 (100% ?).html"
    assert main(["report", str(lexical_results), "--out", str(out)]) == 0
    body = out.read_text(encoding="utf-8")
    href = html_lib.unescape(re.search(r'<a class="full" href="([^"]+)"', body).group(1))
    assert href.startswith("my%20report%20%233%20%28100%25%20%3F%29_pages/")
    assert _browser_target(out, href).is_file()


@pytest.mark.parametrize(("segments", "url"), [
    (("report_pages", "images/p.png"), "report_pages/images/p.png"),
    (("a#b_pages", "x.png"), "a%23b_pages/x.png"),
    (("50%_pages", "x.png"), "50%25_pages/x.png"),
    (("q?_pages", "x.png"), "q%3F_pages/x.png"),
    (("a b_pages", "x.png"), "a%20b_pages/x.png"),
    (("\u00e9_pages", "x.png"), "%C3%A9_pages/x.png"),
])
def test_relative_url_matrix(segments, url):
    assert relative_url(*segments) == url
    assert [unquote(p) for p in url.split("/")] == [p for seg in segments for p in seg.split("/")]
