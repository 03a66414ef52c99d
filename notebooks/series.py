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

ARCHIVE_URL = f"https://github.com/{GITHUB}/archive/refs/heads/{BRANCH}.zip"

SETUP = f"""\
# @title Set-up: find this series' code, or fetch it, then import `helpers` {{ display-mode: "form" }}
# In the repository (local Jupyter) helpers.py is in a parent folder. Anywhere else (Colab, Kaggle,
# a notebook downloaded on its own) the repository is fetched once into a cache folder, with git
# or, without git, as a zip archive. PyTorch is used as installed: nothing is upgraded.


def find_or_fetch_series(name="{Path(REPO_URL).stem}"):
    \"\"\"Put the folder that holds helpers.py on the import path and return it: a parent, or a fetched copy.\"\"\"
    import io
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    import urllib.request
    import zipfile
    from pathlib import Path

    def use(folder):
        sys.path.insert(0, str(folder))
        return folder

    for folder in (Path.cwd(), *Path.cwd().parents):
        if (folder / "helpers.py").is_file() and (folder / "notebooks" / "series.py").is_file():
            return use(folder)
    cache = Path(os.environ.get("SERIES_CACHE") or Path.home() / ".cache" / name)
    if (cache / "helpers.py").is_file():
        print(f"Using the series' code in {{cache}} (delete that folder to fetch it again)")
        return use(cache)
    url = os.environ.get("SERIES_REPO_URL", "{REPO_URL}")
    branch = os.environ.get("SERIES_BRANCH", "{BRANCH}")
    archive = os.environ.get(
        "SERIES_ARCHIVE_URL", "{ARCHIVE_URL}"
    )
    cache.parent.mkdir(parents=True, exist_ok=True)
    tried = []
    if shutil.which("git"):
        cmd = ["git", "clone", "--quiet", "--depth", "1", "--branch", branch, url, str(cache)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(cmd, 1, "", "no answer within 5 minutes")
            shutil.rmtree(cache, ignore_errors=True)
        if done.returncode == 0:
            print(f"Fetched the series' code into {{cache}} with git")
            return use(cache)
        tried.append(f"git clone {{url}} failed: {{done.stderr.strip()[-300:]}}")
    else:
        tried.append("git clone: git is not installed here")
    try:
        with urllib.request.urlopen(archive, timeout=60) as response:
            zipped = zipfile.ZipFile(io.BytesIO(response.read()))
        unpacked = Path(tempfile.mkdtemp(dir=cache.parent))
        zipped.extractall(unpacked)
        (unpacked / zipped.namelist()[0].split("/")[0]).rename(cache)
        shutil.rmtree(unpacked)
        print(f"Fetched the series' code into {{cache}} from {{archive}}")
        return use(cache)
    except Exception as err:  # any failure of the download: reported below with what to do
        tried.append(f"downloading {{archive}} failed: {{type(err).__name__}}: {{err}}")
    fix = (
        "In Kaggle, turn on Settings > Internet (it needs a verified phone number), then run this cell again."
        if "KAGGLE_KERNEL_RUN_TYPE" in os.environ
        else "Check the internet connection and run this cell again, or get the repository yourself "
        f"(git clone {{url}}) and open this notebook from its notebooks/ folder."
    )
    tried = "".join(f"\\n  - {{line}}" for line in tried)
    raise RuntimeError(f"Could not find or fetch this series' code (helpers.py):{{tried}}\\n{{fix}}")


REPO = find_or_fetch_series()
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


def title(path: Path) -> str:
    """A notebook's title: the first line of its first cell, without the '# '."""
    return nbformat.read(path, as_version=4).cells[0].source.splitlines()[0].lstrip("# ").strip()


def nav(path: Path) -> str:
    """Links to the previous and next notebooks of the series, for the cell tagged `nav`."""
    paths = notebook_paths()
    i = [p.name for p in paths].index(path.name)
    links = []
    if i > 0:
        links.append(f"← Previous: [{title(paths[i - 1])}]({paths[i - 1].name})")
    if i + 1 < len(paths):
        links.append(f"Next: [{title(paths[i + 1])}]({paths[i + 1].name}) →")
    return "---\n" + " &nbsp;·&nbsp; ".join(links)


def stamp(path: Path, write: bool = True) -> bool:
    """Write the badge (under the title), the set-up cell, the links to the neighbours and the metadata.

    Returns True if anything changed. Any old badge, or a leftover placeholder, under the title goes.
    """
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    first, *rest = nb.cells[0].source.splitlines()
    rest = [line for line in rest if "Open In Colab" not in line and line.strip() != "BADGE"]
    nb.cells[0].source = "\n".join([first, badge(path.name), *rest])
    for cell in tagged(nb, "setup"):
        cell.source = SETUP
    for cell in tagged(nb, "setup") + tagged(nb, "solution"):  # folded until a learner opens them
        cell.metadata["cellView"] = "form"  # Colab shows the `# @title` line
        cell.metadata["jupyter"] = {"source_hidden": True}  # JupyterLab hides the code
    for cell in tagged(nb, "nav"):
        cell.source = nav(path)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["accelerator"] = "GPU"
    nb.metadata["colab"] = {"gpuType": "T4", "provenance": []}
    if nbformat.writes(nb) == before:
        return False
    if write:
        nbformat.write(nb, path)
    return True


RESULTS_MIME = "application/vnd.series.results+json"  # as helpers.show_results writes it


def metrics_of(nb: nbformat.NotebookNode) -> dict:
    """The results that the cell tagged `metrics` recorded with helpers.show_results."""
    for cell in tagged(nb, "metrics"):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if RESULTS_MIME in data:
                found = data[RESULTS_MIME]
                return json.loads(found) if isinstance(found, str) else dict(found)
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
    """Execute the series with papermill into out_root/<timestamp>/, with a report; return that folder."""
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
        summary.append({"stem": path.stem, "status": status, "seconds": seconds, "figures": figures})
        print(f"{path.stem}: {status} in {seconds:.1f} s, {len(figures)} figures", flush=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    write_report(out, summary, metrics, shared)
    _point_latest(out)
    print(f"\n{'notebook':<24} {'status':<8} {'seconds':>8}  key results")
    for row in summary:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in list(metrics[row["stem"]].items())[:4])
        print(f"{row['stem']:<24} {row['status'][:8]:<8} {row['seconds']:>8.1f}  {shown}")
    print(f"\nreport: {out / 'index.html'} (executed notebooks, figures/ and metrics.json beside it)")
    if failed:
        raise SystemExit(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
    return out


def _short(value: object) -> str:
    """A result as helpers.show_results shows it in the notebook."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from helpers import format_value

    return format_value(value)


def write_report(out: Path, summary: list[dict], metrics: dict, parameters: dict) -> Path:
    """Write out/index.html: each notebook rendered and linked, its numbers and figures, device and times."""
    from html import escape

    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter()
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={"setup"}), enabled=True)
    (out / "html").mkdir(exist_ok=True)
    device = next((m["device"] for m in metrics.values() if m.get("device")), parameters.get("device") or "default")
    described = next((m["device_description"] for m in metrics.values() if m.get("device_description")), "")
    total = sum(row["seconds"] for row in summary)
    sections = []
    for row in summary:
        stem = row["stem"]
        html, _ = exporter.from_notebook_node(nbformat.read(out / f"{stem}.ipynb", as_version=4))
        (out / "html" / f"{stem}.html").write_text(html, encoding="utf-8")
        numbers = "".join(
            f"<tr><td>{escape(k.replace('_', ' '))}</td><td>{escape(_short(v))}</td></tr>"
            for k, v in metrics[stem].items()
        )
        figures = "".join(f'<img src="figures/{f.name}" alt="{escape(f.stem)}" loading="lazy">' for f in row["figures"])
        status = "ok" if row["status"] == "ok" else f'<b class="failed">{escape(row["status"])}</b>'
        sections.append(
            f'<section><h2><a href="html/{stem}.html">{escape(title(NOTEBOOKS / f"{stem}.ipynb"))}</a></h2>'
            f"<p>{status} in {row['seconds']:.1f} s &middot; "
            f'<a href="{stem}.ipynb">executed notebook</a></p>'
            f"<table>{numbers}</table><div class=figs>{figures}</div></section>"
        )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Run {out.name}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }}
section {{ border-top: 1px solid #ddd; padding: 0.5em 0 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0; }}
td {{ border: 1px solid #ddd; padding: 2px 10px; font-variant-numeric: tabular-nums; }}
.figs img {{ max-height: 260px; max-width: 100%; margin: 4px; border: 1px solid #eee; }}
.failed {{ color: #b00; }}
</style></head><body>
<h1>The series, run {escape(out.name)}</h1>
<p>Device: <b>{escape(str(device))}</b>{f" ({escape(described)})" if described else ""} &middot;
{len(summary)} notebooks in {total:.0f} s &middot; parameters: {escape(json.dumps(parameters))}</p>
{"".join(sections)}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


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
