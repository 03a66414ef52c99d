"""The notebooks as pages: where they are, their set-up cell, Colab badge, links to the neighbours; `stamp`."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from string import Template

import nbformat
from fetch_series import BRANCH, GITHUB, SERIES_VERSION  # the repository's address and code version, defined once

NOTEBOOKS = Path(__file__).resolve().parents[1]
REPO = NOTEBOOKS.parent
SETUP_FILE = NOTEBOOKS / "setup_cell.py"  # the set-up cell's code, kept as a file so that ruff lints it
FOLDED = ("setup", "recap")  # tags of the code cells a learner unfolds to read (a solution is folded Markdown)
NAV_WORDS = {"en": ("← Previous: ", "Next: "), "zh": ("← 上一篇：", "下一篇：")}


def setup_source(version: str = SERIES_VERSION) -> str:
    """The set-up cell: setup_cell.py with the repository's address and the code's version in its $placeholders.

    The version (SERIES_VERSION, or another for the tests) is the one the notebook fetches: git tag v<version>.
    """
    text = Template(SETUP_FILE.read_text(encoding="utf-8").rstrip("\n"))
    return text.substitute(github=GITHUB, branch=BRANCH, repo_name=Path(GITHUB).name, version=version)


SETUP = setup_source()
CODE_MARK = "import os"  # the first line of setup_cell.py's code, after its title: a set-up cell's settings end there


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The series' notebooks in order; only those named (stem or file name) when `names` is given."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    return [p for p in paths if not names or p.stem in names or p.name in names]


def shown(path: Path) -> str:
    """A path as a message names it: from the repository's root when it is inside."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def badge(name: str) -> str:
    """The Markdown "Open in Colab" badge for one notebook."""
    url = f"https://colab.research.google.com/github/{GITHUB}/blob/{BRANCH}/notebooks/{name}"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"


def tagged(nb: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    """Cells of `nb` that carry `tag`."""
    return [cell for cell in nb.cells if tag in cell.get("metadata", {}).get("tags", [])]


def title(path: Path) -> str:
    """A notebook's title: the first line of its first cell, without the '# '."""
    return nbformat.read(path, as_version=4).cells[0].source.splitlines()[0].lstrip("# ").strip()


def nav(path: Path, titles: dict[str, str] | None = None, lang: str = "en") -> str:
    """Links to the previous and next notebooks of the series, for the cell tagged `nav`.

    `titles` maps file names to the titles to show (by default the English ones); `lang` picks the words.
    """
    names = [p.name for p in notebook_paths()]
    show = titles or {name: title(NOTEBOOKS / name) for name in names}
    previous, following = NAV_WORDS[lang]
    i = names.index(path.name)
    links = []
    if i > 0:
        links.append(f"{previous}[{show[names[i - 1]]}]({names[i - 1]})")
    if i + 1 < len(names):
        links.append(f"{following}[{show[names[i + 1]]}]({names[i + 1]}) →")
    return "---\n" + " &nbsp;·&nbsp; ".join(links)


SETTING = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*) = (?P<value>.+?)(?P<comment>  # .*)?$")


def _settings_lines(source: str) -> list[str]:
    """The lines of a set-up cell's settings block: after its `# @title` line, up to the series' code."""
    lines = source.splitlines()[1:]
    end = next((i for i, line in enumerate(lines) if line.startswith(CODE_MARK)), len(lines))
    return lines[:end]


def settings(nb: nbformat.NotebookNode) -> dict[str, object]:
    """A notebook's settings, by name: the `name = value` lines at the top of its set-up cell."""
    found = {}
    for cell in tagged(nb, "setup"):
        for line in _settings_lines(cell.source):
            if match := SETTING.match(line):
                found[match["name"]] = ast.literal_eval(match["value"])
    return found


def setting_kinds(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Each setting's kind, as the set-up cell checks it: the source of `kind` in `check_settings(..., name=kind)`."""
    kinds = {}
    for cell in tagged(nb, "setup"):
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("check_settings"):
                kinds |= {keyword.arg: ast.unparse(keyword.value) for keyword in node.keywords}
    return kinds


def with_settings(nb: nbformat.NotebookNode, values: dict[str, object]) -> nbformat.NotebookNode:
    """`nb` with the settings it declares set to `values` in its set-up cell (the ones it lacks are left out)."""
    for cell in tagged(nb, "setup"):
        head, *lines = cell.source.splitlines()
        count = len(_settings_lines(cell.source))
        for i, line in enumerate(lines[:count]):
            if (match := SETTING.match(line)) and match["name"] in values:
                lines[i] = f"{match['name']} = {values[match['name']]!r}{match['comment'] or ''}"
        cell.source = "\n".join([head, *lines])
    return nb


def setup_cell(source: str) -> str:
    """A set-up cell rewritten from setup_cell.py: its title and the series' code; its settings and its end kept.

    The end, after `import helpers`, is the notebook's own: checking its settings, the device, the exercises.
    """
    settings_block = _settings_lines(source)
    lines = source.splitlines()
    after = next((i for i, line in enumerate(lines) if line == "import helpers"), len(lines) - 1) + 1
    title_line, *code = SETUP.splitlines()
    return "\n".join([title_line, *settings_block, *code, *lines[after:]])


def stamp(path: Path, write: bool = True) -> bool:
    """Write the badge (under the title), the set-up cell's code, the neighbours' links, the metadata.

    Returns True if anything changed. Any old badge, or a leftover placeholder, under the title goes.
    """
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    first, *rest = nb.cells[0].source.splitlines()
    rest = [line for line in rest if "Open In Colab" not in line and line.strip() != "BADGE"]
    nb.cells[0].source = "\n".join([first, badge(path.name), *rest])
    for cell in tagged(nb, "setup"):
        cell.source = setup_cell(cell.source)
    for cell in (cell for tag in FOLDED for cell in tagged(nb, tag)):
        cell.metadata["cellView"] = "form"  # folded until a learner opens it: Colab shows the `# @title` line
        cell.metadata["jupyter"] = {"source_hidden": True}  # JupyterLab hides the code
    for cell in tagged(nb, "nav"):
        cell.source = nav(path)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["accelerator"] = "GPU"
    nb.metadata["colab"] = {"gpuType": "T4", "provenance": []}
    if nbformat.writes(nb) == before:
        return False
    if write:
        nbformat.write(nb, path)
    return True
