"""The website in a real browser: headless Chromium opens every page of both editions that `make site` built, served
on a loopback port, and checks what a reader gets. A page fails on a console error (a failed request included) or
anything loaded from another host; an image that does not load; an internal link or anchor that goes nowhere; a
language switch that does not land on the same page in the other language; a launch button that is not its
notebook's own; the set-up cell, or a solution's answer or code, visible without a click. Searching for DataLoader
and for 数据加载器 must list notebook 02. Defects planted in a copy of the site must be reported.

`make site-test` runs this file (SITE_TEST=1) after `make site`; it builds the site itself when site/ is missing.
Without Chromium and chromedriver it says so and skips. Screenshots of failing pages: runs/site-test/.
"""

import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "site"
SHOTS = REPO / "runs" / "site-test"
sys.path.insert(0, str(REPO / "notebooks"))
from fetch_series import BRANCH, GITHUB  # noqa: E402  (the address the notebooks' badges and set-up cells use)

NAMES = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAGES = ["index", *NAMES]
# Each edition: its folder in the site, its notebooks, its <html lang>.
EDITIONS = {"en": ("", REPO / "notebooks", "en"), "zh": ("zh/", REPO / "notebooks" / "zh", "zh-CN")}
REMOVED = {"parameters", "machinery"}  # tags of the cells no page shows
CODE_HIDDEN = {"setup"}  # tags of the cells whose code no page shows (what they print stays)
TABLE_RULE = re.compile(r"^\|(?: *:?-+:? *\|)+$", re.MULTILINE)  # a Markdown table's |---|---| line
SHORTEST = 12  # characters: a shorter line of a hidden cell may well be on the page for another reason

if os.environ.get("SITE_TEST") != "1":
    pytest.skip("the website in Chromium: `make site-test` runs it", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (requirements-dev.txt has it)")
from conftest import chromium  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# What a page shows, once its images and fonts have loaded (an async script: the last argument is its callback).
INSPECT = """const done = arguments[arguments.length - 1];
(async () => {
  for (const img of document.images) {
    img.loading = 'eager';
    if (!img.complete) await new Promise(r => { img.onload = img.onerror = r; setTimeout(r, 10000); });
  }
  await document.fonts.ready;
  const q = s => document.querySelector(s);
  let quoteWidth = null;  // a curly quote's width in ems, between two Han characters of a paragraph of the article
  if (q('article') && document.body.textContent.includes('\u201c')) {
    const p = q('article').appendChild(document.createElement('p'));
    p.innerHTML = '\u4e2d<span>\u201c</span>\u4e2d';  // 中“中: no neighbouring punctuation to trim its spacing
    quoteWidth = p.firstElementChild.getBoundingClientRect().width / parseFloat(getComputedStyle(p).fontSize);
    p.remove();
  }
  done({
    lang: document.documentElement.lang,
    brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src')),
    resources: performance.getEntriesByType('resource').map(e => e.name),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    colab: q('a.site-colab')?.href, kaggle: q('a.site-kaggle')?.href, download: q('a.site-download')?.href,
    switch: q('a.site-lang-switch')?.href,
    shown: document.body.innerText, text: document.body.textContent,
    cjkFont: [...document.fonts].filter(f => f.family.includes('Site CJK') && f.status === 'loaded').length,
    quoteWidth,
    italicCode: [...document.querySelectorAll('.highlight span')].filter(
      s => getComputedStyle(s).fontStyle === 'italic').length,
    optional: !!q('.site-optional'), goingFurther: !!q('section.going-further'),
  });
})();"""
# Every fold opened as a reader does, by a click on its summary; then the text the page shows.
UNFOLD = """document.querySelectorAll('details:not([open]) > summary').forEach(s => s.click());
return document.body.innerText;"""


class QuietHandler(SimpleHTTPRequestHandler):
    """A static file server that keeps its log to itself."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".woff2": "font/woff2"}

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve `folder` on a free loopback port; yield its address, ending in '/'."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site() -> Path:
    """The site `make site` built; built now when there is none."""
    if not (SITE / "index.html").is_file():
        subprocess.run(["make", "site"], cwd=REPO, check=True)
    return SITE


@pytest.fixture(scope="module")
def base(site) -> Iterator[str]:
    """The site's address on a loopback port."""
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium, keeping the console's messages; a skip that says why it cannot."""
    yield from chromium(tmp_path_factory.mktemp("chromium"), width=1280, console=True)


@functools.cache
def fetch(url: str) -> tuple[int, bytes]:
    """The HTTP status and body of `url` (on the loopback server)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


def link_problem(url: str) -> str | None:
    """What is wrong with an internal link: its file is not there, or its anchor is on no element of the page."""
    page, _, anchor = url.partition("#")
    status, body = fetch(page.partition("?")[0])
    if status != 200:
        return f"link to {url}: HTTP {status}"
    if anchor and f'id="{unquote(anchor)}"' not in body.decode("utf-8", "replace"):
        return f"link to {url}: no element with id {unquote(anchor)!r} there"
    return None


def _words(text: str) -> str:
    """`text` with each run of white space one space."""
    return " ".join(text.split())


def _outputs(cell: dict) -> str:
    """The text of a cell's outputs."""
    texts = [output.get("text", "") for output in cell.get("outputs", [])]
    for output in cell.get("outputs", []):
        texts += [output.get("data", {}).get(mime, "") for mime in ("text/plain", "text/markdown", "text/html")]
    return "\n".join(t if isinstance(t, str) else "".join(t) for t in texts)


def _table_sources(notebook: Path) -> str:
    """The notebook's Markdown, from its Markdown cells and its Markdown outputs (the benchmarks' tables)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    texts += [
        "".join(o["data"]["text/markdown"])
        for c in cells
        for o in c.get("outputs", [])
        if "text/markdown" in o.get("data", {})
    ]
    return "\n".join(texts)


def _folded_code(cell: dict) -> str:
    """The code of a solution: a code cell's, less Colab's title line (the fold shows it), or a Markdown cell's
    ```python blocks (inside its <details>)."""
    source = "".join(cell["source"])
    if cell["cell_type"] == "code":
        return "\n".join(line for line in source.splitlines() if not line.startswith("# @title"))
    return "\n".join(re.findall(r"^```python\n(.*?)^```", source, re.MULTILINE | re.DOTALL))


def hidden_lines(notebook: Path) -> dict[str, list[str]]:
    """Lines of a notebook's cells that its page must not show, found by the cells' tags: "removed" (the set-up,
    parameters and machinery cells: not on the page at all), "answers" (the outputs of a solution's code: not on the
    page at all), "folded" (a solution's code: only after a click). Each is long enough, and in no other text that
    the page may hold where it is looked for."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    tags = [set(cell["metadata"].get("tags", [])) for cell in cells]
    removed = [i for i, t in enumerate(tags) if REMOVED & t]
    code_hidden = [i for i, t in enumerate(tags) if CODE_HIDDEN & t]
    solutions = [i for i, t in enumerate(tags) if "solution" in t and i not in removed]
    shown = [i for i in range(len(cells)) if i not in removed + solutions]
    source = lambda i: "".join(cells[i]["source"])
    both = lambda i: source(i) + "\n" + _outputs(cells[i])
    visible = lambda i: _outputs(cells[i]) if i in code_hidden else both(i)
    found = {  # kind: (its text, the text that the page may show where that kind is looked for)
        "removed": ([*map(both, removed), *map(source, code_hidden)], map(visible, shown + solutions)),
        "answers": ([_outputs(cells[i]) for i in solutions], [*map(source, solutions), *map(both, shown)]),
        "folded": ([_folded_code(cells[i]) for i in solutions], map(both, shown)),
    }
    lines = {}
    for kind, (hidden, elsewhere) in found.items():
        other = _words("\n".join(elsewhere))
        candidates = map(_words, "\n".join(hidden).splitlines())
        lines[kind] = [line for line in candidates if len(line) >= SHORTEST and line not in other]
    return lines


def expected_launch(lang: str, name: str) -> dict[str, str]:
    """The notebook's own addresses: its Colab badge's, from fetch_series.py's GITHUB and BRANCH."""
    path = f"notebooks/{EDITIONS[lang][0]}{name}.ipynb"
    return {
        "colab": f"https://colab.research.google.com/github/{GITHUB}/blob/{BRANCH}/{path}",
        "kaggle": f"https://kaggle.com/kernels/welcome?src=https://github.com/{GITHUB}/blob/{BRANCH}/{path}",
    }


def page_problems(browser, base: str, lang: str, page: str) -> list[str]:
    """Everything wrong with one page of the site served at `base`, as a reader would meet it."""
    prefix, _, html_lang = EDITIONS[lang]
    other_lang = "zh" if lang == "en" else "en"
    browser.get_log("browser")  # what earlier pages logged
    browser.get(f"{base}{prefix}{page}.html")
    seen = browser.execute_async_script(INSPECT)
    problems = [f"console: {e['message']}" for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    problems += [f"loaded from another host: {url}" for url in seen["resources"] if not url.startswith(base)]
    problems += [f"image does not load: {src}" for src in seen["brokenImages"]]
    problems += [p for url in seen["links"] if url.startswith(base) for p in [link_problem(url)] if p]
    if seen["lang"] != html_lang:
        problems.append(f'<html lang="{seen["lang"]}">, not {html_lang}')
    counterpart = f"{base}{EDITIONS[other_lang][0]}{page}.html"
    if seen["switch"] != counterpart:
        problems.append(f"language switch goes to {seen['switch']}, not {counterpart}")
    elif f'lang="{EDITIONS[other_lang][2]}"' not in fetch(counterpart)[1].decode():
        problems.append(f"language switch goes to {counterpart}, which is not in the other language")
    if lang == "zh":
        problems += [] if seen["cjkFont"] else ["the CJK webfont did not load"]
        problems += [f"{seen['italicCode']} italic spans in code"] if seen["italicCode"] else []
        if seen["quoteWidth"] is not None and seen["quoteWidth"] < 0.9:
            problems.append(f"a curly quote is {seen['quoteWidth']:.2f} em wide: not drawn by the CJK font")
    if page in NAMES:
        problems += notebook_problems(browser, base, lang, page, seen)
    if problems:
        SHOTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(SHOTS / f"{lang}-{page}.png")
    return problems


def notebook_problems(browser, base: str, lang: str, name: str, seen: dict) -> list[str]:
    """What is wrong with a notebook's page: its launch buttons, and what it shows of the cells that it hides."""
    notebook = EDITIONS[lang][1] / f"{name}.ipynb"
    problems = []
    for button, url in expected_launch(lang, name).items():
        if seen[button] != url:
            problems.append(f"{button} button goes to {seen[button]}, not {url}")
    badge = re.search(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)", notebook.read_text("utf-8"))
    if not badge or badge[1] != expected_launch(lang, name)["colab"]:
        problems.append(f"the notebook's own Colab badge, {badge and badge[1]}, is not the page's Colab button")
    if not seen["download"] or fetch(seen["download"])[1] != notebook.read_bytes():
        problems.append(f"download button {seen['download']} does not give {notebook.relative_to(REPO)}")
    hidden = hidden_lines(notebook)
    shown, text = _words(seen["shown"]), _words(seen["text"])
    problems += [f"set-up or parameters on the page: {line!r}" for line in hidden["removed"] if line in text]
    tables = len(TABLE_RULE.findall(_table_sources(notebook)))
    if fetch(f"{base}{EDITIONS[lang][0]}{name}.html")[1].decode().count("<table") < tables:
        problems.append(f"fewer tables on the page than the notebook's {tables} (a Markdown table left as text)")
    problems += [f"a solution's answer on the page: {line!r}" for line in hidden["answers"] if line in text]
    problems += [f"a solution shown without a click: {line!r}" for line in hidden["folded"] if line in shown]
    unfolded = _words(browser.execute_script(UNFOLD))
    problems += [f"a solution not shown after a click: {line!r}" for line in hidden["folded"] if line not in unfolded]
    number = int(name[:2])
    if number >= 7 and not seen["optional"]:
        problems.append("not marked optional (07-11 are)")
    if 2 <= number <= 6 and not seen["goingFurther"]:
        problems.append("no section marked as Going further (02-06 have one)")
    return problems


@pytest.mark.parametrize("lang", EDITIONS)
@pytest.mark.parametrize("page", PAGES)
def test_page(browser, base, lang, page):
    """Every page of both editions, as a reader meets it."""
    problems = page_problems(browser, base, lang, page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("lang", "query"), [("en", "DataLoader"), ("zh", "数据加载器")])
def test_search_lists_notebook_02(browser, base, lang, query):
    """Sphinx's search, from the static files: the query must list notebook 02 of that edition."""
    prefix = EDITIONS[lang][0]
    browser.get_log("browser")
    browser.get(f"{base}{prefix}search.html?q={quote(query)}")
    summary = "return document.querySelector('#search-results .search-summary')?.innerText"
    WebDriverWait(browser, 60, 0.2).until(lambda b: b.execute_script(summary), f"no search results for {query}")
    found = browser.execute_script("return [...document.querySelectorAll('#search-results li a')].map(a => a.href)")
    console = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert console == []
    assert f"{base}{prefix}02_data_loading.html" in [url.partition("?")[0].partition("#")[0] for url in found], found


# The first solution's fold: a code solution's (myst-nb's cell tagged solution), or a Markdown one's (make_site.py
# gives its <details> the class solution).
SOLUTION_FOLD = r'(tag_solution.*?<details|<details class="solution")'
# Defects planted in a copy of the site, each on one page: how, and what the checks must say about it.
PLANTED = {
    ("en", "03_model"): (lambda html: html.replace('src="_images/', 'src="_images/planted-missing-', 1), "image"),
    ("zh", "05_training"): (
        lambda html: re.sub(SOLUTION_FOLD, r"\1 open", html, count=1, flags=re.DOTALL),
        "a solution shown without a click",
    ),
    ("en", "04_device_transfer"): (
        lambda html: html.replace('"zh/04_device_transfer.html"', '"zh/05_training.html"'),
        "language switch goes to",
    ),
}


@pytest.fixture(scope="module")
def planted_base(site, tmp_path_factory) -> Iterator[str]:
    """A copy of the site with the PLANTED defects, served."""
    copy = tmp_path_factory.mktemp("planted") / "site"
    shutil.copytree(site, copy)
    for (lang, page), (plant, _) in PLANTED.items():
        path = copy / f"{EDITIONS[lang][0]}{page}.html"
        html = path.read_text(encoding="utf-8")
        assert plant(html) != html, f"nothing to plant a defect in, in {path.relative_to(copy)}"
        path.write_text(plant(html), encoding="utf-8")
    with serve(copy) as url:
        yield url


@pytest.mark.parametrize(("lang", "page"), PLANTED)
def test_planted_defect_is_reported(browser, planted_base, lang, page):
    """The checks can fail: each defect planted in the copy is reported on its page."""
    problems = page_problems(browser, planted_base, lang, page)
    assert any(PLANTED[lang, page][1] in problem for problem in problems), problems
