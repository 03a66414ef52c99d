"""The worked solutions: folded Markdown cells tagged `solution`, the code `qN.solution()` reads, never executed by a
Run All; so `prepare` (not `run`) adds a proof cell after each, which runs it and asserts that its check passed."""

from __future__ import annotations

from typing import Any

import nbformat

from .pages import tagged

PROOF = "solution-proof"  # the tag of the cells `prepare` adds after each solution


def exercises_of(stem: str) -> list[Any]:
    """The exercises (helpers_exercises.Exercise) of the notebook `stem`, in order; none for most notebooks."""
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
    cells, exercises = tagged(nb, "solution"), exercises_of(stem)
    if len(cells) != len(exercises):
        raise ValueError(f"{stem}: {len(cells)} cells tagged solution, for {len(exercises)} exercises")
    for cell, exercise in zip(cells, exercises):
        nb.cells.insert(nb.cells.index(cell) + 1, proof_cell(exercise, cell))
    return nb
