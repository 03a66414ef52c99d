"""`make site`: the series as a website, English in site/ and Chinese in site/zh/, from the committed notebooks and
their stored outputs. Nothing is executed and nothing is fetched.

Each edition is a Sphinx project (myst-nb reads the notebooks, sphinx-book-theme lays them out, website/conf.py
configures both) written into runs/site-build/<lang>/src: a home page made from the edition's README, a copy of every
notebook with its tags mapped to myst-nb's (see page_notebook), and the committed notebooks to download. The two
editions build side by side, one process each; then each gets a CJK webfont cut down to the characters its pages use.

    python website/make_site.py        # what `make site` runs: builds site/, prints its time and size
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import fonts
import nbformat

WEBSITE = Path(__file__).resolve().parent
REPO = WEBSITE.parent
sys.path.insert(0, str(REPO / "notebooks"))
from fetch_series import BRANCH, GITHUB  # noqa: E402  (the repository's address: its one definition)

SITE = REPO / "site"
WORK = REPO / "runs" / "site-build"
BADGE_URL = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = "colab-badge.svg"  # the site's own drawing of that badge (website/colab-badge.svg)
REMOVED = {"parameters", "machinery", "nav", "injected-parameters"}  # tags of cells no page shows
OUTPUT_ONLY = {"setup"}  # a page shows what the set-up cell printed (the device, the data), not its code
ADVANCED_FROM = 7  # the README: "Notebooks 07 to 11 are advanced"
TITLE = re.compile(r"^# @title (?P<title>.*?)(?:\s*\{[^}]*\})?\s*$")  # Colab's title line of a folded cell
LINK = re.compile(r"(?P<open>!?\[[^\]]*\]\()(?P<target>[^()\s]+)\)")


@dataclass(frozen=True)
class Edition:
    """One language of the site."""

    lang: str  # "en" or "zh": SITE_LANG for conf.py, and the edition's folder under runs/site-build/
    sphinx_language: str  # Sphinx's messages and search, and <html lang>: "zh_CN" gives lang="zh-CN"
    name: str  # the language's own name, on the other edition's language switch
    notebooks: Path  # the committed notebooks of this edition
    readme: Path  # the home page's source
    prefix: str  # where the edition lives in site/
    words: dict[str, str] = field(default_factory=dict)  # the site's own words
    dropped: tuple[str, ...] = ()  # README sections (## headings) for translators, not for a reader of the site


EDITIONS = {
    "en": Edition(
        lang="en",
        sphinx_language="en",
        name="English",
        notebooks=REPO / "notebooks",
        readme=REPO / "README.md",
        prefix="",
        words={
            "colab": "Open in Colab",
            "kaggle": "Open in Kaggle",
            "download": "Download .ipynb",
            "lesson": "The lesson",
            "advanced": "Advanced (optional)",
            "optional": "Optional · advanced",
            "switch": "Read this page in English",  # the language switch's title, on the other edition's pages
        },
    ),
    "zh": Edition(
        lang="zh",
        sphinx_language="zh_CN",
        name="简体中文",
        notebooks=REPO / "notebooks" / "zh",
        readme=REPO / "notebooks" / "zh" / "README.md",
        prefix="zh/",
        words={
            "colab": "在 Colab 中打开",
            "kaggle": "在 Kaggle 中打开",
            "download": "下载 .ipynb",
            "lesson": "课程",
            "advanced": "进阶（选读）",
            "optional": "选读 · 进阶内容",
            "switch": "阅读本页的中文版",
            "open": "打开",  # the notebooks table's two more columns
            "time": "时间",
        },
        dropped=("渲染成网页", "译文是如何生成的"),
    ),
}


def other(edition: Edition) -> Edition:
    """The edition in the other language."""
    return EDITIONS["zh" if edition.lang == "en" else "en"]


def notebook_names() -> list[str]:
    """The series' notebooks in order, by stem ("03_model")."""
    return sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def github_url(path: str) -> str:
    """A file of the repository on GitHub, at the branch the notebooks' badges point at."""
    return f"https://github.com/{GITHUB}/blob/{BRANCH}/{path}"


def launch_urls(edition: Edition, name: str) -> dict[str, str]:
    """Where notebook `name` of `edition` opens: Colab and Kaggle (as its badge), and its download in the site."""
    path = f"{edition.notebooks.relative_to(REPO).as_posix()}/{name}.ipynb"
    return {
        "colab": f"https://colab.research.google.com/github/{GITHUB}/blob/{BRANCH}/{path}",
        "kaggle": f"https://kaggle.com/kernels/welcome?src={github_url(path)}",
        "download": f"notebooks/{name}.ipynb",
    }


def rewrite_links(markdown: str, folder: Path, edition: Edition) -> str:
    """Markdown written in `folder` of the repository, with links that work in the site.

    A link to one of the edition's notebooks stays a link to that notebook (myst makes it the page); any other
    relative link goes to the file on GitHub; the Colab badge image becomes the site's own copy.
    """

    def link(match: re.Match) -> str:
        target = match["target"]
        if target == BADGE_URL:
            return f"{match['open']}{BADGE})"
        if re.match(r"[a-z]+:|#", target):
            return match[0]
        path, _, anchor = target.partition("#")
        file = (folder / path).resolve()
        if file.parent == edition.notebooks and file.suffix == ".ipynb":
            target = file.name + (f"#{anchor}" if anchor else "")
        else:
            target = github_url(file.relative_to(REPO).as_posix()) + (f"#{anchor}" if anchor else "")
        return f"{match['open']}{target})"

    return LINK.sub(link, markdown)


def folded_title(cell: nbformat.NotebookNode) -> str | None:
    """The Colab title of a folded code cell, taken off its source (the page shows it on the fold instead)."""
    first, _, rest = cell.source.partition("\n")
    match = TITLE.match(first)
    if not match:
        return None
    cell.source = rest
    return match["title"].replace("`", "")


def going_further_ids(english: nbformat.NotebookNode) -> set[str]:
    """Ids of the cells that open the "Going further" part of a notebook (02-06), tagged `going-further`."""
    return {c.id for c in english.cells if "going-further" in c.metadata.get("tags", [])}


def page_notebook(path: Path, edition: Edition, english: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of the notebook at `path` for its page: its tags mapped to myst-nb's, its links to the site's pages.

    parameters, machinery and nav cells go; the set-up cell's code goes and what it printed stays; a solution's
    code is folded and its outputs (the answer) go; a recap's code is folded; a Markdown solution (<details>) stays
    as written, closed, with the class `solution`. The heading of "Going further" gets the label
    `going-further-<number>`, which conf.py makes a class of its section.
    """
    nb = copy.deepcopy(nbformat.read(path, as_version=4))
    further = going_further_ids(english)
    for cell in nb.cells:
        tags = list(cell.metadata.get("tags", []))
        if REMOVED & set(tags):
            tags.append("remove-cell")
        elif OUTPUT_ONLY & set(tags):
            tags.append("remove-input")
        elif cell.cell_type == "code" and {"solution", "recap"} & set(tags):
            tags += ["hide-input", "remove-output"] if "solution" in tags else ["hide-input"]
            title = folded_title(cell)
            if title:
                cell.metadata["mystnb"] = {"code_prompt_show": title, "code_prompt_hide": title}
        if cell.cell_type == "markdown":
            cell.source = rewrite_links(cell.source, path.parent, edition)
            if "solution" in tags:  # <details><summary>Solution 1: …</summary>, closed: styled as the code folds
                cell.source = cell.source.replace("<details>", '<details class="solution">')
            if cell.id in further:
                label = f"(going-further-{path.stem[:2]})=\n"
                cell.source = re.sub(r"^(?=## )", "\n" + label, cell.source, count=1, flags=re.MULTILINE)
        cell.metadata["tags"] = tags
    if int(path.stem[:2]) >= ADVANCED_FROM:
        first = nb.cells[0]
        title, _, rest = first.source.partition("\n")
        badge = f'<p class="site-optional">{edition.words["optional"]}</p>'
        first.source = f"{title}\n{badge}\n\n{rest}"
    return nb


def _sections(markdown: str) -> list[tuple[str, str]]:
    """A README as (## heading, its text) pairs; the text before the first ## heading comes with heading ""."""
    parts = re.split(r"^(## .*)$", markdown, flags=re.MULTILINE)
    return [("", parts[0])] + [(parts[i][3:].strip(), parts[i] + parts[i + 1]) for i in range(1, len(parts), 2)]


def _row(line: str) -> list[str]:
    """The cells of a line of a Markdown table; [] for a line that is not one."""
    return [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []


def _table_rows(markdown: str) -> dict[str, list[str]]:
    """The rows of the notebooks table of a README, by number ("03"): each row's cells."""
    rows = [_row(line) for line in markdown.splitlines()]
    return {cells[0]: cells for cells in rows if cells and re.fullmatch(r"\d\d", cells[0])}


def zh_time(english: str) -> str:
    """A row's time from the English README's table, in Chinese."""
    lesson = re.fullmatch(r"(\d+) min lesson · (\d+) min in all", english)
    if lesson:
        return f"课程 {lesson[1]} 分钟 · 共 {lesson[2]} 分钟"
    alone = re.fullmatch(r"(\d+) min", english)
    if not alone:
        raise ValueError(f"README.md's table has a time zh_time cannot say in Chinese: {english!r}")
    return f"{alone[1]} 分钟"


def _zh_table(section: str) -> str:
    """The Chinese README's notebooks section, its table with two more columns from the English README's table: the
    Colab badge, and the time in Chinese."""
    english = _table_rows(EDITIONS["en"].readme.read_text(encoding="utf-8"))
    words = EDITIONS["zh"].words
    lines = []
    for line in section.splitlines():
        cells = _row(line)
        if cells[:1] == ["#"]:
            cells = [*cells[:2], words["open"], *cells[2:], words["time"]]
        elif cells and set(cells[0]) == {"-"}:
            cells = ["---"] * (len(cells) + 2)
        elif cells and cells[0] in english:
            name = re.search(r"\]\(([^)]+)\.ipynb\)", cells[1])[1]
            badge = f"[![Open In Colab]({BADGE_URL})]({launch_urls(EDITIONS['zh'], name)['colab']})"
            cells = [*cells[:2], badge, *cells[2:], zh_time(english[cells[0]][-1])]
        lines.append(f"| {' | '.join(cells)} |" if cells else line)
    return "\n".join(lines) + "\n"


def home_page(edition: Edition) -> str:
    """The home page: the edition's README (less its translators' sections), with the site's table of contents."""
    text = edition.readme.read_text(encoding="utf-8")
    text = re.sub(r"^(English|\[English\]).*(简体中文).*\n", "", text, count=1, flags=re.MULTILINE)  # the switch
    sections = [(heading, body) for heading, body in _sections(text) if heading not in edition.dropped]
    if edition.lang == "zh":
        sections = [(h, _zh_table(body) if "| # |" in body else body) for h, body in sections]
    page = rewrite_links("".join(body for _, body in sections), edition.readme.parent, edition)
    names = notebook_names()
    lesson = [n for n in names if int(n[:2]) < ADVANCED_FROM]
    advanced = [n for n in names if int(n[:2]) >= ADVANCED_FROM]
    for caption, group in ((edition.words["lesson"], lesson), (edition.words["advanced"], advanced)):
        page += f"\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n" + "\n".join(group) + "\n```\n"
    return page


def search_dictionary(path: Path) -> None:
    """Write jieba's extra words for the Chinese search: the glossary's terms (notebooks/zh/README.md, 术语表).

    jieba's own dictionary splits some of them (数据加载器 into 数据 / 加载 / 器); the glossary is the one list
    of the terms a reader looks up.
    """
    glossary = EDITIONS["zh"].readme.read_text(encoding="utf-8").split("## 术语表", 1)[1]
    chinese = [row[1] for row in map(_row, glossary.splitlines()) if len(row) > 1]  # the 译名 column
    terms = {term.strip() for cell in chinese for term in re.split(r"[、，]", cell)}
    words = sorted(term for term in terms if re.fullmatch(r"[\u4e00-\u9fff]{2,}", term))
    path.write_text("".join(f"{word}\n" for word in words), encoding="utf-8")


def write_sources(edition: Edition) -> Path:
    """Write the Sphinx project of `edition` into runs/site-build/<lang>/src; return that folder."""
    src = WORK / edition.lang / "src"
    shutil.rmtree(src.parent, ignore_errors=True)
    (src / "_extra" / "notebooks").mkdir(parents=True)
    shutil.copy(WEBSITE / BADGE, src / BADGE)
    (src / "index.md").write_text(home_page(edition), encoding="utf-8")
    for name in notebook_names():
        path = edition.notebooks / f"{name}.ipynb"
        english = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
        nbformat.write(page_notebook(path, edition, english), src / f"{name}.ipynb")
        shutil.copy(path, src / "_extra" / "notebooks" / path.name)  # the download: the notebook as committed
    if edition.lang == "zh":
        search_dictionary(src.parent / "search-words.txt")
    return src


def sphinx(edition: Edition, src: Path) -> subprocess.Popen:
    """Start Sphinx on `src`: HTML into runs/site-build/<lang>/html, any warning an error."""
    out = src.parent
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-c", str(WEBSITE)]
    command += ["-d", str(out / "doctrees"), str(src), str(out / "html")]
    env = os.environ | {"SITE_LANG": edition.lang}
    return subprocess.Popen(command, env=env)


def prune(html: Path) -> None:
    """Take out of a built edition what no reader's browser asks for: Sphinx's build records, the theme's message
    catalogues (used at build time) and its source maps, with the lines that name them."""
    for leftover in (".buildinfo", "objects.inv", "_sources", "_static/locales"):
        if (html / leftover).is_dir():
            shutil.rmtree(html / leftover)
        else:
            (html / leftover).unlink(missing_ok=True)
    for source_map in html.glob("_static/**/*.map"):
        source_map.unlink()
        minified = source_map.with_suffix("")
        if minified.is_file():
            text = minified.read_text(encoding="utf-8")
            minified.write_text(re.sub(r"\n?(//|/\*)# sourceMappingURL=\S+(\*/)?", "", text), encoding="utf-8")


def main() -> None:
    """Build both editions into site/; print the time it took and the site's size."""
    start = time.monotonic()
    source = fonts.font_source()  # before anything else: without the font, no site
    builds = [(edition, sphinx(edition, write_sources(edition))) for edition in EDITIONS.values()]
    failed = [edition.lang for edition, build in builds if build.wait() != 0]
    if failed:
        raise SystemExit(f"make site: Sphinx failed for {', '.join(failed)} (its messages are above)")
    shutil.rmtree(SITE, ignore_errors=True)
    for edition in EDITIONS.values():
        html = WORK / edition.lang / "html"
        prune(html)
        fonts.subset(source, html)
        shutil.copytree(html, SITE / edition.prefix, dirs_exist_ok=True)
    (SITE / ".nojekyll").touch()  # GitHub Pages: serve _static/ and _images/ as they are
    size = sum(f.stat().st_size for f in SITE.rglob("*") if f.is_file())
    print(f"make site: {SITE.relative_to(REPO)}/ in {time.monotonic() - start:.0f} s, {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
