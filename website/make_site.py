"""`make site`: the series as a website, English in site/ and Chinese in site/zh/, from the committed notebooks and
their stored outputs, executing and fetching nothing. Each edition is a Sphinx project (myst-nb, sphinx-book-theme,
website/conf.py) written into runs/site-build/<lang>/src, the two built side by side. The version and addresses come
from pyproject.toml; launch buttons open that version's git tag (launch_ref).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:  # imported where used, so that main() can first say which of the site's packages are missing
    import nbformat

SITE_MODULES = ["sphinx", "myst_nb", "sphinx_book_theme", "nbformat", "jieba"]  # requirements-site.txt's, by module
WEBSITE = Path(__file__).resolve().parent
REPO = WEBSITE.parent
SITE = REPO / "site"
WORK = REPO / "runs" / "site-build"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION = PROJECT["version"]
REPOSITORY = PROJECT["urls"]["Repository"].rstrip("/")  # https://github.com/<owner>/<name>
GITHUB = urlparse(REPOSITORY).path.strip("/")  # <owner>/<name>
DOCUMENTATION = PROJECT["urls"]["Documentation"].rstrip("/") + "/"  # the published site (GitHub Pages)
ISSUES = PROJECT["urls"]["Issues"]
BADGE_URL = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = "colab-badge.svg"  # the site's own drawing of that badge (website/colab-badge.svg)
COLAB_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)[ \t]*\n?")  # a notebook title's badge
REMOVED = {"machinery", "nav", "injected-parameters"}  # tags of cells no page shows
ADVANCED_FROM = 7  # the README: "Notebooks 07 to 11 are advanced"
TITLE = re.compile(r"^# @title (?P<title>.*?)(?:\s*\{[^}]*\})?\s*$")  # Colab's title line of a folded cell
LINK = re.compile(r"(?P<open>!?\[[^\]]*\]\()(?P<target>[^()\s]+)\)")
HEADING = re.compile(r"^(?P<level>#{1,6})[ \t]+(?P<text>.+?)[ \t]*$")
SHORT = {"colab": "Colab", "kaggle": "Kaggle", "download": ".ipynb"}  # a launch button's word on a phone, both editions
OWN_ANCHORS = {"术语表": "glossary"}  # headings of one edition alone (the Chinese README's glossary): their anchors
# The themes' words that their zh_CN catalogues lack (aria-labels, tooltips, the colour mode's menu), and Sphinx 8.2's
# search message that the catalogue has only in an older form ("page(s)"): put in Chinese by chinese_theme.
THEME_ZH = {
    "Toggle primary sidebar": "显示或隐藏导航栏",
    "Toggle secondary sidebar": "显示或隐藏本页目录",
    "Color mode": "颜色模式",
    "System Settings": "跟随系统",
    "Search...": "搜索……",
    "Main": "主导航",
    "Page": "本页",
}
SEARCH_ZH = {
    "Search finished, found one page matching the search query.": ["搜索完成，找到 ${resultCount} 个匹配的页面。"]
}


class SiteError(Exception):
    """A fault in the site's input or folders, said in one line: what, where, and what to do."""


@dataclass(frozen=True)
class Edition:
    """One language of the site."""

    lang: str  # "en" or "zh": SITE_LANG for conf.py, and the edition's folder under runs/site-build/
    sphinx_language: str  # Sphinx's messages and search, and <html lang>: "zh_CN" gives lang="zh-CN"
    hreflang: str  # the edition's language tag in links to it
    name: str  # the language's own name, on the other edition's language switch
    notebooks: Path  # the committed notebooks of this edition
    readme: Path  # the home page's source
    prefix: str  # where the edition lives in site/
    words: dict[str, str]  # the site's own words
    dropped: tuple[str, ...]  # README sections (## or ### headings) for maintainers, not for a learner


EDITIONS = {
    "en": Edition(
        lang="en",
        sphinx_language="en",
        hreflang="en",
        name="English",
        notebooks=REPO / "notebooks",
        readme=REPO / "README.md",
        prefix="",
        words={
            "colab": "Open in Colab",  # the launch buttons' names; on a phone each shows only its SHORT word
            "kaggle": "Open in Kaggle",
            "download": "Download .ipynb",
            "lesson": "The lesson",
            "advanced": "Advanced (optional)",
            "optional": "Optional · advanced",
            "switch": "Read this page in English",  # the language switch's title, on the other edition's pages
            "version": "Version",
            "source": "Source code",
            "licence": "Code: MIT licence; text and figures: CC BY 4.0",
            "report": "Report a problem",
            "zoom": "Open full size",  # under a figure on a phone: the figure's own file, at its full size
        },
        dropped=("As a website", "For maintainers"),
    ),
    "zh": Edition(
        lang="zh",
        sphinx_language="zh_CN",
        hreflang="zh-CN",
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
            "version": "版本",
            "source": "源代码",
            "licence": "代码采用 MIT 许可证；文字和图表采用 CC BY 4.0 许可协议",
            "report": "报告问题",
            "zoom": "查看原尺寸图片",
        },
        dropped=("作为网站阅读", "维护者", "渲染成网页", "译文是如何生成的"),
    ),
}


def project_title(edition: Edition) -> str:
    """The site's name in `edition`: its README's title."""
    return edition.readme.read_text(encoding="utf-8").splitlines()[0].lstrip("# ")


def series_notebooks(notebooks: Path = REPO / "notebooks") -> tuple[list[str], list[str]]:
    """The series' notebooks by stem, in order (those with a zh/ translation file and twin), and the strays' files."""
    numbered = sorted(p.stem for p in notebooks.glob("[0-9][0-9]_*.ipynb"))
    series = [n for n in numbered if all((notebooks / "zh" / f"{n}{s}").is_file() for s in (".md", ".ipynb"))]
    return series, [f"{n}.ipynb" for n in numbered if n not in series]


def notebook_names() -> list[str]:
    """The series' notebooks in order, by stem ("03_model")."""
    return series_notebooks()[0]


@functools.cache
def launch_ref(repo: Path = REPO, version: str = VERSION) -> str:
    """The git ref that launch buttons and links to files open: tag v`version` if the repository has it, else main."""
    tag = f"v{version}"
    env = os.environ | {"GIT_CEILING_DIRECTORIES": str(Path(repo).resolve().parent)}  # this repository, no other
    command = ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}"]
    try:
        found = subprocess.run(command, capture_output=True, env=env, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):  # no git: a copy of the files
        found = False
    return tag if found else "main"  # the default branch: a version not yet tagged


def github_url(path: str) -> str:
    """A file of the repository on GitHub, at the site's ref."""
    return f"{REPOSITORY}/blob/{launch_ref()}/{path}"


def launch_urls(edition: Edition, name: str) -> dict[str, str]:
    """Where notebook `name` of `edition` opens: Colab and Kaggle, at the site's ref, and its download in the site."""
    path = f"{edition.notebooks.relative_to(REPO).as_posix()}/{name}.ipynb"
    return {
        "colab": f"https://colab.research.google.com/github/{GITHUB}/blob/{launch_ref()}/{path}",
        "kaggle": f"https://kaggle.com/kernels/welcome?src={github_url(path)}",
        "download": f"notebooks/{name}.ipynb",
    }


def pin(markdown: str) -> str:
    """`markdown` with every address of a file of the repository (GitHub, Colab) at the site's ref, not a branch."""
    return re.sub(
        rf"(github\.com/|colab\.research\.google\.com/github/){re.escape(GITHUB)}/blob/[^/\s)]+/",
        lambda m: f"{m[1]}{GITHUB}/blob/{launch_ref()}/",
        markdown,
    )


def rewrite_links(markdown: str, folder: Path, edition: Edition) -> str:
    """Markdown written in `folder`, linking to the edition's notebooks as pages, to other files on GitHub (pinned)."""

    def link(match: re.Match) -> str:
        target = match["target"]
        if target == BADGE_URL:
            return f"{match['open']}{BADGE})"
        if target.startswith(DOCUMENTATION) and target.endswith(".html"):  # a page of the site: here, its notebook
            return f"{match['open']}{target.removeprefix(DOCUMENTATION).removesuffix('.html')}.ipynb)"
        if re.match(r"[a-z]+:|#", target):
            return match[0]
        path, _, anchor = target.partition("#")
        file = (folder / path).resolve()
        if file.parent == edition.notebooks and file.suffix == ".ipynb":
            target = file.name
        else:
            target = github_url(file.relative_to(REPO).as_posix())
        return f"{match['open']}{target}{'#' + anchor if anchor else ''})"

    return pin(LINK.sub(link, markdown))


def fold(cell: nbformat.NotebookNode, tags: list[str], show_output: bool) -> None:
    """Fold a code cell under its Colab title, taken off its code; drop its outputs unless `show_output`."""
    tags += ["hide-input"] if show_output else ["hide-input", "remove-output"]
    first, _, rest = cell.source.partition("\n")
    if match := TITLE.match(first):
        cell.source = rest
        title = match["title"].replace("`", "")
        prompts = {"code_prompt_show": title, "code_prompt_hide": title}
        cell.metadata["mystnb"] = cell.metadata.get("mystnb", {}) | prompts


def web_settings(source: str) -> str:
    """A settings cell's code for the web: each `# @markdown` line a comment, without Colab's `# @param {...}` marks."""
    lines = [re.sub(r"^(\s*)# @markdown ?", r"\1# ", line) for line in source.splitlines()]
    code = "\n".join(re.sub(r"\s*# @param\b.*$", "", line) for line in lines)
    code = re.sub(r"^(\w+ = .*)\n(?=#)", r"\1\n\n", code, flags=re.MULTILINE)  # a blank line between two settings
    return code + ("\n" if source.endswith("\n") else "")


def plain(markdown: str) -> str:
    """The text a reader sees of a line of Markdown: links as their text, no code marks, emphasis or HTML."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[`*]+|(?<!\w)_+|_+(?!\w)", "", text).strip()  # not the _ inside a name (plot_trace)


def headings(markdown: str) -> list[tuple[int, str]]:
    """The headings of Markdown text, outside code blocks: (level, text as written)."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.append((len(match["level"]), match["text"]))
    return found


def slug(text: str) -> str:
    """The anchor docutils makes of an English heading ("The lesson's `MnistModel`": the-lesson-s-mnistmodel)."""
    words = re.sub(r"[^a-z0-9]+", "-", plain(text).lower())
    return re.sub(r"^[-0-9]+|-+$", "", words) or "section"


class Anchors:
    """A page's section anchors, unique in the page and the same in both editions: from the English twin's headings."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.sections: list[list[str]] = []  # each heading's anchors in the page's order, for conf.py

    def cell(self, source: str, english: str, fallback: str) -> list[list[str]]:
        """A Markdown cell's anchors: its English twin's headings', then OWN_ANCHORS' or its id's (`fallback`)."""
        mine, theirs = headings(source), headings(english)
        paired = 0  # headings paired in order, while their levels agree
        while paired < min(len(mine), len(theirs)) and mine[paired][0] == theirs[paired][0]:
            paired += 1
        names = [text for _, text in theirs[:paired]]
        for i, (_, text) in enumerate(mine[paired:], paired):
            names.append(OWN_ANCHORS.get(plain(text)) or (f"{fallback}-{i}" if i else fallback))
        found = []
        for base in map(slug, names):
            name, n = base, 1
            while name in self.used:
                n += 1
                name = f"{base}-{n}"
            self.used.add(name)
            found.append([name])
        self.sections += found
        return found


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at `path`; SiteError in one line when it is missing or not a notebook."""
    import nbformat

    try:
        return nbformat.read(path, as_version=4)
    except FileNotFoundError:
        fix = "python notebooks/series.py translate makes the Chinese ones"
        raise SiteError(f"{rel(path)} is missing: {fix}") from None
    except Exception as err:  # nbformat's NotJSONError, ValidationError, a JSON or Unicode error: all the same here
        raise SiteError(
            f"{rel(path)} is not a readable notebook ({type(err).__name__}): restore it with "
            f"`git checkout -- {rel(path)}`, or open and save it in Jupyter"
        ) from None


def rel(path: Path) -> str:
    """`path` as the repository's folder sees it, for messages."""
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


def page_notebook(
    path: Path, edition: Edition, english: nbformat.NotebookNode
) -> tuple[nbformat.NotebookNode, list[list[str]]]:
    """A copy of the notebook at `path` for its page, its tags myst-nb's (see REMOVED, fold), and its anchors."""
    nb = read_notebook(path)
    twins = {c.id: c.source for c in english.cells}
    further = {c.id for c in english.cells if "going-further" in c.metadata.get("tags", [])}  # 02-06's last part
    settings = any("parameters" in c.metadata.get("tags", []) for c in nb.cells)  # the settings in a cell apart
    anchors = Anchors()
    for index, cell in enumerate(nb.cells):
        tags = list(cell.metadata.get("tags", []))
        folded = cell.metadata.get("jupyter", {}).get("source_hidden")  # as Jupyter shows it (Colab's form cells)
        if REMOVED & set(tags):
            tags.append("remove-cell")
        elif "parameters" in tags or ("setup" in tags and settings):
            fold(cell, tags, show_output=True)
            cell.source = web_settings(cell.source)
        elif "setup" in tags:
            tags.append("remove-input")
        elif cell.cell_type == "code" and ({"solution", "recap"} & set(tags) or folded):
            fold(cell, tags, show_output="solution" not in tags)
        if cell.cell_type == "markdown":
            source = COLAB_BADGE.sub("", cell.source) if index == 0 else cell.source
            source = rewrite_links(source, path.parent, edition)
            if "solution" in tags:  # <details><summary>Solution 1: …</summary>, closed: styled as the code folds
                source = source.replace("<details>", '<details class="solution">')
            labels = anchors.cell(source, twins.get(cell.id, ""), cell.id)
            if cell.id in further:
                first = next(i for i, (level, _) in enumerate(headings(source)) if level == 2)
                labels[first].insert(0, f"going-further-{path.stem[:2]}")
            cell.source = source
        cell.metadata["tags"] = tags
    if int(path.stem[:2]) >= ADVANCED_FROM:  # a note under the title
        note = f'\n<p class="site-optional">{edition.words["optional"]}</p>\n'
        nb.cells[0].source = re.sub(r"^# .*$", lambda m: m[0] + note, nb.cells[0].source, count=1, flags=re.M)
    return nb, anchors.sections


def learners_sections(markdown: str, dropped: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """A README's (level, heading, text) sections, ## and ###, less those in `dropped` and their subsections."""
    parts = re.split(r"^(#{2,3} .*)$", markdown, flags=re.MULTILINE)
    kept, cut = [(1, "", parts[0])], None  # cut: the level of the section being dropped
    for line, body in zip(parts[1::2], parts[2::2]):
        hashes, _, heading = line.partition(" ")
        if cut is not None and len(hashes) > cut:
            continue
        cut = len(hashes) if heading.strip() in dropped else None
        if cut is None:
            kept.append((len(hashes), heading.strip(), line + body))
    return kept


def home_page(edition: Edition) -> tuple[str, list[list[str]]]:
    """The home page: the README's sections for learners, the table of contents, and its anchors (the English ones)."""
    text = edition.readme.read_text(encoding="utf-8")
    text = re.sub(r"^(English|\[English\]).*(简体中文).*\n", "", text, count=1, flags=re.MULTILINE)  # the switch
    text = "\n\n".join(p for p in text.split("\n\n") if f"<{DOCUMENTATION}" not in p)  # "read it online"
    page = "".join(body for _, _, body in learners_sections(text, edition.dropped))
    page = rewrite_links(page, edition.readme.parent, edition)
    en = EDITIONS["en"]
    english_text = "".join(b for _, _, b in learners_sections(en.readme.read_text(encoding="utf-8"), en.dropped))
    anchors = Anchors()
    anchors.cell(page, english_text, "section")
    names = notebook_names()
    lesson = [n for n in names if int(n[:2]) < ADVANCED_FROM]
    advanced = [n for n in names if int(n[:2]) >= ADVANCED_FROM]
    for caption, group in ((edition.words["lesson"], lesson), (edition.words["advanced"], advanced)):
        page += f"\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n" + "\n".join(group) + "\n```\n"
    return page, anchors.sections


def search_dictionary(path: Path) -> None:
    """Write the glossary's terms (zh/README.md, 术语表) as jieba's words: its own splits 数据加载器 in three."""
    glossary = EDITIONS["zh"].readme.read_text(encoding="utf-8").split("## 术语表", 1)[1]
    rows = [line.strip().strip("|").split("|") for line in glossary.splitlines() if line.startswith("|")]
    chinese = [row[1] for row in rows if len(row) > 1]  # the 译名 column
    terms = {term.strip() for cell in chinese for term in re.split(r"[、，]", cell)}
    words = sorted(term for term in terms if re.fullmatch(r"[\u4e00-\u9fff]{2,}", term))
    path.write_text("".join(f"{word}\n" for word in words), encoding="utf-8")


def fresh_folder(path: Path, what: str) -> None:
    """Empty or make the folder `path`; SiteError naming it, or the file in the way, when that fails."""
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise SiteError(
            f"cannot make {what} {rel(path)}/: {rel(blocker)} is a file, not a folder: delete it "
            f"(rm {rel(blocker)}), then run make site again"
        )
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.mkdir(parents=True)
    except OSError as err:
        raise SiteError(
            f"cannot write {what} {rel(path)}/ ({err.strerror or err}): make it a folder you can "
            f"write, or delete it (rm -r {rel(path)}), then run make site again"
        ) from None


def write_sources(edition: Edition) -> Path:
    """Write the Sphinx project of `edition` into runs/site-build/<lang>/src; return that folder."""
    import nbformat

    src = WORK / edition.lang / "src"
    fresh_folder(src.parent, "the site's build folder")
    (src / "_extra" / "notebooks").mkdir(parents=True)
    shutil.copy(WEBSITE / BADGE, src / BADGE)
    page, anchors = home_page(edition)
    (src / "index.md").write_text(page, encoding="utf-8")
    sections = {"index": anchors}
    for name in notebook_names():
        path = edition.notebooks / f"{name}.ipynb"
        english = read_notebook(REPO / "notebooks" / f"{name}.ipynb")
        nb, sections[name] = page_notebook(path, edition, english)
        nbformat.write(nb, src / f"{name}.ipynb")
        shutil.copy(path, src / "_extra" / "notebooks" / path.name)  # the download: the notebook as committed
    (src.parent / "anchors.json").write_text(json.dumps(sections, indent=1), encoding="utf-8")
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


def chinese_theme(html: Path) -> None:
    """Put THEME_ZH's words in Chinese (an attribute's or element's whole text) and add SEARCH_ZH to the search."""
    for page in html.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for english, chinese in THEME_ZH.items():
            text = text.replace(f'="{english}"', f'="{chinese}"').replace(f">{english}<", f">{chinese}<")
        page.write_text(text, encoding="utf-8")
    added = json.dumps(SEARCH_ZH, ensure_ascii=False)  # plural_expr is 0 in Chinese: one form serves every count
    with (html / "_static" / "translations.js").open("a", encoding="utf-8") as file:
        file.write(f"\nObject.assign(Documentation.TRANSLATIONS, {added});\n")


def missing_packages() -> list[str]:
    """The site's modules that this Python cannot import."""
    return [module for module in SITE_MODULES if importlib.util.find_spec(module) is None]


def build() -> None:
    """Build both editions into site/; print the time it took and the site's size."""
    start = time.monotonic()
    series, strays = series_notebooks()
    for stray in strays:
        print(f"make site: skipped notebooks/{stray}, not one of the series (it has no Chinese twin in notebooks/zh/)")
    for edition in EDITIONS.values():  # every notebook whole, before anything is made
        for name in series:
            read_notebook(edition.notebooks / f"{name}.ipynb")
    if SITE.exists() and not SITE.is_dir():  # fresh_folder would delete it after the build
        raise SiteError(f"cannot write the site into {rel(SITE)}/: it is a file: delete it, then run make site again")
    builds = [(edition, sphinx(edition, write_sources(edition))) for edition in EDITIONS.values()]
    failed = [edition.lang for edition, build in builds if build.wait() != 0]
    if failed:
        raise SystemExit(f"make site: Sphinx failed for {', '.join(failed)} (its messages are above)")
    chinese_theme(WORK / "zh" / "html")
    fresh_folder(SITE, "the site's folder")
    try:
        for edition in EDITIONS.values():
            shutil.copytree(WORK / edition.lang / "html", SITE / edition.prefix, dirs_exist_ok=True)
        (SITE / ".nojekyll").touch()  # GitHub Pages: serve _static/ and _images/ as they are
    except OSError as err:
        raise SiteError(
            f"cannot write the site into {rel(SITE)}/ ({err.strerror or err}): free some space or "
            f"make it writable, then run make site again"
        ) from None
    size = sum(f.stat().st_size for f in SITE.rglob("*") if f.is_file())
    print(
        f"make site: {rel(SITE)}/ in {time.monotonic() - start:.0f} s, {size / 2**20:.1f} MiB; "
        f"version {VERSION}, launch buttons at {launch_ref()}"
    )


def main() -> None:
    """`make site`: say in one line what is missing or wrong, or build."""
    if missing := missing_packages():
        raise SystemExit(
            f"make site: the site's packages are missing ({', '.join(missing)}): install them with `make site` "
            "(into .venv-site) or `pip install -r requirements-site.txt`"
        )
    try:
        build()
    except SiteError as err:
        raise SystemExit(f"make site: {err}") from None


if __name__ == "__main__":
    main()
