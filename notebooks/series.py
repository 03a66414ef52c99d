"""The notebook series: run it headless, refresh the committed notebooks, stamp their Colab set-up.

    python notebooks/series.py run [-p NAME VALUE ...]   # papermill into runs/<timestamp>/ and runs/latest
    python notebooks/series.py refresh                    # execute the committed notebooks in place
    python notebooks/series.py stamp                      # rewrite badges and set-up cells from GITHUB/BRANCH

The repository's address lives here and nowhere else: `stamp` writes it into every notebook's
"Open in Colab" badge and set-up cell, and a test checks that they agree.
"""

from __future__ import annotations

import argparse
import ast
import base64
import json
import os
import shutil
import sys
import time
from pathlib import Path

import nbformat

GITHUB = "gpu-lessons/pytorch-gpu-mnist"  # owner/name on GitHub; forks change this line and run `stamp`
BRANCH = "main"
REPO_URL = f"https://github.com/{GITHUB}.git"

NOTEBOOKS = Path(__file__).resolve().parent
REPO = NOTEBOOKS.parent
# Kernels log a warning about unencrypted local TCP at every start; keep the run's log to what matters.
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]

SETUP = f"""\
# Set-up. In Colab: fetch this series' repository (PyTorch is already installed there).
# Locally: find the folder that holds helpers.py. Either way, import helpers.
import os
import subprocess
import sys
from pathlib import Path

REPO_URL = os.environ.get("SERIES_REPO_URL", "{REPO_URL}")
BRANCH = os.environ.get("SERIES_BRANCH", "{BRANCH}")
try:
    import google.colab  # noqa: F401  (only Colab has it)

    IN_COLAB = True
except ImportError:
    IN_COLAB = False
if IN_COLAB:
    REPO = Path.cwd() / Path(REPO_URL).stem
    if not (REPO / "helpers.py").exists():
        subprocess.run(["git", "clone", "-q", "--depth", "1", "-b", BRANCH, REPO_URL, str(REPO)], check=True)
else:
    REPO = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "helpers.py").exists())
sys.path.insert(0, str(REPO))
import helpers"""


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The series' notebooks in order; only those named (stem or file name) when `names` is given."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    return [p for p in paths if not names or p.stem in names or p.name in names]


def badge(name: str) -> str:
    """The Markdown "Open in Colab" badge for one notebook."""
    url = f"https://colab.research.google.com/github/{GITHUB}/blob/{BRANCH}/notebooks/{name}"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"


def tagged(nb: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    """Cells of `nb` that carry `tag`."""
    return [cell for cell in nb.cells if tag in cell.get("metadata", {}).get("tags", [])]


def stamp(path: Path, write: bool = True) -> bool:
    """Write the badge (second line of the first cell) and the set-up cell; return True if they changed."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    lines = nb.cells[0].source.splitlines()
    nb.cells[0].source = "\n".join([lines[0], badge(path.name), *lines[2:]])
    for cell in tagged(nb, "setup"):
        cell.source = SETUP
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["accelerator"] = "GPU"
    nb.metadata["colab"] = {"gpuType": "T4", "provenance": []}
    if nbformat.writes(nb) == before:
        return False
    if write:
        nbformat.write(nb, path)
    return True


def metrics_of(nb: nbformat.NotebookNode) -> dict:
    """The dict displayed by the cell tagged `metrics` (its last expression)."""
    for cell in tagged(nb, "metrics"):
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/plain")
            if output.get("output_type") == "execute_result" and text:
                return ast.literal_eval(text if isinstance(text, str) else "".join(text))
    return {}


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


def run(parameters: dict | None = None, out_root: Path = REPO / "runs", names: list[str] | None = None) -> Path:
    """Execute the series with papermill into out_root/<timestamp>/; return that folder."""
    import papermill

    out = out_root / time.strftime("%Y%m%d-%H%M%S")
    (out / "figures").mkdir(parents=True, exist_ok=True)
    shared = {"progress": False, "checkpoint": str(out / "lesson.ckpt")} | (parameters or {})
    metrics, summary, failed = {}, [], []
    for path in notebook_paths(names):
        declared = papermill.inspect_notebook(str(path))
        params = {k: v for k, v in shared.items() if k in declared}
        t0 = time.perf_counter()
        try:
            papermill.execute_notebook(
                str(path),
                str(out / path.name),
                parameters=params,
                cwd=str(NOTEBOOKS),
                kernel_name="python3",
                progress_bar=False,
                extra_arguments=KERNEL_ARGS,
            )
            status = "ok"
        except papermill.PapermillExecutionError as err:
            status = f"FAILED: {err.ename}: {err.evalue[:200]}"
            failed.append(path.stem)
        seconds = time.perf_counter() - t0
        executed = nbformat.read(out / path.name, as_version=4)
        metrics[path.stem] = metrics_of(executed)
        figures = save_figures(executed, path.stem, out / "figures")
        summary.append((path.stem, status, seconds, metrics[path.stem]))
        print(f"{path.stem}: {status} in {seconds:.1f} s, {len(figures)} figures", flush=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    _point_latest(out)
    print(f"\n{'notebook':<32} {'status':<8} {'seconds':>8}  key results")
    for stem, status, seconds, found in summary:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in list(found.items())[:4])
        print(f"{stem:<32} {status[:8]:<8} {seconds:>8.1f}  {shown}")
    print(f"\nexecuted notebooks, figures/ and metrics.json in {out}")
    if failed:
        raise SystemExit(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
    return out


def _short(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _point_latest(out: Path) -> None:
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
    """Stamp, then execute the committed notebooks in place so their stored outputs match the code."""
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
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        client.execute()
        nbformat.write(nb, path)
        print(f"{path.name}: executed in place in {time.perf_counter() - t0:.1f} s", flush=True)


def _parse_value(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "refresh", "stamp"])
    parser.add_argument("names", nargs="*", help="only these notebooks (e.g. 05_training)")
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="pass a parameter to every notebook that declares it, e.g. -p device cpu",
    )
    parser.add_argument("--out", type=Path, default=REPO / "runs", help="folder for the run (default: runs/)")
    args = parser.parse_args(argv)
    if args.command == "run":
        run({k: _parse_value(v) for k, v in args.parameter}, args.out, args.names)
    elif args.command == "refresh":
        refresh(args.names)
    else:
        changed = [p.name for p in notebook_paths() if stamp(p)]
        print(f"stamped {len(changed)} notebook(s): {', '.join(changed) or 'all were up to date'}")


if __name__ == "__main__":
    main(sys.argv[1:])
