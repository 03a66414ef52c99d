"""How long each notebook takes a learner: prose, code, run time, and 10 minutes an exercise (`series.py times`)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from .pages import notebook_paths

WORDS_PER_MINUTE, LINES_PER_MINUTE, MINUTES_PER_EXERCISE = 150, 10, 10
SKIPPED = {"parameters", "setup", "nav"}  # the settings, the set-up and the links to the neighbours: run, not read


def _minutes(cells: list, ran: dict[str, float]) -> float:
    """Reading, code and run time of `cells`, in minutes; `ran`: each cell's seconds from papermill's metadata."""
    total = 0.0
    for cell in cells:
        if SKIPPED & set(cell.metadata.get("tags", [])):
            continue
        if cell.cell_type == "markdown":
            text = re.sub(r"\(https?://[^)]*\)|<[^>]+>|[#*`|>-]", " ", cell.source)
            total += len(text.split()) / WORDS_PER_MINUTE
        elif cell.cell_type == "code":
            lines = [line for line in cell.source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
            total += len(lines) / LINES_PER_MINUTE
    return total + sum(ran.get(cell.get("id"), 0.0) for cell in cells) / 60


def times(run: Path | None = None) -> list[dict]:
    """Each notebook's minutes and its lesson part's (before "Going further"), its cells' run times from `run`."""
    rows = []
    for path in notebook_paths():
        done = nbformat.read(run / path.name, as_version=4).cells if run and (run / path.name).is_file() else []
        ran = {cell.get("id"): cell.metadata.get("papermill", {}).get("duration") or 0.0 for cell in done}
        cells = nbformat.read(path, as_version=4).cells
        start = next((i for i, c in enumerate(cells) if "going-further" in c.metadata.get("tags", [])), None)
        row = {"notebook": path.stem, "minutes": _minutes(cells, ran), "run_s": sum(ran.values())}
        row["exercises"] = sum("solution" in c.metadata.get("tags", []) for c in cells)
        if start is not None:
            row["lesson_minutes"] = _minutes(cells[:start], ran)
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """The rows as MAINTAINERS.md shows them, with the totals."""
    lines = [
        "| notebook | lesson part (min) | in all (min) | of which run (s) | exercises | with exercises (min) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lesson = f"{r['lesson_minutes']:.0f}" if "lesson_minutes" in r else "-"
        done = r["minutes"] + MINUTES_PER_EXERCISE * r["exercises"]
        cells = (r["notebook"], lesson, f"{r['minutes']:.0f}", f"{r['run_s']:.0f}", r["exercises"], f"{done:.0f}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lesson = sum(r.get("lesson_minutes", r["minutes"] if r["notebook"].startswith("01") else 0) for r in rows)
    total, run_s, count = (sum(r[key] for r in rows) for key in ("minutes", "run_s", "exercises"))
    lines.append(f"| the lesson (01, and 02-06's lesson parts) | {lesson:.0f} | | | | |")
    done = total + MINUTES_PER_EXERCISE * count
    lines.append(f"| the whole series | | {total:.0f} | {run_s:.0f} | {count} | {done:.0f} |")
    return "\n".join(lines)
