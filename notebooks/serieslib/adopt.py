"""The outputs of an executed run (a GPU's, say) made the committed notebooks' outputs: `series.py adopt`.

Nothing changes unless every notebook taken ran to its end without an error, and it was executed in English.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from .checks import Refused
from .pages import notebook_paths, shown
from .translation import LANGUAGES, translate


def adopt(folder: Path, names: list[str] | None = None) -> list[str]:
    """Make the outputs of an executed run (`run`'s folder, e.g. a GPU's) the committed notebooks' outputs.

    Cells are matched by id: the cells a run adds (the results cell, an exercise's proof) are left out, the
    execution counts are numbered again from 1, and the translations are rebuilt. Every notebook is checked
    first: one that failed, holds an error, did not finish, or was translated refuses the whole adoption,
    changing nothing. Returns the notebooks changed.
    """
    taken, problems = {}, []
    for path in notebook_paths(names):
        if (folder / path.name).is_file():
            executed = nbformat.read(folder / path.name, as_version=4)
            problem = _not_adoptable(path, executed)
            if problem:
                problems.append(f"{shown(folder / path.name)} {problem}")
            else:
                taken[path] = executed
    if problems:
        others = f"python notebooks/series.py adopt {folder} {' '.join(p.stem for p in taken)}"
        raise Refused(
            f"nothing adopted: {'; '.join(problems)}" + (f" (or adopt the others alone: {others})" if taken else "")
        )
    if not taken:
        raise Refused(f"{shown(folder)} holds none of the notebooks asked for: give the folder of an executed run")
    for path, executed in taken.items():
        _take_outputs(path, executed)
    for lang in LANGUAGES:
        translate(names, lang)
    return [path.name for path in taken]


def _not_adoptable(path: Path, executed: nbformat.NotebookNode) -> str | None:
    """Why `executed` cannot give the committed notebook at `path` its outputs, with the fix; None if it can."""
    language = executed.metadata.get("language", "en")
    if language != "en":
        return (
            f"is the {LANGUAGES.get(language, language)} edition ({language}): adopt takes the English notebooks "
            "a run executed, the run's folder itself (e.g. runs/latest), and builds the translations from them"
        )
    status = executed.metadata.get("series", {}).get("status")
    if status:
        return f"did not finish ({status}): run it again"
    for number, cell in enumerate(executed.cells, 1):
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if errors or cell.get("metadata", {}).get("papermill", {}).get("exception"):
            error = f": {errors[0].ename}: {errors[0].evalue}" if errors else ""
            return f"failed in cell {number} (id {cell.id}){error}; fix it and run it again"
    ids = {c.id for c in executed.cells}
    missing = [c.id for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" and c.id not in ids]
    return f"lacks cells {', '.join(missing)}: run it from this code" if missing else None


def _take_outputs(path: Path, executed: nbformat.NotebookNode) -> None:
    """Give the committed notebook at `path` the outputs of `executed`, cell by cell id, counted again from 1."""
    outputs = {c.id: c.outputs for c in executed.cells if c.cell_type == "code"}
    nb = nbformat.read(path, as_version=4)
    for count, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), 1):
        cell.outputs, cell.execution_count = outputs[cell.id], count
    nbformat.write(nb, path)
