"""Each notebook's key results, the dict whose source is its metadata's series.results: a cell tagged `metrics`, added
to executed copies only, displays it as RESULTS_MIME with an empty text/plain (nothing shows); `metrics_of` reads it."""

from __future__ import annotations

import json
from string import Template
from typing import Any

import nbformat

from .pages import tagged

RESULTS_MIME = "application/vnd.series.results+json"
# Only IPython and json, not helpers: the results are kept exact, in JSON's own types (dict keys become strings).
RECORD = Template(
    """# @title Record this notebook's key numbers (added where the series runs headless, for metrics.json)
def _record_results(results):
    import json

    from IPython.display import display

    display({"$mime": json.loads(json.dumps(results)), "text/plain": ""}, raw=True)


_record_results(
$expression
)"""
)


def results_expression(nb: nbformat.NotebookNode) -> str:
    """The source of the dict display that names a notebook's results, from its metadata."""
    return "\n".join(nb.metadata["series"]["results"])


def results_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The code cell, tagged `metrics` and folded, that records the results `nb`'s metadata names."""
    metadata = {"tags": ["metrics"], "cellView": "form", "jupyter": {"source_hidden": True}}
    source = RECORD.substitute(mime=RESULTS_MIME, expression=results_expression(nb))
    return nbformat.v4.new_code_cell(source, id="series-results", metadata=metadata)


def metrics_of(nb: nbformat.NotebookNode) -> dict:
    """The results that an executed notebook's cell tagged `metrics` recorded."""
    outputs = (output.get("data", {}) for cell in tagged(nb, "metrics") for output in cell.get("outputs", []))
    found = next((data[RESULTS_MIME] for data in outputs if RESULTS_MIME in data), {})
    return json.loads(found) if isinstance(found, str) else dict(found)


def format_value(value: Any) -> str:
    """A result as a person reads it: floats to four places (tiny ones as 1.2e-07), in lists and dicts too."""
    if isinstance(value, float):
        return f"{value:.1e}" if 0 < abs(value) < 5e-4 else f"{value:.4f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(format_value, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    return str(value)
