"""The report of an executed series: each notebook rendered to HTML, and index.html with its results and figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from . import pages
from .results import format_value
from .translation import LANGUAGES

if TYPE_CHECKING:
    from nbconvert import HTMLExporter  # imported where a report is written: nbconvert is slow to import

TEMPLATE = Path(__file__).with_name("report.html.j2")  # a Jinja template, autoescaped


def html_exporter(lang: str = "en") -> HTMLExporter:
    """The exporter for pages in `lang`: `<html lang=...>` lets a browser pick the right glyphs (zh, not ja)."""
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(language_code=lang)
    remove = TagRemovePreprocessor(remove_input_tags={"setup"}, remove_cell_tags={"metrics"})
    exporter.register_preprocessor(remove, enabled=True)
    return exporter


UPRIGHT_COMMENTS = "<style>.highlight [class^=c] { font-style: normal }</style>\n"  # Pygments' comment classes


def render(exporter: HTMLExporter, notebook: Path, page: Path) -> None:
    """Render one notebook to an HTML page with `exporter`, making the page's folder.

    Code comments show in italics; in a Chinese page they are Chinese, which has no italics (a browser slants
    the glyphs), so there they stand upright.
    """
    html, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    if exporter.language_code != "en":
        html = html.replace("</head>", UPRIGHT_COMMENTS + "</head>", 1)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(html, encoding="utf-8")


def render_pages(out: Path, summary: list[dict], langs: list[str]) -> None:
    """Render each executed notebook in `out` to out/html/, and its translations to out/<lang>/html/."""
    exporters = {lang: html_exporter(lang) for lang in ["en", *langs]}
    for row in summary:
        stem = row["stem"]
        render(exporters["en"], out / f"{stem}.ipynb", out / "html" / f"{stem}.html")
        for lang in row["languages"]:
            render(exporters[lang], out / lang / f"{stem}.ipynb", out / lang / "html" / f"{stem}.html")


def write_report(
    out: Path, summary: list[dict], metrics: dict, parameters: dict, langs: list[str] | None = None
) -> Path:
    """Write out/index.html: each notebook rendered (translations in out/<lang>/html/) and linked, numbers, figures.

    Each row of `summary` lists in "languages" those it was translated into (by default all of `langs`). The
    device shown is the one the notebooks recorded using, never the parameter asked for; none if none recorded one.
    """
    import jinja2

    langs = langs or []
    summary = [{"languages": langs} | row for row in summary]
    render_pages(out, summary, langs)
    environment = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters["format_value"] = format_value
    page = environment.from_string(TEMPLATE.read_text(encoding="utf-8")).render(
        run=out.name,
        device=next((m["device"] for m in metrics.values() if m.get("device")), None),
        described=next((m["device_description"] for m in metrics.values() if m.get("device_description")), ""),
        total=sum(row["seconds"] for row in summary),
        parameters=json.dumps(parameters),
        languages={lang: LANGUAGES[lang] for lang in langs},
        notebooks=[
            row | {"title": pages.title(pages.NOTEBOOKS / f"{row['stem']}.ipynb"), "metrics": metrics[row["stem"]]}
            for row in summary
        ],
    )
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
