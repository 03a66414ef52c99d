"""The exercises' worked solutions in the notebooks, generated from helpers_exercises, their one source.

Each cell tagged `solution` is Markdown that shows one worked solution folded (`<details>`), written by `stamp`
from the module's code: a notebook run from top to bottom executes no solution. So that `make test` still proves
each solution passes its check, `prepare` puts a proof cell (tagged `solution-proof`) after each one, which runs
the solution's code in the notebook's namespace and asserts the check passed; `run` adds none.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import nbformat

REPO = Path(__file__).resolve().parents[2]
PROOF = "solution-proof"  # the tag of the cells `prepare` adds after each solution


def _tagged(nb: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    return [cell for cell in nb.cells if tag in cell.get("metadata", {}).get("tags", [])]


def exercises_of(stem: str) -> list[Any]:
    """The exercises (helpers_exercises.Exercise) of the notebook `stem`, in order; none for most notebooks."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import helpers_exercises  # imports no torch until a check runs: the tooling stays light

    return helpers_exercises.REGISTRY.get(stem, [])


def solution_markdown(exercise: Any) -> str:
    """An exercise's worked solution as Markdown that every front end shows folded: its title, then its code."""
    summary = f"Solution {exercise.number}: {exercise.title}"
    return f"<details><summary>{summary}</summary>\n\n```python\n{exercise.code.strip()}\n```\n</details>"


def stamp_solutions(nb: nbformat.NotebookNode, stem: str) -> None:
    """Write each cell tagged `solution` of `nb` as its exercise's solution Markdown, in the exercises' order."""
    cells, exercises = _tagged(nb, "solution"), exercises_of(stem)
    if len(cells) != len(exercises):
        raise ValueError(f"{stem}: {len(cells)} cells tagged solution, for {len(exercises)} exercises")
    for cell, exercise in zip(cells, exercises):
        markdown = nbformat.v4.new_markdown_cell(solution_markdown(exercise), id=cell.id)
        markdown.metadata = {"tags": ["solution"]}
        nb.cells[nb.cells.index(cell)] = markdown


def proof_cell(exercise: Any, solution_id: str) -> nbformat.NotebookNode:
    """A code cell that runs the exercise's worked solution, then asserts its check passes (open-ended: runs it)."""
    q = f"q{exercise.number}"
    lines = [f"# @title Proof: Solution {exercise.number} passes its check (added by `series.py prepare`)"]
    lines += [exercise.code.strip(), ""]
    if exercise.check_answer is not None:
        lines += [f"{q}.check()", f'assert {q}.passed, "Solution {exercise.number} does not pass its check"']
    metadata = {"tags": [PROOF], "cellView": "form", "jupyter": {"source_hidden": True}}
    return nbformat.v4.new_code_cell("\n".join(lines), id=f"{solution_id}-proof", metadata=metadata)


def with_proofs(nb: nbformat.NotebookNode, stem: str) -> nbformat.NotebookNode:
    """`nb` with a proof cell after each cell tagged `solution`: what `make test` executes."""
    for cell, exercise in zip(_tagged(nb, "solution"), exercises_of(stem)):
        nb.cells.insert(nb.cells.index(cell) + 1, proof_cell(exercise, cell.id))
    return nb
