"""Sphinx settings of the series' website, both editions: SITE_LANG (en, zh) picks one. make_site.py runs Sphinx."""

import json
import logging
import os
import re
import sys
from pathlib import Path

from docutils import nodes
from sphinx.util import logging as sphinx_logging

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_site import (  # noqa: E402
    DOCUMENTATION,
    EDITIONS,
    ISSUES,
    REPOSITORY,
    SHORT,
    VERSION,
    WORK,
    launch_ref,
    launch_urls,
    notebook_names,
    project_title,
)

edition = EDITIONS[os.environ.get("SITE_LANG", "en")]
NOTEBOOKS = set(notebook_names())
logger = sphinx_logging.getLogger(__name__)
FIGURE = re.compile(r'<img alt="[^"]*" src="(?P<src>_images/[0-9a-f]+\.png)" />')  # a figure of a notebook's output

project = html_title = project_title(edition)
author = copyright = ""
version = release = VERSION
language = edition.sphinx_language
extensions = ["myst_nb"]
exclude_patterns = ["_extra"]
templates_path = ["_templates"]

nb_execution_mode = "off"  # the committed outputs, as they are
nb_merge_streams = True  # one block for a cell's printed lines, as Jupyter shows them
nb_render_markdown_format = "gfm"  # Markdown outputs (the benchmarks' tables) with tables, as Jupyter shows them
nb_ipywidgets_js = {}  # widget outputs would load their scripts from a CDN; the series saves none

html_theme = "sphinx_book_theme"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_js_files = ["site.js"]
html_extra_path = [str(WORK / edition.lang / "src" / "_extra")]  # the committed notebooks, to download
html_copy_source = False
html_show_sourcelink = False
html_use_index = False
html_domain_indices = False
html_permalinks_icon = "#"
html_favicon = "favicon.svg"
html_context = {"default_mode": "auto"}  # light or dark as the reader's system is (the theme logs an error without)
html_theme_options = {
    "home_page_in_toc": False,  # the title above the table of contents leads home
    "use_download_button": False,
    "use_fullscreen_button": False,
    "show_toc_level": 2,
    "navbar_persistent": [],  # no header bar above the book's: its search is in the sidebar
    "article_header_end": ["site-header.html", "article-header-buttons.html"],
    "footer_content_items": ["site-footer.html"],
}
if edition.lang == "zh":
    import jieba

    jieba.setLogLevel(logging.WARNING)  # not its "Building prefix dict" lines on every build
    html_search_options = {"dict": str(WORK / "zh" / "search-words.txt")}


def alternates(pagename: str) -> str:
    """<link rel="alternate"> to the page in each edition, and x-default (English): the published addresses."""
    address = lambda e: f"{DOCUMENTATION}{e.prefix}{'' if pagename == 'index' else pagename + '.html'}"
    links = [(e.hreflang, address(e)) for e in EDITIONS.values()] + [("x-default", address(EDITIONS["en"]))]
    return "".join(f'<link rel="alternate" hreflang="{lang}" href="{href}" />\n' for lang, href in links)


def page_links(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Every page's language switch, alternate links, footer and zoomable figures; a notebook's launch buttons."""
    there = EDITIONS["zh" if edition.lang == "en" else "en"]
    up = "../" if edition.prefix else ""
    context["site_switch"] = {
        "href": f"{up}{there.prefix}{pagename}.html",
        "label": there.name,
        "title": there.words["switch"],
        "lang": there.hreflang,
    }
    if pagename in NOTEBOOKS:
        context["site_launch"] = launch_urls(edition, pagename)
        # each button's name in three parts, its SHORT word in the middle: a phone shows that word alone
        context["site_labels"] = {key: edition.words[key].partition(word) for key, word in SHORT.items()}
    context["site_words"] = edition.words
    context["site_footer"] = {"version": VERSION, "ref": launch_ref(), "repository": REPOSITORY, "issues": ISSUES}
    context["metatags"] = context.get("metatags", "") + alternates(pagename)
    if "body" in context:  # the fold's accessible name is its visible title (WCAG 2.5.3)
        context["body"] = context["body"].replace('<summary aria-label="Toggle hidden content">', "<summary>")
        # each figure opens its own file at full size, by a tap or the keyboard: a phone shrinks a wide diagram
        zoom = f'<span class="site-zoom">{edition.words["zoom"]}</span>'
        context["body"] = FIGURE.sub(
            lambda m: f'<a class="site-figure" href="{m["src"]}">{m[0]}{zoom}</a>', context["body"]
        )


def name_sections(app, doctree) -> None:
    """Give each section make_site.py's anchors, the same in both editions (not docutils' id1 for a Chinese heading)."""
    docname = app.env.docname
    anchors = json.loads((WORK / edition.lang / "anchors.json").read_text(encoding="utf-8")).get(docname)
    sections = list(doctree.findall(nodes.section))
    if anchors is None or len(anchors) != len(sections):
        logger.warning(
            f"{docname}: {len(sections)} sections, but make_site.py found {anchors and len(anchors)} "
            "headings: its headings() reads them otherwise than MyST does"
        )
        return
    for section, ids in zip(sections, anchors):
        section["ids"] = ids  # ids, not labels: Sphinx wants a label unique across the site
        if any(i.startswith("going-further-") for i in ids):
            section["classes"].append("going-further")  # for site.css


def setup(app) -> None:
    """Connect the site's hooks."""
    app.connect("html-page-context", page_links)
    app.connect("doctree-read", name_sections, priority=100)  # before Sphinx's collectors (500) read the doctree
