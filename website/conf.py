"""Sphinx settings of the series' website, both editions: SITE_LANG (en, zh) picks one. make_site.py runs Sphinx."""

import logging
import os
import sys
from pathlib import Path

from docutils import nodes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_site import EDITIONS, WORK, launch_urls, notebook_names, other  # noqa: E402

edition = EDITIONS[os.environ.get("SITE_LANG", "en")]
NOTEBOOKS = set(notebook_names())

project = html_title = edition.readme.read_text(encoding="utf-8").splitlines()[0].lstrip("# ")
author = copyright = ""
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
    "footer_content_items": [],
}
if edition.lang == "zh":
    import jieba

    jieba.setLogLevel(logging.WARNING)  # not its "Building prefix dict" lines on every build
    html_search_options = {"dict": str(WORK / "zh" / "search-words.txt")}


def page_links(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """The language switch of every page, and the launch buttons of a notebook's page, for site-header.html."""
    there = other(edition)
    up = "../" if edition.prefix else ""
    context["site_switch"] = {
        "href": f"{up}{there.prefix}{pagename}.html",
        "label": there.name,
        "title": there.words["switch"],
        "lang": there.sphinx_language.replace("_", "-"),
    }
    if pagename in NOTEBOOKS:
        context["site_launch"] = launch_urls(edition, pagename)
    context["site_words"] = edition.words


def mark_going_further(app, doctree, docname: str) -> None:
    """Give the section labelled going-further-NN the class going-further, for site.css."""
    for section in doctree.findall(nodes.section):
        if any(i.startswith("going-further-") for i in section["ids"]):
            section["classes"].append("going-further")


def setup(app) -> None:
    """Connect the site's two hooks."""
    app.connect("html-page-context", page_links)
    app.connect("doctree-resolved", mark_going_further)
