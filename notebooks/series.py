"""The notebook series: run it headless, refresh the committed notebooks, stamp their Colab set-up.

    python notebooks/series.py run [-p NAME VALUE ...]   # papermill into runs/<timestamp>/ and runs/latest
    python notebooks/series.py prepare [--out runs/test]  # copies with the test parameters, for nbval (make test)
    python notebooks/series.py refresh                    # execute the committed notebooks in place
    python notebooks/series.py adopt runs/gpu/latest      # or take the outputs of a run (a GPU's) instead
    python notebooks/series.py stamp                      # rewrite badges and set-up cells from GITHUB/BRANCH
    python notebooks/series.py translate [--check]        # build notebooks/zh/ from the English + zh/NN_name.md

The repository's address lives here: `stamp` writes it into every notebook's "Open in Colab" badge and
set-up cell, and tests check that they, and notebooks/fetch_series.py (which the set-up cell downloads), agree.
"""

from __future__ import annotations

import argparse
import ast
import base64
import copy
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

if TYPE_CHECKING:
    from nbconvert import HTMLExporter  # imported where a report is written: nbconvert is slow to import

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for helpers
from helpers import RESULTS_MIME, format_value  # noqa: E402  (where a notebook's results live, and how they read)

GITHUB = "gpu-lessons/pytorch-gpu-mnist"  # owner/name on GitHub; forks change it (and fetch_series.py's) and `stamp`
BRANCH = "main"
REPO_URL = f"https://github.com/{GITHUB}.git"

NOTEBOOKS = Path(__file__).resolve().parent
REPO = NOTEBOOKS.parent
# Kernels log a warning about unencrypted local TCP at every start; keep the run's log to what matters.
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]

ARCHIVE_URL = f"https://github.com/{GITHUB}/archive/refs/heads/{BRANCH}.zip"

# -------------------------------- pages: the set-up cell, badges, links, stamp

SETUP_FILE = NOTEBOOKS / "setup_cell.py"  # the set-up cell's code, kept as a file so that ruff lints it
SETUP_FILE_GITHUB, SETUP_FILE_BRANCH = "gpu-lessons/pytorch-gpu-mnist", "main"  # the address written in it


def setup_source() -> str:
    """The set-up cell: setup_cell.py with this repository's address (GITHUB, BRANCH) in it."""
    text = SETUP_FILE.read_text(encoding="utf-8").rstrip("\n")
    text = text.replace(f"{SETUP_FILE_GITHUB}/{SETUP_FILE_BRANCH}/", f"{GITHUB}/{BRANCH}/")  # fetch_series.py's URL
    text = text.replace(SETUP_FILE_GITHUB, GITHUB)  # the repository to clone, in the message without internet
    return text.replace(f'"{Path(SETUP_FILE_GITHUB).name}"', f'"{Path(GITHUB).name}"')  # the cache folder's name


SETUP = setup_source()


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The series' notebooks in order; only those named (stem or file name) when `names` is given."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    return [p for p in paths if not names or p.stem in names or p.name in names]


def translated_paths(lang: str = "zh") -> list[Path]:
    """The committed translated notebooks, e.g. notebooks/zh/01_gpu_runtime.ipynb, in order."""
    return sorted((NOTEBOOKS / lang).glob("[0-9][0-9]_*.ipynb"))


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


NAV_WORDS = {"en": ("← Previous: ", "Next: "), "zh": ("← 上一篇：", "下一篇：")}


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


def stamp(path: Path, write: bool = True) -> bool:
    """Write the badge (under the title), the set-up cell, the links to the neighbours and the metadata.

    Returns True if anything changed. Any old badge, or a leftover placeholder, under the title goes.
    """
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    first, *rest = nb.cells[0].source.splitlines()
    rest = [line for line in rest if "Open In Colab" not in line and line.strip() != "BADGE"]
    nb.cells[0].source = "\n".join([first, badge(path.name), *rest])
    for cell in tagged(nb, "setup"):
        cell.source = SETUP
    for cell in tagged(nb, "setup") + tagged(nb, "recap") + tagged(nb, "solution") + tagged(nb, "metrics"):
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


# ---------------------------------------------------------------------------- translations
# A translated edition (notebooks/zh/) is built, never edited: its code cells and their outputs are the
# English notebook's, and each Markdown cell comes from notebooks/zh/NN_name.md, where a marker line
#     <!-- cell c05-03 en:1a2b3c4d5e6f -->
# starts the translation of cell c05-03 and records a hash of the English text it translates. When the
# English cell changes, the hash no longer matches and the build stops until the translation is updated.

LANGUAGES = {"zh": "简体中文"}  # code -> name, for each translated edition
MARKER = re.compile(r"^<!-- cell (?P<id>\S+) en:(?P<hash>[0-9a-f]{12}) -->[ \t]*$", re.MULTILINE)


class TranslationError(ValueError):
    """A translation file that is missing, out of date or malformed."""


# Between two Chinese characters a line break shows as a stray space; next to full-width punctuation
# (，。：（）) a space is never wanted, whatever is on the other side.
HAN = "\u4e00-\u9fff"
FULL_WIDTH = "\u3000-\u303f\uff00-\uffef"
BLOCK_START = re.compile(r"\s*(?:[*+-]\s|\d+[.)]\s|#|\||>|```|$)")  # a line that starts a list item, heading, ...


LINK_END = re.compile(r"\]\([^()\s]*\)$")  # the end of a Markdown link, `](target)`, at the end of a line


def _edge_chars(previous: str, line: str) -> tuple[str, str]:
    """The last character of `previous` and the first of `line` as a reader sees them: past emphasis and links."""
    end = LINK_END.sub("", previous.rstrip("*_")).rstrip("*_")  # a link's text ends where it shows
    start = line.lstrip().lstrip("*_[").lstrip("*_")  # a line that opens a link, `[保存…](…)`, starts with its text
    return end[-1:], start[:1]


def _joins(previous: str, line: str) -> bool:
    """Whether `line` continues `previous` without the space a Markdown line break would show."""
    if BLOCK_START.match(line) or previous.lstrip().startswith(("#", "|", "```")) or not previous.strip():
        return False
    end, start = _edge_chars(previous, line)
    han_pair = re.match(f"[{HAN}]", end) and re.match(f"[{HAN}]", start)  # (no match on "")
    return bool(han_pair or re.match(f"[{FULL_WIDTH}]", end) or re.match(f"[{FULL_WIDTH}]", start))


def unwrap_cjk(text: str) -> str:
    """Join the lines a translator wrapped inside Chinese text, outside code blocks.

    Markdown renders a line break inside a paragraph as a space, which Chinese text does not have. A break
    between Chinese and a Latin word stays (it shows as the space that belongs there), and so does any
    break before a list item, heading, table row or code block.
    """
    lines: list[str] = []
    in_code = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and lines and _joins(lines[-1], line):
            lines[-1] += line.lstrip()
            continue
        lines.append(line)
    return "\n".join(lines)


def english_text(cell: nbformat.NotebookNode) -> str:
    """The text a translation translates: a Markdown cell without its Colab badge, which `translate` writes."""
    return "\n".join(line for line in cell.source.splitlines() if "Open In Colab" not in line)


def text_hash(text: str) -> str:
    """The short hash a translation file records for the English text of one cell."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def marker(cell: nbformat.NotebookNode) -> str:
    """The line that starts a cell's translation, with the hash of its current English text."""
    return f"<!-- cell {cell.id} en:{text_hash(english_text(cell))} -->"


def translatable(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The Markdown cells a translation file covers: all but the links to the neighbours, which are generated."""
    return [c for c in nb.cells if c.cell_type == "markdown" and "nav" not in c.metadata.get("tags", [])]


def translation_file(name: str, lang: str = "zh") -> Path:
    """Where the translation of notebook `name` (stem or file name) lives: notebooks/<lang>/<stem>.md."""
    return NOTEBOOKS / lang / f"{Path(name).stem}.md"


def _shown(path: Path) -> str:
    """A path as an error message names it: from the repository's root when it is inside."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def read_translation(path: Path) -> dict[str, tuple[str, str]]:
    """Cell id -> (hash of the English it translates, translated text), from one translation file."""
    if not path.is_file():
        raise TranslationError(f"{_shown(path)} is missing: create it with a block for every Markdown cell")
    text = path.read_text(encoding="utf-8")
    marks = list(MARKER.finditer(text))
    entries: dict[str, tuple[str, str]] = {}
    for mark, following in zip(marks, [*marks[1:], None]):
        body = text[mark.end() : following.start() if following else len(text)].strip("\n").rstrip()
        if mark["id"] in entries:
            raise TranslationError(f"{_shown(path)}: cell {mark['id']} is translated twice")
        if not body:
            raise TranslationError(f"{_shown(path)}: cell {mark['id']} has an empty translation")
        entries[mark["id"]] = (mark["hash"], body)
    return entries


def translation_problems(english: nbformat.NotebookNode, entries: dict[str, tuple[str, str]]) -> list[str]:
    """What keeps a translation from being current: missing, stale and orphaned cells, one line each."""
    problems = []
    cells = translatable(english)
    for cell in cells:
        if cell.id not in entries:
            problems.append(f"cell {cell.id} has no translation: add a block that starts with {marker(cell)}")
        elif entries[cell.id][0] != text_hash(english_text(cell)):
            problems.append(
                f"cell {cell.id} is stale: its English text changed since it was translated. Update the "
                f"translation, then change its marker to {marker(cell)}"
            )
    known = {cell.id for cell in cells}
    problems += [
        f"cell {i} is not a Markdown cell of the English notebook any more: remove it"
        for i in entries
        if i not in known
    ]
    return problems


def translate_notebook(
    english: nbformat.NotebookNode, path: Path, entries: dict, titles: dict[str, str], lang: str = "zh"
) -> nbformat.NotebookNode:
    """A copy of `english` (committed or executed) with its Markdown in `lang`; code and outputs untouched."""
    problems = translation_problems(english, entries)
    if problems:
        raise TranslationError(f"{_shown(translation_file(path.name, lang))}:\n  " + "\n  ".join(problems))
    nb = copy.deepcopy(english)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if "nav" in cell.metadata.get("tags", []):
            cell.source = nav(path, titles, lang)
            continue
        text = unwrap_cjk(entries[cell.id][1])  # a no-op on text without CJK characters
        if cell is nb.cells[0]:
            first, *rest = text.splitlines()
            text = "\n".join([first, badge(f"{lang}/{path.name}"), *rest])
        cell.source = text
    nb.metadata["language"] = lang  # what a reader of the .ipynb sees it is written in
    return nb


def translated_titles(lang: str = "zh") -> dict[str, str]:
    """Every notebook's translated title (the first line of its first cell, without '# '), by file name."""
    titles = {}
    for path in notebook_paths():
        first = nbformat.read(path, as_version=4).cells[0]
        file = translation_file(path.name, lang)
        entry = read_translation(file).get(first.id) if file.is_file() else None  # its own build reports it
        titles[path.name] = entry[1].splitlines()[0].lstrip("# ").strip() if entry else title(path)
    return titles


def translate(
    names: list[str] | None = None,
    lang: str = "zh",
    check: bool = False,
    source: Path | None = None,
    target: Path | None = None,
) -> list[str]:
    """Build `target` (default notebooks/<lang>/) from the notebooks in `source`; with `check`, write nothing.

    Returns the names of the notebooks written (or, with `check`, out of date). Raises TranslationError,
    listing every missing or stale cell of every notebook, before it writes anything.
    """
    titles = translated_titles(lang)
    built, problems = {}, []
    for path in notebook_paths(names):
        english = nbformat.read((source or NOTEBOOKS) / path.name, as_version=4)
        try:
            built[path.name] = translate_notebook(
                english, path, read_translation(translation_file(path.name, lang)), titles, lang
            )
        except TranslationError as err:
            problems.append(str(err))
    if problems:
        raise TranslationError("\n".join(problems))
    folder = target or NOTEBOOKS / lang
    changed = []
    for name, nb in built.items():
        text = nbformat.writes(nb)
        text += "" if text.endswith("\n") else "\n"  # as nbformat.write ends a file
        if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text:
            changed.append(name)
            if not check:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(text, encoding="utf-8")
    return changed


# --------------------- run: the series headless with papermill, and its report


def metrics_of(nb: nbformat.NotebookNode) -> dict:
    """The results that the cell tagged `metrics` recorded with helpers.record_results."""
    for cell in tagged(nb, "metrics"):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if RESULTS_MIME in data:
                found = data[RESULTS_MIME]
                return json.loads(found) if isinstance(found, str) else dict(found)
    return {}


def save_figures(nb: nbformat.NotebookNode, stem: str, folder: Path) -> list[Path]:
    """Write every PNG the notebook displays as <stem>-<n>.png."""
    paths = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                path = folder / f"{stem}-{len(paths) + 1}.png"
                path.write_bytes(base64.b64decode(png))
                paths.append(path)
    return paths


# What `make test` passes to every notebook that declares it: the CPU, and small exercises and benchmarks.
TEST_PARAMETERS = {
    "device": "cpu",
    "exercise_epochs": 1,
    "exercise_limit": 2000,
    "spread_seeds": [1, 2],
    "bench_epochs": 2,
    "bench_limit": 5000,
}


def _shared(out: Path, parameters: dict) -> dict:
    """What every notebook of a run in `out` gets: no progress bars, the lesson's checkpoint in `out`, `parameters`."""
    return {"progress": False, "checkpoint": str(out / "lesson.ckpt")} | parameters


def _parameters(path: Path, shared: dict) -> dict:
    """The parameters of `shared` that the notebook at `path` declares (papermill would warn about the rest)."""
    import papermill

    declared = papermill.inspect_notebook(str(path))
    return {k: v for k, v in shared.items() if k in declared}


def prepare(
    parameters: dict | None = None,
    out: Path = REPO / "runs" / "test",
    names: list[str] | None = None,
    check: bool = True,
) -> list[Path]:
    """Copies of the notebooks in out/prepared/, `parameters` injected, committed outputs kept: nbval runs them.

    papermill's prepare-only mode writes each copy without executing it. nbval then executes the copies and
    compares the outputs of the cells tagged nbval-check-output with the committed ones; with `check=False`
    those tags go (on other library versions the last digits move, and only the ranges are checked).
    """
    import papermill

    out = out.resolve()  # the kernels run in out/prepared/: paths passed to them must not be relative
    shared = _shared(out, TEST_PARAMETERS if parameters is None else parameters)
    if out.exists():
        shutil.rmtree(out)
    (out / "prepared").mkdir(parents=True)
    (out / "parameters.json").write_text(json.dumps(shared, indent=2) + "\n")
    paths = []
    for path in notebook_paths(names):
        nb = papermill.execute_notebook(
            str(path),
            None,
            parameters=_parameters(path, shared),
            prepare_only=True,
            progress_bar=False,
            log_output=False,
        )
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if not check and "nbval-check-output" in tags:
                tags.remove("nbval-check-output")
        nbformat.write(nb, out / "prepared" / path.name)
        paths.append(out / "prepared" / path.name)
    return paths


def run(
    parameters: dict | None = None,
    out_root: Path = REPO / "runs",
    names: list[str] | None = None,
    langs: list[str] | None = None,
) -> Path:
    """Execute the series with papermill into out_root/<timestamp>/, with a report; return that folder.

    For each language in `langs` (e.g. ["zh"]) the executed notebooks are also written translated into
    out_root/<timestamp>/<lang>/: the same code and outputs, the Markdown from notebooks/<lang>/, no second run.
    """
    for lang in langs or []:
        translate(names, lang, check=True)  # a missing or stale translation fails before the run, not after it
    import papermill

    out = out_root.resolve() / time.strftime("%Y%m%d-%H%M%S")  # resolved: the kernels run in notebooks/
    out.mkdir(parents=True, exist_ok=True)
    shared = _shared(out, parameters or {})
    summary = []
    for path in notebook_paths(names):
        t0 = time.perf_counter()
        try:
            papermill.execute_notebook(
                str(path),
                str(out / path.name),
                parameters=_parameters(path, shared),
                cwd=str(NOTEBOOKS),
                kernel_name="python3",
                progress_bar=False,
                extra_arguments=KERNEL_ARGS,
            )
            status = "ok"
        except papermill.PapermillExecutionError as err:
            status = f"FAILED: {err.ename}: {err.evalue[:200]}"
        summary.append({"stem": path.stem, "status": status, "seconds": time.perf_counter() - t0})
        print(f"{path.stem}: {status} in {summary[-1]['seconds']:.1f} s", flush=True)
    collect(out, summary, shared, langs)
    _point_latest(out)
    failed = [row["stem"] for row in summary if row["status"] != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
    return out


def collect(out: Path, summary: list[dict], parameters: dict, langs: list[str] | None = None) -> dict:
    """For the executed notebooks in `out`: metrics.json, figures/, their translations and index.html.

    `summary` has a row per notebook: its stem, status ("ok" or what failed) and seconds. Returns the metrics.
    """
    (out / "figures").mkdir(exist_ok=True)
    metrics = {}
    for row in summary:
        executed = nbformat.read(out / f"{row['stem']}.ipynb", as_version=4)
        metrics[row["stem"]] = metrics_of(executed)
        row["figures"] = save_figures(executed, row["stem"], out / "figures")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    names = [row["stem"] for row in summary]
    for lang in langs or []:
        translate(names, lang, source=out, target=out / lang)
        print(f"{LANGUAGES[lang]}: the executed notebooks, translated, in {out / lang}", flush=True)
    write_report(out, summary, metrics, parameters, langs)
    print(f"\n{'notebook':<24} {'status':<8} {'seconds':>8}  key results")
    for row in summary:
        shown = ", ".join(f"{k}={format_value(v)}" for k, v in list(metrics[row["stem"]].items())[:4])
        print(f"{row['stem']:<24} {row['status'][:8]:<8} {row['seconds']:>8.1f}  {shown}")
    print(f"\nreport: {out / 'index.html'} (executed notebooks, figures/ and metrics.json beside it)")
    return metrics


def html_exporter(lang: str = "en") -> HTMLExporter:
    """The exporter for pages in `lang`: `<html lang=...>` lets a browser pick the right glyphs (zh, not ja)."""
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(language_code=lang)
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={"setup"}), enabled=True)
    return exporter


def render(exporter: HTMLExporter, notebook: Path, page: Path) -> None:
    """Render one notebook to an HTML page with `exporter`, making the page's folder."""
    html, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(html, encoding="utf-8")


def write_report(
    out: Path, summary: list[dict], metrics: dict, parameters: dict, langs: list[str] | None = None
) -> Path:
    """Write out/index.html: each notebook rendered (translations in out/<lang>/html/) and linked, numbers, figures."""
    from html import escape

    exporters = {lang: html_exporter(lang) for lang in ["en", *(langs or [])]}
    device = next((m["device"] for m in metrics.values() if m.get("device")), parameters.get("device") or "default")
    described = next((m["device_description"] for m in metrics.values() if m.get("device_description")), "")
    total = sum(row["seconds"] for row in summary)
    sections = []
    for row in summary:
        stem = row["stem"]
        render(exporters["en"], out / f"{stem}.ipynb", out / "html" / f"{stem}.html")
        for lang in langs or []:
            render(exporters[lang], out / lang / f"{stem}.ipynb", out / lang / "html" / f"{stem}.html")
        numbers = "".join(
            f"<tr><td>{escape(k.replace('_', ' '))}</td><td>{escape(format_value(v))}</td></tr>"
            for k, v in metrics[stem].items()
        )
        figures = "".join(f'<img src="figures/{f.name}" alt="{escape(f.stem)}" loading="lazy">' for f in row["figures"])
        translated = "".join(
            f' &middot; <a href="{lang}/html/{stem}.html" hreflang="{lang}">{LANGUAGES[lang]}</a>'
            f' (<a href="{lang}/{stem}.ipynb">.ipynb</a>)'
            for lang in langs or []
        )
        status = "ok" if row["status"] == "ok" else f'<b class="failed">{escape(row["status"])}</b>'
        sections.append(
            f'<section><h2><a href="html/{stem}.html">{escape(title(NOTEBOOKS / f"{stem}.ipynb"))}</a></h2>'
            f"<p>{status} in {row['seconds']:.1f} s &middot; "
            f'<a href="{stem}.ipynb">executed notebook</a>{translated}</p>'
            f"<table>{numbers}</table><div class=figs>{figures}</div></section>"
        )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Run {out.name}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }}
section {{ border-top: 1px solid #ddd; padding: 0.5em 0 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0; }}
td {{ border: 1px solid #ddd; padding: 2px 10px; font-variant-numeric: tabular-nums; }}
.figs img {{ max-height: 260px; max-width: 100%; margin: 4px; border: 1px solid #eee; }}
.failed {{ color: #b00; }}
</style></head><body>
<h1>The series, run {escape(out.name)}</h1>
<p>Device: <b>{escape(str(device))}</b>{f" ({escape(described)})" if described else ""} &middot;
{len(summary)} notebooks in {total:.0f} s &middot; parameters: {escape(json.dumps(parameters))}</p>
{"".join(sections)}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


def _point_latest(out: Path) -> None:
    latest = out.parent / "latest"
    if latest.is_symlink() or latest.is_file():
        latest.unlink()
    elif latest.is_dir():
        shutil.rmtree(latest)
    try:
        latest.symlink_to(out.name, target_is_directory=True)
    except OSError:  # no symlinks (Windows without developer mode): copy instead
        shutil.copytree(out, latest)


# -------------------------- refresh: the committed notebooks executed in place


def refresh(names: list[str] | None = None) -> None:
    """Stamp, execute the committed notebooks in place so their stored outputs match the code, then translate."""
    from nbclient import NotebookClient

    os.environ.setdefault("HELPERS_PROGRESS", "0")
    for path in notebook_paths(names):
        stamp(path)
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        client = NotebookClient(
            nb,
            timeout=1200,
            kernel_name="python3",
            record_timing=False,
            extra_arguments=KERNEL_ARGS,
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        client.execute()
        nbformat.write(nb, path)
        print(f"{path.name}: executed in place in {time.perf_counter() - t0:.1f} s", flush=True)
    for lang in LANGUAGES:
        translate(names, lang)


def adopt(folder: Path, names: list[str] | None = None) -> list[str]:
    """Make the outputs of an executed run (`run`'s folder, e.g. a GPU's) the committed notebooks' outputs.

    Cells are matched by id; papermill's injected parameters cell is left out, the execution counts are
    numbered again from 1, and the translations are rebuilt. Returns the notebooks changed.
    """
    changed = []
    for path in notebook_paths(names):
        if not (folder / path.name).is_file():
            continue
        executed = {c.id: c for c in nbformat.read(folder / path.name, as_version=4).cells}
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        missing = [c.id for c in code if c.id not in executed]
        if missing:
            raise ValueError(f"{_shown(folder / path.name)} lacks cells {', '.join(missing)}: run it from this code")
        for count, cell in enumerate(code, 1):
            cell.outputs, cell.execution_count = executed[cell.id].outputs, count
        nbformat.write(nb, path)
        changed.append(path.name)
    for lang in LANGUAGES:
        translate(names, lang)
    return changed


# ------------------------------------------------------------ the command line


def _parse_value(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _check_selection(args: argparse.Namespace) -> None:
    """Refuse unknown notebook names, and a parameter that no selected notebook declares, before anything runs."""
    stems = [p.stem for p in notebook_paths()]
    unknown = [n for n in args.names if n not in stems and n.removesuffix(".ipynb") not in stems]
    if unknown:
        raise SystemExit(f"no notebook named {', '.join(unknown)}: choose from {', '.join(stems)}")
    if args.parameter and args.command != "run":  # prepare passes TEST_PARAMETERS, the same in every test
        raise SystemExit(f"-p passes parameters to `run` only; {args.command} executes the notebooks as they are")
    if args.parameter:
        import papermill

        declared = {name for p in notebook_paths(args.names) for name in papermill.inspect_notebook(str(p))}
        unused = sorted({k for k, _ in args.parameter} - declared)
        if unused:
            raise SystemExit(
                f"no selected notebook declares the parameter(s) {', '.join(unused)}; "
                f"they declare: {', '.join(sorted(declared))}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "prepare", "refresh", "adopt", "stamp", "translate"])
    parser.add_argument(
        "names", nargs="*", help="only these notebooks (e.g. 05_training); adopt: the run's folder first"
    )
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="pass a parameter to every notebook that declares it, e.g. -p device cpu",
    )
    parser.add_argument("--out", type=Path, help="folder for the run (default: runs/; prepare: runs/test)")
    parser.add_argument(
        "--lang",
        action="append",
        choices=sorted(LANGUAGES),
        help="run: also write the executed notebooks in this language (no second execution); translate: which one",
    )
    parser.add_argument("--check", action="store_true", help="translate: write nothing, fail if anything would change")
    parser.add_argument(
        "--ranges-only",
        action="store_true",
        help="prepare: drop the nbval-check-output tags, for library versions whose last digits differ",
    )
    args = parser.parse_args(argv)
    if args.command == "adopt":
        if not args.names or not Path(args.names[0]).is_dir():
            raise SystemExit("adopt takes the folder of an executed run first, e.g. adopt runs/gpu/latest")
        args.folder, args.names = args.names[0], args.names[1:]
    _check_selection(args)
    if args.command == "run":
        try:
            run({k: _parse_value(v) for k, v in args.parameter}, args.out or REPO / "runs", args.names, args.lang)
        except TranslationError as err:
            raise SystemExit(f"The translation is not current:\n{err}") from None
    elif args.command == "prepare":
        prepared = prepare(None, args.out or REPO / "runs" / "test", args.names, check=not args.ranges_only)
        print(f"{len(prepared)} notebook(s) with the test parameters in {_shown(prepared[0].parent)}")
    elif args.command == "translate":
        for lang in args.lang or sorted(LANGUAGES):
            try:
                changed = translate(args.names, lang, check=args.check)
            except TranslationError as err:
                raise SystemExit(f"The {LANGUAGES[lang]} translation is not current:\n{err}") from None
            if args.check and changed:
                raise SystemExit(
                    f"notebooks/{lang}/ is out of date ({', '.join(changed)}): python notebooks/series.py translate"
                )
            done = "would change" if args.check else "written"
            print(
                f"notebooks/{lang}/: {len(changed)} notebook(s) {done}: {', '.join(changed) or 'all were up to date'}"
            )
    elif args.command == "adopt":
        changed = adopt(Path(args.folder), args.names)
        print(f"{len(changed)} notebook(s) took their outputs from {args.folder}: {', '.join(changed)}")
    elif args.command == "refresh":
        try:
            refresh(args.names)
        except TranslationError as err:  # the English notebooks are executed and written; their translation lags
            raise SystemExit(f"Executed in place, but the translation is not current:\n{err}") from None
    else:
        changed = [p.name for p in notebook_paths() if stamp(p)]
        print(f"stamped {len(changed)} notebook(s): {', '.join(changed) or 'all were up to date'}")
        main(["translate"])  # the translated badges carry the same address


if __name__ == "__main__":
    main(sys.argv[1:])
