"""The exercises' worked solutions in the notebooks: proof cells that `prepare` adds after them.

Each cell tagged `solution` is Markdown that shows one worked solution folded (`<details>`), its one source: the
learner's `qN.solution()` reads its code from there (helpers_exercises.solutions). A notebook run from top to bottom
executes no solution. So that `make test` still proves each solution passes its check, `prepare` puts a proof cell
(tagged `solution-proof`) after each one, which runs the cell's code in the notebook's namespace and asserts the
check passed; `run` adds none.
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


def solution_code(cell: nbformat.NotebookNode) -> str:
    """The code of a cell tagged `solution`: `<details><summary>Solution N: title</summary>`, then a Python block."""
    import helpers_exercises

    match = helpers_exercises.SOLUTION.fullmatch(cell.source)
    if not match:
        raise ValueError(f"cell {cell.id} is tagged solution but is not a folded 'Solution N: title' with its code")
    return match[3]


def proof_cell(exercise: Any, solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A code cell that runs the solution cell's code, then asserts the exercise's check passes (open-ended: runs)."""
    q = f"q{exercise.number}"
    lines = [f"# @title Proof: Solution {exercise.number} passes its check (added by `series.py prepare`)"]
    lines += [solution_code(solution), ""]
    if exercise.check_answer is not None:
        lines += [f"{q}.check()", f'assert {q}.passed, "Solution {exercise.number} does not pass its check"']
    metadata = {"tags": [PROOF], "cellView": "form", "jupyter": {"source_hidden": True}}
    return nbformat.v4.new_code_cell("\n".join(lines), id=f"{solution.id}-proof", metadata=metadata)


def with_proofs(nb: nbformat.NotebookNode, stem: str) -> nbformat.NotebookNode:
    """`nb` with a proof cell after each cell tagged `solution`: what `make test` executes."""
    cells, exercises = _tagged(nb, "solution"), exercises_of(stem)
    if len(cells) != len(exercises):
        raise ValueError(f"{stem}: {len(cells)} cells tagged solution, for {len(exercises)} exercises")
    for cell, exercise in zip(cells, exercises):
        nb.cells.insert(nb.cells.index(cell) + 1, proof_cell(exercise, cell))
    return nb
