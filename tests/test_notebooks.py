"""The notebook series: structure, the main job's papermill run with real results, the Colab set-up.

Cells whose output is the same everywhere are compared against the committed outputs by nbval
(`pytest --nbval-lax notebooks`, part of `make test`).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

import series  # noqa: E402

NOTEBOOKS = series.notebook_paths()
EXPECTED = [
    "01_gpu_runtime",
    "02_data_loading",
    "03_model",
    "04_device_transfer",
    "05_training",
    "06_plots",
    "07_evaluation_and_checkpoints",
    "08_cpu_vs_gpu",
]


def test_the_series_is_complete():
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_structure(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert first.source.splitlines()[1] == series.badge(path.name)
    assert "**What to expect.**" in first.source
    setup, params, metrics = (series.tagged(nb, t) for t in ("setup", "parameters", "metrics"))
    assert len(setup) == 1 and setup[0].source == series.SETUP
    assert len(params) == 1 and nb.cells.index(setup[0]) < nb.cells.index(params[0])
    assert "device = None" in params[0].source and "seed = 42" in params[0].source
    assert len(metrics) == 1 and nb.cells[-1] is metrics[0]
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nb.metadata["accelerator"] == "GPU" and nb.metadata["colab"]["gpuType"] == "T4"
    assert not series.stamp(path, write=False), "badge or set-up cell out of date: python notebooks/series.py stamp"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_with_small_clean_outputs(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "commit notebooks executed: make notebooks"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "executed top to bottom in one go"
    assert series.metrics_of(nb), "the metrics cell has its output"
    for cell in code:
        for output in cell.outputs:
            assert output.output_type != "error", f"error output in {path.name}: {output.get('evalue')}"
            if output.output_type == "stream":
                assert output.name == "stdout" or "Warning" not in output.text, output.text
                assert len(output.text) < 4000, "no giant logs"
    assert path.stat().st_size < 1_000_000


def test_setup_cell_finds_helpers_locally(tmp_path):
    namespace = {}
    here = Path.cwd()
    try:
        os.chdir(REPO / "notebooks")
        exec(compile(series.SETUP, "setup", "exec"), namespace)
    finally:
        os.chdir(here)
    assert namespace["IN_COLAB"] is False and namespace["REPO"] == REPO
    assert Path(namespace["helpers"].__file__).resolve() == REPO / "helpers.py"


@pytest.fixture(scope="module")
def series_run(tmp_path_factory, data_root):
    """The main job, as `make run` does it, with a parameter passed through."""
    return series.run({"device": "cpu"}, out_root=tmp_path_factory.mktemp("runs"))


def test_series_run_writes_notebooks_figures_metrics(series_run):
    out = series_run
    assert sorted(p.stem for p in out.glob("*.ipynb")) == EXPECTED
    assert (out.parent / "latest").resolve() == out.resolve()
    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(metrics) == EXPECTED and all(metrics.values())
    figures = sorted((out / "figures").glob("*.png"))
    assert len(figures) >= 10 and all(f.stat().st_size > 2000 for f in figures)
    assert {f.name.rsplit("-", 1)[0] for f in figures} >= {
        "02_data_loading",
        "06_plots",
        "08_cpu_vs_gpu",
    }
    assert all(m.get("device", "cpu") == "cpu" for m in metrics.values()), "the device parameter passed through"


def test_series_results_are_the_lessons(series_run):
    m = json.loads((series_run / "metrics.json").read_text())
    assert m["01_gpu_runtime"]["vgg16_params"] == 138_357_544
    assert m["02_data_loading"]["split"] == [50000, 10000] and m["02_data_loading"]["first_label"] == 5
    assert m["03_model"]["params"] == 25450 and 2.2 < m["03_model"]["untrained_loss"] < 2.45
    train = m["05_training"]
    assert 0.05 < train["initial_val_acc"] < 0.2 and train["val_acc_after_phase1"] > 0.94
    assert 0.96 <= train["val_acc"] <= 0.975
    plots = m["06_plots"]
    assert plots["val_acc"] == train["val_acc"], "06 reused 05's checkpoint"
    assert 0.96 <= plots["test_acc"] <= 0.975
    assert plots["labels"] == {"0": 7, "1839": 2, "193": 9}  # JSON keys are strings
    assert plots["predictions"] == plots["labels"]
    assert plots["reload_same"] is True
    evaluation = m["07_evaluation_and_checkpoints"]
    assert evaluation["test_acc"] == pytest.approx(plots["test_acc"])
    assert evaluation["resume_same_weights"] is True and evaluation["diverged_restored"] is True
    speed = m["08_cpu_vs_gpu"]
    assert speed["speedrun_reached"] is True and speed["speedrun_test_acc"] >= 0.97
    assert speed["resident_speedup_cpu"] > 1


def test_colab_branch_clones_the_repository_and_runs(tmp_path, monkeypatch):
    """With a stand-in google.colab module, the set-up cell clones the repository and imports helpers."""
    if not (REPO / ".git").exists():
        pytest.skip("the repository is not a git checkout")
    origin = tmp_path / "pytorch-gpu-mnist.git"  # stands in for GitHub: this checkout's HEAD as branch main
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    subprocess.run(["git", "-C", str(REPO), "push", "-q", str(origin), "HEAD:refs/heads/main"], check=True)
    fake = tmp_path / "fake_colab" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("# stands in for Colab's module\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake_colab"))
    monkeypatch.setenv("SERIES_REPO_URL", origin.as_uri())
    monkeypatch.setenv("SERIES_BRANCH", "main")
    content = tmp_path / "content"  # Colab's working folder
    content.mkdir()
    import papermill

    out = tmp_path / "01_colab.ipynb"
    papermill.execute_notebook(
        str(REPO / "notebooks" / "01_gpu_runtime.ipynb"),
        str(out),
        cwd=str(content),
        parameters={"sizes": [64], "repeats": 1},
        kernel_name="python3",
        progress_bar=False,
    )
    clone = content / "pytorch-gpu-mnist"
    assert (clone / "helpers.py").exists() and (clone / "notebooks" / "series.py").exists()
    executed = nbformat.read(out, as_version=4)
    assert series.metrics_of(executed)["vgg16_params"] == 138_357_544
    assert not any(o.output_type == "error" for c in executed.cells for o in c.get("outputs", []))
