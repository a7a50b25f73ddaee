"""The HTML report in headless Chromium (Debian ``chromium``, installed by ``make sysdeps``).

Two loads of the sample report:

1. the report file itself, with Chromium's console logged to stderr: no console message at all
   (a blocked network load, a CSP violation or a script error would each log one), and a
   screenshot (written under the test's ``tmp_path``, never into the repository);
2. a copy with a small checking script injected (the report's own CSP forbids scripts, so the copy
   relaxes it for that script only) dumped with ``--dump-dom`` after the load event: every
   ``<img>`` (the plots) decoded (``naturalWidth > 0``), every page thumbnail (a ``.pg`` element
   whose CSS background is the page's JPEG, embedded once per page) laid out with a height and its
   background image decoded, and no error event. Negative controls with one broken plot image and
   one broken thumbnail class prove the check sees failures.

And the first screen (issue 27.5): a screenshot at 1400 x 900, with a checking copy that measures
where the verdict sentences and the summary table are laid out at that width (entirely within the
first 900 px), that no image is missing, and that a click on a page thumbnail goes to the page's
image file beside the report, decoded by Chromium at the corpus' full resolution.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

import vdr

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (only this test needs it; make sysdeps installs it on Debian as root)")

CHECK = """<script>window.__errs=[];addEventListener('error',e=>{window.__errs.push(String(e.message||(e.target&&e.target.outerHTML||'').slice(0,80)))},true);
addEventListener('load',()=>{const ok=i=>i.complete&&i.naturalWidth>0;const imgs=[...document.images].filter(i=>i.className!=='chk');
const bad=imgs.filter(i=>!ok(i)).map(i=>i.alt);const chk=new Map([...document.querySelectorAll('img.chk')].map(i=>[i.alt,i]));let thumbs=0;
for(const el of document.querySelectorAll('.pg')){const c=[...el.classList].find(x=>chk.has(x));const i=c&&chk.get(c);
if(i&&ok(i)&&el.offsetHeight>0&&getComputedStyle(el).backgroundImage.includes(i.src)){thumbs++}else{bad.push(el.getAttribute('aria-label'))}}
const d=document.createElement('pre');d.id='imgcheck';d.textContent=JSON.stringify({n:imgs.length,thumbs:thumbs,broken:bad,errors:window.__errs});document.body.appendChild(d)});</script>"""
# The page thumbnails are CSS backgrounds (each page's JPEG embedded once, in a class rule): the checked copy adds one
# <img class="chk"> per class rule with the same data URI, so that the load event waits for it and its decoding can be
# read synchronously; the script then checks that each thumbnail element shows its class's image, with a height.
RULE = re.compile(r"\.(pg\d+)\{background-image:url\((data:[^)]*)\)")


def _chromium(tmp_path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chrome-profile'}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=timeout)


def _image_check(tmp_path, html: str, name: str) -> dict:
    csp = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    assert csp in html
    page = html.replace(csp, csp + "; script-src 'unsafe-inline'", 1).replace("<style>", CHECK + "<style>", 1)
    rules = dict(RULE.findall(page.split("</style>", 1)[0]))  # the last rule of a class wins, as in CSS
    page = page.replace("</body>", "".join(f'<img class="chk" alt="{c}" src="{u}" hidden>' for c, u in rules.items()) + "</body>", 1)
    p = tmp_path / name
    p.write_text(page, encoding="utf-8")
    r = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", p.as_uri())
    m = re.search(r'<pre id="imgcheck">(.*?)</pre>', r.stdout, re.S)
    assert m, f"no check result from chromium (rc {r.returncode}): {r.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def test_report_in_headless_chromium(lexical_results, tmp_path):
    paths = vdr.report(lexical_results, tmp_path / "report.html")
    html = paths.html.read_text(encoding="utf-8")
    n_img = html.count("<img ")
    n_thumbs = html.count('<div class="pg ')
    assert n_img == 4 and n_thumbs > 20

    shot = tmp_path / "report.png"
    r = _chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--window-size=1280,4000",
                  f"--screenshot={shot}", paths.html.as_uri())
    assert r.returncode == 0, r.stderr[-3000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == [], "console messages:\n" + "\n".join(console)
    assert shot.is_file() and shot.stat().st_size > 50_000
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1280, 4000)
        assert len(im.convert("RGB").getcolors(1 << 24)) > 100  # plots and pages, not a blank page

    check = _image_check(tmp_path, html, "checked.html")
    assert check == {"n": n_img, "thumbs": n_thumbs, "broken": [], "errors": []}


def test_image_check_sees_a_broken_image(lexical_results, tmp_path):
    html = vdr.report(lexical_results, tmp_path / "report.html").html.read_text(encoding="utf-8")
    html = html.replace("<h1>", '<img src="data:image/png;base64,AAAA" alt="broken-on-purpose"><h1>', 1)
    check = _image_check(tmp_path, html, "broken.html")
    assert check["broken"] == ["broken-on-purpose"] and len(check["errors"]) == 1


def test_image_check_sees_a_broken_thumbnail(lexical_results, tmp_path):
    html = vdr.report(lexical_results, tmp_path / "report.html").html.read_text(encoding="utf-8")
    pages = re.findall(r'<div class="pg pg0" role="img" aria-label="([^"]+)">', html)
    assert pages
    html = html.replace("</style>", ".pg0{background-image:url(data:image/jpeg;base64,AAAA)}</style>", 1)
    check = _image_check(tmp_path, html, "broken-thumb.html")
    assert check["broken"] == pages and check["thumbs"] == html.count('<div class="pg ') - len(pages)
    assert check["n"] == 4 and len(check["errors"]) == 1  # the broken image's error event


# ------------------------------------------------------------------------------------------ the first screen (issue 27.5)

FIRST = """<script>addEventListener('load',()=>{const r=e=>{const b=e.getBoundingClientRect();return [Math.round(b.top),Math.round(b.bottom),Math.round(b.width)]};
let clicked=null;addEventListener('click',e=>{const a=e.target.closest('a');clicked=a?a.href:null;e.preventDefault()},true);
const t=document.querySelector('a.full .pg');if(t){t.click()}const g=document.querySelector('table.groups');
const d=document.createElement('pre');d.id='firstscreen';d.textContent=JSON.stringify({w:innerWidth,h:innerHeight,
verdicts:[...document.querySelectorAll('ul.verdicts li')].map(r),summary:r(document.querySelector('table.summary')),groups:g?r(g):null,
missing:document.querySelectorAll('.missing').length,clicked:clicked,thumb:t?Math.round(t.getBoundingClientRect().width):0});
document.body.appendChild(d)});</script>"""
SIZE = """<script>addEventListener('load',()=>{const i=document.querySelector('img');const d=document.createElement('pre');d.id='size';
d.textContent=JSON.stringify([i.complete,i.naturalWidth,i.naturalHeight]);document.body.appendChild(d)});</script>"""


def _dump(tmp_path, html: str, name: str, marker: str, *args: str) -> dict:
    p = tmp_path / name
    p.write_text(html, encoding="utf-8")
    r = _chromium(tmp_path, *args, "--virtual-time-budget=10000", "--dump-dom", p.as_uri())
    m = re.search(rf'<pre id="{marker}">(.*?)</pre>', r.stdout, re.S)
    assert m, f"no {marker} result from chromium (rc {r.returncode}): {r.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def test_first_screen_at_1400x900(lexical_results, tmp_path):
    """The first screen at 1400 x 900 (a screenshot kept under tmp_path) shows every verdict
    sentence and the whole summary table (and the groups' table begins there); no page image is
    missing; a click on a page thumbnail goes to the page's image file, which Chromium decodes at
    the corpus' full resolution."""
    paths = vdr.report(lexical_results, tmp_path / "report.html", group_by=["type"])
    html = paths.html.read_text(encoding="utf-8")
    shot = tmp_path / "first-screen.png"
    r = _chromium(tmp_path, "--hide-scrollbars", "--window-size=1400,900", f"--screenshot={shot}", paths.html.as_uri())
    assert r.returncode == 0, r.stderr[-3000:]
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1400, 900)
        assert len(im.convert("RGB").getcolors(1 << 24)) > 50  # text and tables, not a blank page

    csp = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    checked = html.replace(csp, csp + "; script-src 'unsafe-inline'", 1).replace("<style>", FIRST + "<style>", 1)
    got = _dump(tmp_path, checked, "first.html", "firstscreen", "--hide-scrollbars", "--window-size=1400,900")
    # the layout depends on the width only (1400 px, as the screenshot's); --dump-dom's viewport is shorter than the
    # screenshot's 900 px (window decorations), so the positions, from the top of the page, are held against 900
    assert got["w"] == 1400, got
    res = vdr.Results.load(lexical_results)
    assert len(got["verdicts"]) == len(res.verdicts()) == 2
    for top, bottom, width in [*got["verdicts"], got["summary"]]:
        assert 0 <= top < bottom <= 900 and width > 0, got  # entirely on the first screen
    assert got["groups"] is not None and got["groups"][0] < 900, got  # the groups begin on it
    assert got["missing"] == 0 and paths.missing_images == 0
    check = _image_check(tmp_path, html, "checked.html")
    assert check["broken"] == [] and check["errors"] == [] and check["thumbs"] == html.count('<div class="pg ') > 20
    # the click: the link of the first thumbnail, to the page image beside the report, shown at its full size
    assert got["clicked"] and got["clicked"].startswith((tmp_path / "report_pages").as_uri() + "/"), got
    assert got["thumb"] == 156  # 150 px of page inside a 3 px frame
    page = next(p for p in paths.pages.iterdir() if got["clicked"].endswith("/" + p.name))
    with Image.open(page) as im:
        full = im.size
    size = _dump(tmp_path, f'<!DOCTYPE html><html><body>{SIZE}<img src="{got["clicked"]}"></body></html>', "size.html", "size")
    assert size == [True, full[0], full[1]] and full[0] >= 4 * 150, (size, full)
