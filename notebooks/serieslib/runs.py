"""The series executed: prepared for nbval (`make test`), run with papermill (`make run`), refreshed in place
(`make notebooks`), or a run's outputs adopted; and what an executed series leaves: metrics.json, figures, report.

What each command may touch: `prepare` writes only into a new or empty folder, or one it marked as its own;
`run` only into a new folder of its own, out_root/<timestamp>/, and moves out_root/latest to it once it has
finished; `adopt` changes nothing unless every notebook it takes ran to its end without an error.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from . import exercises, pages
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

# Parameters that name a file or folder: resolved from where the command was typed, as the kernels run in notebooks/.
PATH_PARAMETERS = ("data_root", "checkpoint")
PREPARED_MARK = ".series-prepared"  # inside the folder prepare made: the only non-empty folder it empties
LATEST_MARK = ".series-latest"  # inside the copy that stands for out_root/latest where symlinks are not allowed
UNFINISHED = ("interrupted", "kernel died")  # a notebook's status when its execution stopped part-way
# Asked of a subprocess, so that this process never loads torch: the check each notebook's first cell makes.
DEVICE_CHECK = "import json, sys, helpers; helpers.as_device(json.loads(sys.argv[1]), sys.argv[2])"


class Refused(ValueError):
    """What a command will not do, and how to fix it; the command line prints it as one line."""


def _not_kernel_death(record: logging.LogRecord) -> bool:
    """A log filter: False for nbclient's and asyncio's records of a dead (or stopped) kernel; the run says it once."""
    text = record.getMessage()
    return not (text.startswith("Kernel died while") or ("never retrieved" in text and "DeadKernelError" in text))


# ---------------------------------------------------------------------------- checks before any kernel starts


def checked_parameters(parameters: dict) -> dict:
    """`parameters` with their paths absolute and their device checked: refused here, not by every notebook."""
    resolved = {
        k: str(Path(v).expanduser().resolve()) if k in PATH_PARAMETERS and isinstance(v, str) else v
        for k, v in parameters.items()
    }
    if resolved.get("device") is not None:
        check_device(resolved["device"], " (-p device)")
    elif os.environ.get("HELPERS_DEVICE"):
        check_device(os.environ["HELPERS_DEVICE"], " (from the environment variable HELPERS_DEVICE)")
    return resolved


def check_device(device: object, source: str) -> None:
    """Refuse a device that helpers.as_device refuses here, with its message; `source` says where it came from."""
    done = subprocess.run(
        [sys.executable, "-c", DEVICE_CHECK, json.dumps(device), source], cwd=REPO, capture_output=True, text=True
    )
    if done.returncode:
        lines = done.stderr.strip().splitlines() or [f"checking the device {device!r} failed ({done.returncode})"]
        raise Refused(lines[-1].removeprefix("ValueError: "))


def claim_prepared(out: Path) -> None:
    """Make `out` prepare's folder, empty but for its mark: a new or empty folder, or one prepare marked before."""
    if out.exists() and not out.is_dir():
        raise Refused(f"{shown(out)} is a file, not a folder: pass --out a new folder, e.g. --out runs/test")
    if out.is_dir() and any(out.iterdir()):
        if not _made_by_prepare(out):
            raise Refused(
                f"{shown(out)} is not empty and prepare did not make it (no {PREPARED_MARK} in it); prepare "
                "empties its folder, so it writes only into a new or empty one: pass --out e.g. runs/test"
            )
        shutil.rmtree(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / PREPARED_MARK).write_text("Made by `python notebooks/series.py prepare`, which empties it each time.\n")
    except OSError as err:
        raise Refused(f"cannot write into {shown(out)} ({err.strerror}): pass --out a writable folder") from None


def _made_by_prepare(out: Path) -> bool:
    """Whether prepare made the folder: its mark, or (made before the mark) its parameters.json and prepared/."""
    return (out / PREPARED_MARK).is_file() or ((out / "parameters.json").is_file() and (out / "prepared").is_dir())


def new_run_folder(out_root: Path) -> Path:
    """A new folder out_root/<timestamp>, made atomically: a run that starts in the same second gets <timestamp>-2."""
    if out_root.exists() and not out_root.is_dir():
        raise Refused(f"{shown(out_root)} is a file, not a folder for runs: move it away, or pass --out another folder")
    _check_latest(out_root / "latest")
    stamp_ = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        out = out_root / (stamp_ if n == 1 else f"{stamp_}-{n}")
        try:
            out.mkdir(parents=True)  # no exist_ok: of two runs, only one makes it
            return out
        except FileExistsError:
            continue
        except OSError as err:
            raise Refused(
                f"cannot make a run's folder in {shown(out_root)} ({err.strerror}): "
                "make it a writable folder, or pass --out another one"
            ) from None
    raise Refused(f"{shown(out_root)} already holds 999 runs started at {stamp_}: pass --out another folder")


def _check_latest(latest: Path) -> None:
    """Refuse to start a run whose out_root/latest is something run did not make: it would be replaced at the end."""
    if latest.is_symlink() or not latest.exists() or (latest / LATEST_MARK).is_file():
        return
    raise Refused(f"{shown(latest)} is not the link (or copy) that run makes there: move it away, then run again")


# ---------------------------------------------------------------------------- prepare and run


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
    `out` must be new, empty, or a folder prepare made (it is emptied): anything else is refused.
    """
    out = out.resolve()  # the kernels run in out/prepared/: paths passed to them must not be relative
    shared = _shared(out, TEST_PARAMETERS if parameters is None else checked_parameters(parameters))
    claim_prepared(out)
    (out / "prepared").mkdir()
    (out / "parameters.json").write_text(json.dumps(shared, indent=2) + "\n")
    paths = []
    for path in notebook_paths(names):
        nb = exercises.with_proofs(_prepared(path, shared), path.stem)  # make test proves every worked solution
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
    """Execute the series with papermill into a new out_root/<timestamp>/, with a report; return that folder.

    For each language in `langs` (e.g. ["zh"]) the executed notebooks are also written translated into
    out_root/<timestamp>/<lang>/: the same code and outputs, the Markdown from notebooks/<lang>/, no second run.
    Everything that can be checked is checked before the first kernel starts. On Ctrl-C the notebook in progress
    is marked interrupted, the report covers what ran, and out_root/latest stays where it was.
    """
    for lang in langs or []:
        translate(names, lang, check=True)  # a missing or stale translation fails before the run, not after it
    parameters = checked_parameters(parameters or {})
    out = new_run_folder(out_root.resolve())  # resolved: the kernels run in notebooks/
    (out / "prepared").mkdir()
    shared = _shared(out, parameters)
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
            kernel_manager_class=quiet_kernel_manager(),
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
def quiet_kernel_manager() -> type:
    """jupyter_client's AsyncKernelManager, less the SIGINT it sends a kernel just before asking it to shut down.

    A kernel still finishing its last reply takes that signal as a KeyboardInterrupt and logs "KeyboardInterrupt
    caught in kernel." at ERROR: one run in ten or twenty began with that line. The shutdown request alone stops
    an idle kernel; a busy one is terminated after the manager's wait, as before.
    """
    from jupyter_client.manager import AsyncKernelManager

    class QuietShutdownKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:  # an interrupt asked for outside shutdown (a cell's timeout) still goes
                await super()._async_interrupt_kernel()

    return QuietShutdownKernelManager


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
            kernel_manager_class=quiet_kernel_manager(),
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
    out, the execution counts are numbered again from 1, and the translations are rebuilt. Every notebook is
    checked first: one that failed, holds an error or did not finish refuses the whole adoption, changing
    nothing. Returns the notebooks changed.
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
