"""The series executed: prepared for nbval (`make test`), run with papermill into runs/<timestamp>/ (`make run`),
refreshed in place (`make notebooks`). Settings are set as papermill -p sets them: a cell after the settings cell.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

import nbformat

from . import exercises, pages
from .checks import checked_settings, claim_prepared, new_run_folder, require
from .pages import REPO, notebook_paths, settings, stamp, tagged
from .results import format_value, metrics_of, results_cell
from .translation import LANGUAGES, translate

# Kernels log a warning about unencrypted local TCP at every start; keep the run's log to what matters.
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]

# What `make test` gives every notebook that declares it: the CPU, and small exercises and benchmarks.
TEST_SETTINGS = {
    "device": "cpu",
    "exercise_epochs": 1,
    "exercise_limit": 2000,
    "spread_seeds": [1, 2],
    "bench_epochs": 2,
    "bench_limit": 5000,
}


def _shared(out: Path, values: dict) -> dict:
    """What every notebook of a run in `out` gets: no progress bars, the lesson's checkpoint in `out`, `values`."""
    return {"progress": False, "checkpoint": str(out / "lesson.ckpt")} | values


def _values(nb: nbformat.NotebookNode, path: Path, shared: dict, out: Path) -> dict:
    """The settings of `shared` that the notebook declares, and its own scratch folder under `out`."""
    declared = settings(nb)
    return {k: v for k, v in ({"work_dir": str(out / "work" / path.stem)} | shared).items() if k in declared}


def _prepared(path: Path, shared: dict, out: Path) -> nbformat.NotebookNode:
    """The notebook at `path` with its settings set by papermill's own parameterization, its results cell last."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = load_notebook_node(str(path))  # as papermill reads a notebook
    nb = parameterize_notebook(nb, _values(nb, path, shared, out))
    nb.cells.append(results_cell(nb))
    return nb


def prepare(out: Path = REPO / "runs" / "test", names: list[str] | None = None, check: bool = True) -> list[Path]:
    """Copies of the notebooks in out/prepared/ (a folder of prepare's, emptied) with TEST_SETTINGS, for nbval."""
    require("papermill", "prepare")
    out = out.resolve()
    shared = _shared(out, TEST_SETTINGS)
    claim_prepared(out)
    (out / "prepared").mkdir()
    paths = []
    for path in notebook_paths(names):
        nb = exercises.with_proofs(_prepared(path, shared, out), path.stem)  # make test proves every worked solution
        if not check:  # on other library versions the last digits move: only the ranges are checked
            for cell in tagged(nb, "nbval-check-output"):
                cell.metadata["tags"].remove("nbval-check-output")
        nbformat.write(nb, out / "prepared" / path.name)
        paths.append(out / "prepared" / path.name)
    return paths


def run(values: dict | None = None, out_root: Path = REPO / "runs", names: list[str] | None = None) -> Path:
    """Execute the series into a new out_root/<timestamp>/, checked first; out_root/latest moves if every one ran."""
    require("papermill", "run")
    values = checked_settings(values or {})
    out = new_run_folder(out_root.resolve())
    (out / "prepared").mkdir()
    shared = _shared(out, values)
    summary = [_execute(path, out, shared) for path in notebook_paths(names)]
    collect(out, summary)
    failed = [row["stem"] for row in summary if row["status"] != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
    latest = out.parent / f".latest-{out.name}"
    latest.symlink_to(out.name, target_is_directory=True)
    os.replace(latest, out.parent / "latest")  # atomically: latest is always a whole run
    return out


def _execute(path: Path, out: Path, shared: dict) -> dict:
    """Execute one notebook, prepared into out/prepared/, into `out`; return its row of the run's summary."""
    import papermill
    from nbclient.exceptions import DeadKernelError

    prepared = out / "prepared" / path.name
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(results_cell(nb))
    nbformat.write(nb, prepared)
    t0 = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(prepared),
            str(out / path.name),
            parameters=_values(nb, path, shared, out),
            cwd=str(pages.NOTEBOOKS),
            kernel_name="python3",
            progress_bar=False,
            extra_arguments=KERNEL_ARGS,
            kernel_manager_class=kernel_manager(),
        )
        status = "ok"
    except papermill.PapermillExecutionError as err:
        status = f"FAILED: {err.ename}: {err.evalue}"  # whole: a message's fix often comes last
    except DeadKernelError:
        status = "FAILED: the kernel died (out of memory?)"
    row = {"stem": path.stem, "status": status, "seconds": time.perf_counter() - t0}
    print(f"{path.stem}: {status} in {row['seconds']:.1f} s", flush=True)
    return row


@functools.cache
def kernel_manager() -> type:
    """jupyter_client's AsyncKernelManager less the SIGINT it sends a kernel just before asking it to shut down."""
    # A kernel finishing its last reply took that SIGINT as a KeyboardInterrupt and logged it at ERROR (one run in
    # ten or twenty). The shutdown request alone stops an idle kernel; a busy one is still terminated after a wait.
    from jupyter_client.manager import AsyncKernelManager

    class SeriesKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:  # an interrupt asked for outside shutdown (a cell's timeout) still goes
                await super()._async_interrupt_kernel()

    return SeriesKernelManager


def collect(out: Path, summary: list[dict]) -> None:
    """Write out/metrics.json for `summary`'s rows (stem, status, seconds) and print the run's summary."""
    executed = {row["stem"]: out / f"{row['stem']}.ipynb" for row in summary}  # none where papermill never began
    metrics = {stem: metrics_of(nbformat.read(p, as_version=4)) if p.is_file() else {} for stem, p in executed.items()}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"\n{'notebook':<24} {'status':<12} {'seconds':>8}  key results, or what failed")
    for row in summary:
        word, _, error = row["status"].partition(": ")
        said = error or ", ".join(f"{k}={format_value(v)}" for k, v in list(metrics[row["stem"]].items())[:4])
        print(f"{row['stem']:<24} {word:<12} {row['seconds']:>8.1f}  {said}")
    print(f"\n{out}: the executed notebooks and metrics.json")


def refresh(names: list[str] | None = None) -> None:
    """Stamp and execute the committed notebooks in place (no results cell), then translate them."""
    from nbclient import NotebookClient

    os.environ.setdefault("HELPERS_PROGRESS", "0")
    for path in notebook_paths(names):
        stamp(path)
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(
            nb,
            timeout=1200,
            kernel_name="python3",
            record_timing=False,
            extra_arguments=KERNEL_ARGS,
            kernel_manager_class=kernel_manager(),
            resources={"metadata": {"path": str(pages.NOTEBOOKS)}},
        ).execute()
        nbformat.write(nb, path)
        print(f"{path.name}: executed in place in {time.perf_counter() - t0:.1f} s", flush=True)
    for lang in LANGUAGES:
        translate(names, lang)
