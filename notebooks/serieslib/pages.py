"""The notebooks as pages: where they are, their set-up cell, Colab badge, links to the neighbours; `stamp`."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from string import Template

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1]
REPO = NOTEBOOKS.parent
FOLDED = ("parameters", "setup", "recap")  # tags of the code cells a learner unfolds to read (a solution is Markdown)
NAV_WORDS = {"en": ("← Previous: ", "Next: "), "zh": ("← 上一篇：", "下一篇：")}
SERIES_NAME = re.compile(r"\d\d_[a-z0-9_]+\.ipynb")  # 05_training.ipynb; not 03_model-Copy1.ipynb, nor Untitled.ipynb
SETTING = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*) = (?P<value>.+?)(?:  # @param .*)?$")
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]  # version, addresses: once
VERSION = PROJECT["version"]  # what every set-up cell installs, git tag v<VERSION>
GITHUB = PROJECT["urls"]["Repository"].removeprefix("https://github.com/")  # owner/name
BRANCH = "main"  # the branch the notebooks' Colab badges open: the newest notebooks

SETUP = """\
# @title Set-up: $what { display-mode: "form" }
import importlib.util

if importlib.util.find_spec("series_setup") is None:  # missing here (Colab, Kaggle): install it; PyTorch stays
    if importlib.util.find_spec("pytorch_gpu_mnist") is None:
        %pip install --quiet --no-deps git+https://github.com/$github@v$version
    importlib.import_module("pytorch_gpu_mnist")  # the series' modules, on Python's path after your own
import helpers  # No module named 'helpers'? Colab, Kaggle: turn internet on. In a clone: %pip install -e ..
from series_setup import start

$blank$names = start("$stem", globals(), version="$version")"""


def setup_source(stem: str, version: str = VERSION) -> str:
    """A notebook's set-up cell: SETUP with the notebook's names and the version it installs, git tag v<version>."""
    import series_setup  # PyTorch: only `stamp` and the tests write set-up cells

    spec = series_setup.NOTEBOOKS[stem]
    parts = ["gets the code", "checks your settings"]
    parts += ["prepares the data"] * ("DATA" in spec.returns) + ["picks the device"] * ("DEVICE" in spec.returns)
    what = ", ".join(parts)
    blank = "____ = ()  # the blank you fill in, in each exercise (a loop over it runs no step)\n"
    blank = blank if "exercises" in spec.returns else ""
    return Template(SETUP).substitute(
        what=what, github=GITHUB, version=version, blank=blank, names=series_setup.setup_names(stem), stem=stem
    )


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The series' notebooks in order; only those named (stem or file name) when `names` is given."""
    paths = sorted(p for p in NOTEBOOKS.glob("*.ipynb") if SERIES_NAME.fullmatch(p.name))
    return [p for p in paths if not names or p.stem in names or p.name in names]


def stray_note() -> str:
    """One line naming the notebooks that are not the series' (a Duplicate's copy, a scratch one), or nothing."""
    strays = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb") if not SERIES_NAME.fullmatch(p.name))
    return f"left alone, not one of the series' notebooks: {', '.join(strays)}" if strays else ""


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
    """The cell tagged `nav`: links to the neighbours, shown by `titles` (file name: title; default English)."""
    names = [p.name for p in notebook_paths()]
    show = titles or {name: title(NOTEBOOKS / name) for name in names}
    previous, following = NAV_WORDS[lang]
    i = names.index(path.name)
    links = [f"{previous}[{show[names[i - 1]]}]({names[i - 1]})"] if i > 0 else []
    links += [f"{following}[{show[names[i + 1]]}]({names[i + 1]}) →"] if i + 1 < len(names) else []
    return "---\n" + " &nbsp;·&nbsp; ".join(links)


def settings_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook's settings cell: the code cell tagged `parameters`, papermill's convention."""
    (cell,) = tagged(nb, "parameters")
    return cell


def settings(nb: nbformat.NotebookNode) -> dict[str, object]:
    """A notebook's settings, by name: the `name = value` lines of its settings cell."""
    lines = (line for cell in tagged(nb, "parameters") for line in cell.source.splitlines())
    return {match["name"]: ast.literal_eval(match["value"]) for match in map(SETTING.match, lines) if match}


def stamp(path: Path, write: bool = True) -> bool:
    """Write the badge (replacing any old one under the title), set-up cell, links, folds, metadata; True if changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    first, *rest = nb.cells[0].source.splitlines()
    rest = [line for line in rest if "Open In Colab" not in line and line.strip() != "BADGE"]
    nb.cells[0].source = "\n".join([first, badge(path.name), *rest])
    for cell in tagged(nb, "setup"):
        cell.source = setup_source(path.stem)
    for cell in (cell for tag in FOLDED for cell in tagged(nb, tag)):
        cell.metadata["cellView"] = "form"  # folded until a learner opens it: Colab shows the `# @title` line
        cell.metadata["jupyter"] = {"source_hidden": True}  # JupyterLab hides the code
    for cell in tagged(nb, "nav"):
        cell.source = nav(path)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["accelerator"] = "GPU"
    nb.metadata["colab"] = {"gpuType": "T4", "provenance": []}
    changed = nbformat.writes(nb) != before
    if changed and write:
        nbformat.write(nb, path)
    return changed
