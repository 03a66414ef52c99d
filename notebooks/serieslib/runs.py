"""The series executed: prepared for nbval (`make test`), run with papermill (`make run`), refreshed in place
(`make notebooks`), or a run's outputs adopted; and what an executed series leaves: metrics.json, figures, report."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from pathlib import Path

import nbformat

from . import pages
from .pages import REPO, notebook_paths, shown, stamp, tagged
from .report import write_report
from .results import format_value, metrics_of, results_cell
from .translation import LANGUAGES, translate

# Kernels log a warning about unencrypted local TCP at every start; keep the run's log to what matters.
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]

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


def _prepared(path: Path, shared: dict) -> nbformat.NotebookNode:
    """The notebook at `path` ready to execute: the parameters of `shared` it declares injected, its results cell
    appended (papermill would warn about parameters it does not declare)."""
    import papermill

    declared = papermill.inspect_notebook(str(path))
    parameters = {k: v for k, v in shared.items() if k in declared}
    nb = papermill.execute_notebook(
        str(path), None, parameters=parameters, prepare_only=True, progress_bar=False, log_output=False
    )
    nb.cells.append(results_cell(nb))
    return nb


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
    out = out.resolve()  # the kernels run in out/prepared/: paths passed to them must not be relative
    shared = _shared(out, TEST_PARAMETERS if parameters is None else parameters)
    if out.exists():
        shutil.rmtree(out)
    (out / "prepared").mkdir(parents=True)
    (out / "parameters.json").write_text(json.dumps(shared, indent=2) + "\n")
    paths = []
    for path in notebook_paths(names):
        nb = _prepared(path, shared)
        if not check:
            for cell in tagged(nb, "nbval-check-output"):
                cell.metadata["tags"].remove("nbval-check-output")
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
    out = out_root.resolve() / time.strftime("%Y%m%d-%H%M%S")  # resolved: the kernels run in notebooks/
    (out / "prepared").mkdir(parents=True, exist_ok=True)
    shared = _shared(out, parameters or {})
    summary = [_execute(path, out, shared) for path in notebook_paths(names)]
    collect(out, summary, shared, langs)
    _point_latest(out)
    failed = [row["stem"] for row in summary if row["status"] != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
    return out


def _execute(path: Path, out: Path, shared: dict) -> dict:
    """Execute one notebook, prepared into out/prepared/, into `out`; return its row of the run's summary."""
    import papermill

    prepared = out / "prepared" / path.name
    nbformat.write(_prepared(path, shared), prepared)
    t0 = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(prepared),
            str(out / path.name),
            cwd=str(pages.NOTEBOOKS),
            kernel_name="python3",
            progress_bar=False,
            extra_arguments=KERNEL_ARGS,
        )
        status = "ok"
    except papermill.PapermillExecutionError as err:
        status = f"FAILED: {err.ename}: {err.evalue[:200]}"
    row = {"stem": path.stem, "status": status, "seconds": time.perf_counter() - t0}
    print(f"{path.stem}: {status} in {row['seconds']:.1f} s", flush=True)
    return row


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
        results = ", ".join(f"{k}={format_value(v)}" for k, v in list(metrics[row["stem"]].items())[:4])
        print(f"{row['stem']:<24} {row['status'][:8]:<8} {row['seconds']:>8.1f}  {results}")
    print(f"\nreport: {out / 'index.html'} (executed notebooks, figures/ and metrics.json beside it)")
    return metrics


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


def _point_latest(out: Path) -> None:
    """Point out_root/latest at the run in `out`."""
    latest = out.parent / "latest"
    if latest.is_symlink() or latest.is_file():
        latest.unlink()
    elif latest.is_dir():
        shutil.rmtree(latest)
    try:
        latest.symlink_to(out.name, target_is_directory=True)
    except OSError:  # no symlinks (Windows without developer mode): copy instead
        shutil.copytree(out, latest)


def refresh(names: list[str] | None = None) -> None:
    """Stamp, execute the committed notebooks in place so their stored outputs match the code, then translate.

    No results cell is added: the committed notebooks keep their results in their metadata only.
    """
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
            resources={"metadata": {"path": str(pages.NOTEBOOKS)}},
        )
        client.execute()
        nbformat.write(nb, path)
        print(f"{path.name}: executed in place in {time.perf_counter() - t0:.1f} s", flush=True)
    for lang in LANGUAGES:
        translate(names, lang)


def adopt(folder: Path, names: list[str] | None = None) -> list[str]:
    """Make the outputs of an executed run (`run`'s folder, e.g. a GPU's) the committed notebooks' outputs.

    Cells are matched by id: the cells a run adds (papermill's injected parameters, the results cell) are left
    out, the execution counts are numbered again from 1, and the translations are rebuilt. Returns the
    notebooks changed.
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
            raise ValueError(f"{shown(folder / path.name)} lacks cells {', '.join(missing)}: run it from this code")
        for count, cell in enumerate(code, 1):
            cell.outputs, cell.execution_count = executed[cell.id].outputs, count
        nbformat.write(nb, path)
        changed.append(path.name)
    for lang in LANGUAGES:
        translate(names, lang)
    return changed
