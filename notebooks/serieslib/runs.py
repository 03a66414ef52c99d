"""The series executed: prepared for nbval (`make test`), run with papermill (`make run`), refreshed in place
(`make notebooks`); and what an executed series leaves: metrics.json, figures, translations, the report.

What each command may touch is checked first (`checks`): `prepare` writes only into a new or empty folder, or one
it marked as its own; `run` only into a new folder of its own, out_root/<timestamp>/, and moves out_root/latest to
it once it has finished. A notebook's settings are the `name = value` lines of its settings cell (tagged
`parameters`); a run sets them as papermill does everywhere, with a cell of its own after that one.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import nbformat

from . import alt_text, exercises, pages
from .checks import LATEST_MARK, checked_settings, claim_prepared, new_run_folder, require
from .pages import REPO, notebook_paths, settings, shown, stamp, tagged
from .report import write_report
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
UNFINISHED = ("interrupted", "kernel died")  # a notebook's status when its execution stopped part-way


def _not_kernel_death(record: logging.LogRecord) -> bool:
    """A log filter: False for nbclient's and asyncio's records of a dead (or stopped) kernel; the run says it once."""
    text = record.getMessage()
    return not (text.startswith("Kernel died while") or ("never retrieved" in text and "DeadKernelError" in text))


# ---------------------------------------------------------------------------- prepare and run


def _shared(out: Path, values: dict) -> dict:
    """What every notebook of a run in `out` gets: no progress bars, the lesson's checkpoint in `out`, `values`."""
    return {"progress": False, "checkpoint": str(out / "lesson.ckpt")} | values


def _values(nb: nbformat.NotebookNode, path: Path, shared: dict, out: Path) -> dict:
    """The settings of `shared` that the notebook declares, with its scratch folder under `out` (no other run or open
    notebook shares it): what papermill passes it (a setting it lacks would only make papermill warn)."""
    declared = settings(nb)
    return {k: v for k, v in ({"work_dir": str(out / "work" / path.stem)} | shared).items() if k in declared}


def _prepared(path: Path, shared: dict, out: Path) -> nbformat.NotebookNode:
    """The notebook at `path` ready for nbval: its settings set by papermill's own parameterization (a cell tagged
    `injected-parameters` after the settings cell, as `papermill -p` makes), its results cell appended."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = load_notebook_node(str(path))  # as papermill reads a notebook
    nb = parameterize_notebook(nb, _values(nb, path, shared, out))
    nb.cells.append(results_cell(nb))
    return nb


def prepare(
    values: dict | None = None,
    out: Path = REPO / "runs" / "test",
    names: list[str] | None = None,
    check: bool = True,
) -> list[Path]:
    """Copies of the notebooks in out/prepared/ with the test settings (or `values`), committed outputs kept.

    nbval then executes the copies and compares the outputs of the cells tagged nbval-check-output with the
    committed ones; with `check=False` those tags go (on other library versions the last digits move, and only
    the ranges are checked). `out` must be new, empty, or a folder prepare made (it is emptied): anything else
    is refused.
    """
    require("papermill", "prepare")
    out = out.resolve()
    shared = _shared(out, TEST_SETTINGS if values is None else checked_settings(values))
    claim_prepared(out)
    (out / "prepared").mkdir()
    (out / "parameters.json").write_text(json.dumps(shared, indent=2) + "\n")
    paths = []
    for path in notebook_paths(names):
        nb = exercises.with_proofs(_prepared(path, shared, out), path.stem)  # make test proves every worked solution
        if not check:
            for cell in tagged(nb, "nbval-check-output"):
                cell.metadata["tags"].remove("nbval-check-output")
        nbformat.write(nb, out / "prepared" / path.name)
        paths.append(out / "prepared" / path.name)
    return paths


def run(
    values: dict | None = None,
    out_root: Path = REPO / "runs",
    names: list[str] | None = None,
    langs: list[str] | None = None,
) -> Path:
    """Execute the series with papermill into a new out_root/<timestamp>/, with a report; return that folder.

    For each language in `langs` (e.g. ["zh"]) the executed notebooks are also written translated into
    out_root/<timestamp>/<lang>/: the same code and outputs, the Markdown from notebooks/<lang>/, no second run.
    Everything that can be checked is checked before the first kernel starts. On Ctrl-C the notebook in progress
    is marked interrupted, the report covers what ran, and out_root/latest stays where it was.
    """
    require("papermill", "run")
    for lang in langs or []:
        translate(names, lang, check=True)  # a missing or stale translation fails before the run, not after it
    values = checked_settings(values or {})
    out = new_run_folder(out_root.resolve())
    (out / "prepared").mkdir()
    shared = _shared(out, values)
    summary, stopped = _execute_all(notebook_paths(names), out, shared)
    collect(out, summary, shared, langs)
    if stopped:
        finished = [row["stem"] for row in summary if row["status"] not in UNFINISHED]
        print(
            f"Interrupted (Ctrl-C) during {stopped}: it is marked so, and the report {shown(out / 'index.html')} "
            f"holds the {len(finished)} notebook(s) before it; {shown(out.parent / 'latest')} is left as it was.",
            file=sys.stderr,
        )
        raise SystemExit(130)
    _point_latest(out)
    failed = [row["stem"] for row in summary if row["status"] != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
    return out


def _execute_all(paths: list[Path], out: Path, shared: dict) -> tuple[list[dict], str | None]:
    """Execute each notebook in turn; stop at Ctrl-C. Returns the summary's rows and the stem interrupted, if any."""
    for name in ("papermill", "asyncio"):  # nbclient logs through papermill's logger
        logging.getLogger(name).addFilter(_not_kernel_death)
    summary = []
    for path in paths:
        t0 = time.perf_counter()
        try:
            summary.append(_execute(path, out, shared))
        except KeyboardInterrupt:
            summary.append(_unfinished(path, out, "interrupted", time.perf_counter() - t0))
            return summary, path.stem
    return summary, None


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
        return _unfinished(path, out, "kernel died", time.perf_counter() - t0)
    row = {"stem": path.stem, "status": status, "seconds": time.perf_counter() - t0}
    print(f"{path.stem}: {status} in {row['seconds']:.1f} s", flush=True)
    return row


def _unfinished(path: Path, out: Path, status: str, seconds: float) -> dict:
    """Mark out/<notebook> as stopped part-way (`status`: interrupted, kernel died); return its summary row.

    What papermill saved of it is kept (it saves the notebook as it starts, outputs cleared; before that, the
    committed notebook stands in, its outputs cleared), with a first cell and metadata that say it did not
    finish: adopt refuses it, and the report shows it.
    """
    executed = out / path.name
    started = executed.is_file()
    nb = nbformat.read(executed if started else path, as_version=4)
    if not started:
        for cell in (c for c in nb.cells if c.cell_type == "code"):
            cell.outputs, cell.execution_count = [], None
    nb.metadata.setdefault("series", {})["status"] = status
    note = f"**This notebook did not finish ({status}):** the outputs below stop where its execution stopped."
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(note, id="series-unfinished"))
    nbformat.write(nb, executed)
    print(f"{path.stem}: {status} after {seconds:.1f} s; its outputs until then are kept", file=sys.stderr, flush=True)
    return {"stem": path.stem, "status": status, "seconds": seconds}


@functools.cache
def kernel_manager() -> type:
    """jupyter_client's AsyncKernelManager, with the website's alt text loaded into each kernel (`alt_text`), less the
    SIGINT it sends a kernel just before asking it to shut down.

    A kernel still finishing its last reply takes that signal as a KeyboardInterrupt and logs "KeyboardInterrupt
    caught in kernel." at ERROR: one run in ten or twenty began with that line. The shutdown request alone stops
    an idle kernel; a busy one is terminated after the manager's wait, as before.
    """
    from jupyter_client.manager import AsyncKernelManager

    class SeriesKernelManager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            kw["env"] = {**kw.get("env", os.environ), **alt_text.kernel_env()}
            return await super()._async_pre_start_kernel(**kw)

        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:  # an interrupt asked for outside shutdown (a cell's timeout) still goes
                await super()._async_interrupt_kernel()

    return SeriesKernelManager


def collect(out: Path, summary: list[dict], parameters: dict, langs: list[str] | None = None) -> dict:
    """For the executed notebooks in `out`: metrics.json, figures/, their translations and index.html.

    `summary` has a row per notebook: its stem, status ("ok", what failed, or one of UNFINISHED) and seconds.
    An unfinished notebook is not translated (its first cell says it stopped). Returns the metrics.
    """
    (out / "figures").mkdir(exist_ok=True)
    metrics = {}
    for row in summary:
        executed = nbformat.read(out / f"{row['stem']}.ipynb", as_version=4)
        metrics[row["stem"]] = metrics_of(executed)
        row["figures"] = save_figures(executed, row["stem"], out / "figures")
        row["languages"] = [] if row["status"] in UNFINISHED else list(langs or [])
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    translated = [row["stem"] for row in summary if row["languages"]]
    for lang in langs or []:
        translate(translated, lang, source=out, target=out / lang)
        print(f"{LANGUAGES[lang]}: the executed notebooks, translated, in {out / lang}", flush=True)
    write_report(out, summary, metrics, parameters, langs)
    print(f"\n{'notebook':<24} {'status':<12} {'seconds':>8}  key results, or what failed")
    for row in summary:
        print(_summary_line(row, metrics[row["stem"]]))
    print(f"\nreport: {out / 'index.html'} (executed notebooks, figures/ and metrics.json beside it)")
    return metrics


def _summary_line(row: dict, metrics: dict) -> str:
    """One notebook in the run's summary: status, seconds, and its first results, or its error in full."""
    word, _, error = row["status"].partition(": ")
    shown_ = error or ", ".join(f"{k}={format_value(v)}" for k, v in list(metrics.items())[:4])
    return f"{row['stem']:<24} {word:<12} {row['seconds']:>8.1f}  {shown_}"


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
    """Point out_root/latest at the run in `out`: a symlink swapped in atomically, else (no symlinks) a marked copy."""
    latest = out.parent / "latest"
    if (latest / LATEST_MARK).is_file() and not latest.is_symlink():
        shutil.rmtree(latest)  # the copy an earlier run made
    link = out.parent / f".latest-{out.name}"
    try:
        link.symlink_to(out.name, target_is_directory=True)
        os.replace(link, latest)
    except OSError:  # no symlinks (Windows without developer mode): copy instead
        link.unlink(missing_ok=True)
        shutil.copytree(out, latest)
        (latest / LATEST_MARK).write_text(f"A copy of {out.name}, made by `series.py run` in place of a symlink.\n")


# ---------------------------------------------------------------------------- refresh and adopt


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
            kernel_manager_class=kernel_manager(),
            resources={"metadata": {"path": str(pages.NOTEBOOKS)}},
        )
        client.execute()
        nbformat.write(nb, path)
        print(f"{path.name}: executed in place in {time.perf_counter() - t0:.1f} s", flush=True)
    for lang in LANGUAGES:
        translate(names, lang)
