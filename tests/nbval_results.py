"""A pytest plugin for `make test`: keep the notebooks that nbval executes, and write the run's results.

nbval executes each prepared notebook (`notebooks/series.py prepare`) cell by cell and compares the
outputs of the cells tagged nbval-check-output with the committed ones. It keeps the outputs it got on
each cell item; this plugin writes every executed notebook beside the prepared ones and, after the last,
what `make run` writes (`serieslib.runs.collect`: metrics.json).
tests/test_notebooks.py then checks the results without executing anything again.

    pytest -p nbval_results --nbval-lax --nbval-current-env runs/test/prepared/*.ipynb tests/test_notebooks.py
"""

import sys
import time
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))

from serieslib import runs  # noqa: E402


def _notebook_cell(item: pytest.Item) -> bool:
    return hasattr(item, "test_outputs") and hasattr(item.parent, "nb")


class Recorder:
    def __init__(self):
        self.summary: list[dict] = []
        self.started: dict[str, float] = {}
        self.failed: dict[str, str] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if call.when == "call" and _notebook_cell(item):
            item.cell.outputs = item.test_outputs or []
            item.cell.execution_count = item.cell_num + 1
            report = outcome.get_result()
            if report.failed and item.parent.name not in self.failed:
                self.failed[item.parent.name] = f"FAILED at cell {item.cell_num}"

    def pytest_runtest_setup(self, item):
        if _notebook_cell(item):
            self.started.setdefault(item.parent.name, time.perf_counter())

    def pytest_runtest_teardown(self, item, nextitem):
        if not _notebook_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
            return
        prepared = Path(str(item.parent.fspath))
        out = prepared.parent.parent  # prepare wrote out/prepared/NN.ipynb; the run's results go into out/
        nbformat.write(item.parent.nb, out / prepared.name)
        seconds = time.perf_counter() - self.started[item.parent.name]
        status = self.failed.get(item.parent.name, "ok")
        self.summary.append({"stem": prepared.stem, "status": status, "seconds": seconds})
        if nextitem is None or not _notebook_cell(nextitem):  # the last notebook: the run is complete
            try:
                runs.collect(out, self.summary)
            except Exception as error:  # reported by the tests that read the results, not as a broken teardown
                item.config.series_run_error = f"{type(error).__name__}: {error}"
            item.config.series_run = out


def pytest_configure(config):
    config.pluginmanager.register(Recorder(), "nbval_results_recorder")
