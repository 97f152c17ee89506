"""The built book as a reader sees it: every page opened in headless Chromium.

The session builds the whole book at the `smoke` scale into a temporary folder (every chapter
executed, strict Sphinx build), serves it on 127.0.0.1 and opens each HTML page in headless
Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by selenium). It checks that
every image loaded, that math was rendered by MathJax, that internal links and anchors resolve,
that nothing is loaded from another host (MathJax comes from the book itself), and that the
browser console has no errors. One full-page screenshot per page goes to
``_build/browser-screenshots/``. Every page is also opened at a phone's width and at a laptop's
(:data:`VIEWPORT_WIDTHS`): the page itself must not scroll sideways (wide tables and formulas
scroll inside their own box).

To check an existing build instead (say the `cpu` book): ``GEOCONT_BOOK_HTML=_build/html pytest
tests/test_browser.py``.
"""

from __future__ import annotations

import base64
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_build" / "browser-screenshots"
PAGE_TIMEOUT_S = 60
#: CSS pixels: a phone held upright (390, an iPhone 12 to 15) and a laptop screen.
VIEWPORT_WIDTHS = (390, 1280)
VIEWPORT_HEIGHT = 900

#: Gathered in the page after it has loaded (and MathJax has finished, where it runs).
INSPECT_JS = """
const main = document.querySelector('main') || document.body;
const text = (() => {
  const copy = main.cloneNode(true);
  copy.querySelectorAll('pre, code, .highlight, mjx-container, script, style').forEach(e => e.remove());
  return copy.innerText;
})();
return {
  images: Array.from(document.images).map(i => ({src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0})),
  math: document.querySelectorAll('.math').length,
  mathUnrendered: Array.from(document.querySelectorAll('.math')).filter(e => !e.querySelector('mjx-container'))
                        .map(e => e.textContent.slice(0, 80)),
  mathErrors: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent.slice(0, 80)),
  rawDelimiters: (text.match(/\\$\\$|\\\\\\(|\\\\\\[/g) || []).length,
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href')),
  ids: Array.from(document.querySelectorAll('[id], a[name]')).map(e => e.id || e.getAttribute('name')),
  resources: performance.getEntriesByType('resource').map(e => e.name)
             .concat(Array.from(document.querySelectorAll('script[src]')).map(s => s.src))
             .concat(Array.from(document.querySelectorAll('link[href]')).filter(l => l.rel !== 'canonical')
                     .map(l => l.href)),
};
"""

WAIT_FOR_MATHJAX_JS = """
const done = arguments[arguments.length - 1];
if (!document.querySelector('.math')) { done('no math'); return; }
const started = Date.now();
(function poll() {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    MathJax.startup.promise.then(() => done('rendered'), e => done('MathJax failed: ' + e));
  } else if (Date.now() - started > 30000) {
    done('MathJax never started');
  } else {
    setTimeout(poll, 100);
  }
})();
"""


#: How far the page scrolls sideways, and the innermost elements that reach past the window's right edge.
OVERFLOW_JS = """
const width = window.innerWidth;
const page = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
if (page <= width) { return {width: width, page: page, culprits: []}; }
const clipped = e => {  // fixed to the window (a drawer), or inside a box that scrolls or clips and fits
  if (getComputedStyle(e).position === 'fixed') return true;
  for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
    const style = getComputedStyle(a);
    if (style.position === 'fixed') return true;
    if (style.overflowX !== 'visible' && a.getBoundingClientRect().right <= width + 1) return true;
  }
  return false;
};
const past = new Set(Array.from(document.body.querySelectorAll('*'))
                     .filter(e => e.getBoundingClientRect().right > width + 1 && !clipped(e)));
const describe = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                     + (e.classList.length ? '.' + Array.from(e.classList).join('.') : '');
const innermost = Array.from(past).filter(e => !Array.from(e.children).some(c => past.has(c)));
return {width: width, page: page, culprits: innermost.slice(0, 5).map(e => {
  const chain = []; for (let a = e; a && a !== document.body && chain.length < 4; a = a.parentElement) chain.push(describe(a));
  return chain.join(' < ') + ' (right edge ' + Math.round(e.getBoundingClientRect().right) + ')';
})};
"""


def _require(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.fail(f"`{program}` not found: install the Debian package `{package}` (make setup does)")
    return path


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built HTML: a fresh `smoke` build in a temporary folder, or $GEOCONT_BOOK_HTML."""
    if os.environ.get("GEOCONT_BOOK_HTML"):
        html = Path(os.environ["GEOCONT_BOOK_HTML"]).resolve()
        assert (html / "index.html").exists(), f"no index.html in GEOCONT_BOOK_HTML={html}"
        return html
    output = tmp_path_factory.mktemp("book")
    env = {k: v for k, v in os.environ.items() if k not in ("GEOCONT_BOOK", "GEOCONT_CLAIMS_DIR")}
    result = subprocess.run(
        [sys.executable, "-m", "geocont.book", "build", "--scale", "smoke", "--output", str(output)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (
        f"the smoke build of the book failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return output / "_build" / "html"


@pytest.fixture(scope="session")
def server(site: Path):
    """The site served on an ephemeral loopback port (as a reader's browser would fetch it)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _require("chromium", "chromium")
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        "--hide-scrollbars",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(_require("chromedriver", "chromium-driver")))
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    driver.set_script_timeout(PAGE_TIMEOUT_S)
    yield driver
    driver.quit()


def _pages(site: Path) -> list[str]:
    """Every HTML page of the site (relative paths), without the copied sources and static files."""
    return sorted(
        str(p.relative_to(site))
        for p in site.rglob("*.html")
        if not p.relative_to(site).parts[0].startswith(("_static", "_sources", "_images"))
    )


@pytest.fixture(scope="session")
def report(site: Path, server: str, browser) -> dict[str, dict]:
    """Visit every page once: what it loaded, rendered and logged; a screenshot of each."""
    if SCREENSHOTS.exists():
        shutil.rmtree(SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True)
    results = {}
    for page in _pages(site):
        browser.get_log("browser")  # drop anything left from the previous page
        browser.get(urljoin(server, page))
        mathjax = _wait_until_rendered(browser)
        info = browser.execute_script(INSPECT_JS)
        info["mathjax"] = mathjax
        info["url"] = browser.current_url  # index.html redirects to the first chapter
        info["console"] = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        shot = browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        (SCREENSHOTS / (page.replace("/", "__").removesuffix(".html") + ".png")).write_bytes(
            base64.b64decode(shot["data"])
        )
        results[page] = info
    return results


def _wait_until_rendered(browser) -> str:
    """Wait for the page, its MathJax and its images; returns MathJax's state."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, PAGE_TIMEOUT_S).until(lambda d: d.execute_script("return document.readyState") == "complete")
    mathjax = browser.execute_async_script(WAIT_FOR_MATHJAX_JS)
    WebDriverWait(browser, PAGE_TIMEOUT_S).until(
        lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete)")
    )
    return mathjax


@pytest.fixture(scope="session")
def overflow(site: Path, server: str, browser, report) -> dict[tuple[str, int], dict]:
    """Every page at every width of :data:`VIEWPORT_WIDTHS`: how wide the page scrolls, and what sticks out."""
    results = {}
    try:
        for width in VIEWPORT_WIDTHS:
            browser.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": VIEWPORT_HEIGHT, "deviceScaleFactor": 1, "mobile": False},
            )
            for page in _pages(site):
                browser.get(urljoin(server, page))
                _wait_until_rendered(browser)
                results[(page, width)] = browser.execute_script(OVERFLOW_JS)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return results


def _fail_if(problems: list[str], what: str) -> None:
    if problems:
        pytest.fail(f"{what} ({len(problems)}):\n" + "\n".join(f"  {p}" for p in problems), pytrace=False)


def test_every_page_opened_and_was_screenshotted(report, site):
    assert "index.html" in report and "book/claims.html" in report, sorted(report)
    missing = [p for p in report if not (SCREENSHOTS / (p.replace("/", "__").removesuffix(".html") + ".png")).exists()]
    _fail_if(missing, f"pages without a screenshot in {SCREENSHOTS}")


def test_every_image_loaded(report):
    broken = [f"{page}: {image['src']}" for page, info in report.items() for image in info["images"] if not image["ok"]]
    _fail_if(broken, "images that did not load")
    figures = sum(len(info["images"]) for page, info in report.items() if page.startswith("book/"))
    assert figures >= 10, f"expected the chapters' figures, found {figures} images in book/ pages"


def test_math_is_rendered_by_mathjax(report):
    problems = []
    for page, info in report.items():
        if info["math"] and info["mathjax"] != "rendered":
            problems.append(f"{page}: {info['math']} math elements, MathJax: {info['mathjax']}")
        problems += [f"{page}: not typeset: {text!r}" for text in info["mathUnrendered"]]
        problems += [f"{page}: TeX error: {text!r}" for text in info["mathErrors"]]
        if info["rawDelimiters"]:
            problems.append(f"{page}: {info['rawDelimiters']} raw math delimiters ($$, \\(, \\[) left in the text")
    _fail_if(problems, "math not rendered")
    assert report["book/methods.html"]["math"] > 10, "the methods page should be full of formulas"


def test_internal_links_and_anchors_resolve(report, site, server):
    ids = {page: set(info["ids"]) for page, info in report.items()}
    broken = []
    for page, info in report.items():
        for href in info["links"]:
            url = urljoin(info["url"], href)
            if urlparse(url).scheme not in ("http", "https") or not url.startswith(server):
                continue  # mailto:, javascript:, or another site
            target, fragment = urldefrag(url)
            path = unquote(urlparse(target).path).lstrip("/") or "index.html"
            if path.endswith("/"):
                path += "index.html"
            if not (site / path).is_file():
                broken.append(f"{page}: {href} -> missing file {path}")
            elif fragment and path in ids and fragment not in ids[path]:
                broken.append(f"{page}: {href} -> no anchor #{fragment} in {path}")
    _fail_if(broken, "internal links that do not resolve")


def test_nothing_is_loaded_from_another_host(report, server):
    outside = sorted(
        {
            f"{page}: {url}"
            for page, info in report.items()
            for url in info["resources"]
            if not url.startswith((server, "data:", "blob:", "about:"))
        }
    )
    _fail_if(outside, "resources loaded from outside the book (a CDN?)")


def test_browser_console_has_no_errors(report):
    errors = [f"{page}: {message}" for page, info in report.items() for message in info["console"]]
    _fail_if(errors, "browser console errors (SEVERE)")


def test_no_page_scrolls_sideways_on_a_phone_or_a_laptop(overflow):
    assert {width for _, width in overflow} == set(VIEWPORT_WIDTHS)
    wide = [
        f"{page} at {width} px: the page is {info['page']} px wide; sticking out: "
        + ("; ".join(info["culprits"]) or "(nothing found)")
        for (page, width), info in overflow.items()
        if info["page"] > info["width"]
    ]
    _fail_if(wide, "pages wider than the window (a table or formula should scroll inside its own box)")
