"""The notebook series: structure, the results of its one execution (by nbval, in `make test`) against the
lesson's numbers, its report and Chinese edition, `make run`'s machinery, and the set-up cell in each place
a notebook is opened."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

from serieslib import pages, results, runs, translation  # noqa: E402

NOTEBOOKS = pages.notebook_paths()
EXPECTED = [
    "01_gpu_runtime",
    "02_data_loading",
    "03_model",
    "04_device_transfer",
    "05_training",
    "06_plots",
    "07_error_analysis",
    "08_checkpoints",
    "09_cpu_vs_gpu",
    "10_many_gpus",
    "11_gpu_speed",
]
# A line that reports one of the project's own targets, which belongs in the tests, not before a learner.
PROJECT_TARGET = re.compile(r"\btarget\b.*\b(NOT )?met\b|\bBADGE\b|acceptance", re.IGNORECASE)


def test_the_series_is_complete():
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_structure(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    lines = first.source.splitlines()
    assert first.cell_type == "markdown" and lines[0].startswith("# ")
    assert lines[1] == pages.badge(path.name)
    assert "BADGE" not in first.source and sum("Open In Colab" in line for line in lines) == 1
    assert "**What to expect.**" in first.source
    setup, params, nav = (pages.tagged(nb, t) for t in ("setup", "parameters", "nav"))
    assert len(setup) == 1 and setup[0].source == pages.SETUP and setup[0].metadata["cellView"] == "form"
    assert len(params) == 1 and nb.cells.index(setup[0]) < nb.cells.index(params[0])
    assert "device = None" in params[0].source and "seed = 42" in params[0].source
    assert not pages.tagged(nb, "metrics"), "no results cell: the metadata names the results, runs record them"
    assert len(nav) == 1 and nb.cells[-1] is nav[0] and nav[0].source == pages.nav(path)
    assert nb.cells[-2].cell_type == "markdown" and nb.cells[-2].source.startswith("## What you learned")
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nb.metadata["accelerator"] == "GPU" and nb.metadata["colab"]["gpuType"] == "T4"
    assert not pages.stamp(path, write=False), "badge or set-up cell out of date: python notebooks/series.py stamp"


def test_stamp_removes_leftovers_under_the_badge(tmp_path):
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    title = nb.cells[0].source.splitlines()[0]
    nb.cells[0].source = f"{title}\nBADGE\n[![Open In Colab](old)](old)\n\nText."
    path = tmp_path / NOTEBOOKS[0].name
    nbformat.write(nb, path)
    assert pages.stamp(path)
    assert nbformat.read(path, as_version=4).cells[0].source == f"{title}\n{pages.badge(path.name)}\n\nText."


LESSONS = ["02_data_loading", "03_model", "04_device_transfer", "05_training", "06_plots"]
GOING_FURTHER = "## Going further (optional)"


def _split_at_going_further(nb):
    """The cells of the lesson (before the "Going further" heading) and those after it."""
    (i,) = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and GOING_FURTHER in c.source]
    return nb.cells[:i], nb.cells[i:]


@pytest.mark.parametrize("name", LESSONS)
def test_lesson_notebooks_open_with_the_lesson_then_go_further(name):
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    lesson, further = _split_at_going_further(nb)
    assert pages.tagged(nb, "lesson") and all(c in lesson for c in pages.tagged(nb, "lesson"))
    assert not [c for c in lesson if c.cell_type == "code" and "show_source" in c.source], "listings come after"
    solutions = pages.tagged(nb, "solution")
    assert solutions and all(c in further and c.source.startswith("# @title Solution") for c in solutions)
    assert all(c.metadata.get("jupyter", {}).get("source_hidden") for c in solutions), "solutions are folded"
    assert "### Exercise" in "".join(c.source for c in further if c.cell_type == "markdown")
    for cell in pages.tagged(nb, "recap"):  # the lesson's code from earlier notebooks, run again unchanged
        earlier = "\n".join(
            c.source
            for other in LESSONS[: LESSONS.index(name)]
            for c in nbformat.read(REPO / "notebooks" / f"{other}.ipynb", as_version=4).cells
            if c.cell_type == "code" and "recap" not in c.metadata.get("tags", [])
        ).splitlines()
        new = [line for line in cell.source.splitlines()[1:] if line.strip() and line not in earlier]
        assert not new, f"{cell.id} runs code that no earlier notebook teaches: {new}"


def test_05_trains_the_lessons_schedule_with_the_lessons_own_fit():
    nb = nbformat.read(REPO / "notebooks" / "05_training.ipynb", as_version=4)
    lesson, _ = _split_at_going_further(nb)
    code = "\n".join(c.source for c in lesson if c.cell_type == "code")
    (definition,) = [c for c in pages.tagged(nb, "lesson") if "def fit(" in c.source]
    assert lesson.index(definition) < min(i for i, c in enumerate(lesson) if "history += fit(" in c.source)
    assert "history = [evaluate(model, val_loader)]" in code and "to_device(model, DEVICE)" in code
    assert "history += fit(epochs1, lr1, model, train_loader, val_loader)" in code
    assert "history += fit(epochs2, lr2, model, train_loader, val_loader)" in code
    assert "helpers.fit" not in code and "helpers.train" not in code and "helpers.MnistModel" not in code
    assert "class MnistModel(nn.Module)" in code and "class DeviceDataLoader" in code, "the lesson's own classes"
    params = pages.tagged(nb, "parameters")[0].source
    assert "epochs1, lr1 = 5, 0.5" in params and "epochs2, lr2 = 5, 0.1" in params


@pytest.mark.parametrize("path", NOTEBOOKS[1:8], ids=[p.stem for p in NOTEBOOKS[1:8]])
def test_listings_in_02_to_08_hold_nothing_from_09_to_11(path):
    nb = nbformat.read(path, as_version=4)
    later = re.compile(r"autocast|GradScaler|torch\.distributed|\bdist\.|all_reduce|\brank\b|world_size|shard", re.I)
    for cell in nb.cells:
        if cell.cell_type == "code" and "show_source(" in cell.source:
            shown = "".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs)
            assert shown.startswith("```python") and not later.findall(shown), (cell.id, later.findall(shown))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_with_small_clean_outputs(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "commit notebooks executed: make notebooks"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "executed top to bottom in one go"
    for cell in code:
        for output in cell.outputs:
            assert output.output_type != "error", f"error output in {path.name}: {output.get('evalue')}"
            text = output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
            assert not PROJECT_TARGET.search(text), f"a project target in {path.name}: {text[:200]}"
            if output.output_type == "stream":
                assert output.name == "stdout" or "Warning" not in output.text, output.text
                assert len(output.text) < 4000, "no giant logs"
    assert path.stat().st_size < 1_000_000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_metadata_names_the_results_as_a_dict_out_of_a_learners_sight(path):
    nb = nbformat.read(path, as_version=4)
    expression = ast.parse(results.results_expression(nb), mode="eval").body
    assert isinstance(expression, ast.Dict) and expression.keys, "a dict display of name: expression"
    names = [key.value for key in expression.keys if isinstance(key, ast.Constant)]
    assert len(names) == len(expression.keys) == len(set(names)) and all(isinstance(n, str) for n in names)
    cell = results.results_cell(nb)
    compile(cell.source, f"{path.name}: the results cell", "exec")
    assert cell.metadata["tags"] == ["metrics"] and cell.metadata["jupyter"]["source_hidden"]
    assert "helpers" not in cell.source.replace(results.results_expression(nb), ""), "it records with IPython alone"


def test_results_read_as_a_person_reads_them():
    assert results.format_value([0.123456, {"a": 2.0, "b": "x"}, 3]) == "[0.1235, {a: 2.0000, b: x}, 3]"
    assert results.format_value([6.0e-08, 0.0, -0.0003]) == "[6.0e-08, 0.0000, -3.0e-04]"


MACHINE_PATH = re.compile(r"(?<![\w.])/(?:tmp|home|root|work|usr|opt|var|Users)/|[A-Z]:\\|site-packages|\.venv/")


@pytest.mark.parametrize("path", NOTEBOOKS + translation.translated_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_outputs_hold_no_machine_paths_and_no_stray_tracebacks(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = output.get("text", "") + str(data.get("text/plain", "")) + str(data.get("text/markdown", ""))
            assert not MACHINE_PATH.search(text), (cell.id, MACHINE_PATH.search(text).group())
            assert str(REPO) not in text and "Traceback" not in text, cell.id


# ---------------------------------------------------------------------------- the main job, run once


@pytest.fixture(scope="module")
def series_run(request):
    """The series as `make test` executed it: nbval ran the prepared notebooks (runs/test/prepared/) once, and
    tests/nbval_results.py wrote them, their results and report into runs/test/, as `make run` does."""
    if not request.config.pluginmanager.hasplugin("nbval_results"):
        pytest.skip("the notebooks execute through nbval in `make test` (pytest -p nbval_results --nbval-lax ...)")
    out = getattr(request.config, "series_run", None)
    assert out is not None, "nbval executed no notebook in this session: run `make test`"
    error = getattr(request.config, "series_run_error", None)
    assert error is None, f"the notebooks ran, but writing their results failed: {error}"
    return out


def test_prepare_injects_the_test_parameters_and_keeps_the_committed_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `prepare --out runs/test`: a relative folder, and kernels that run elsewhere
    (prepared,) = runs.prepare(None, Path("test"), names=["06_plots"])
    nb = nbformat.read(prepared, as_version=4)
    committed = nbformat.read(REPO / "notebooks" / "06_plots.ipynb", as_version=4)
    (injected,) = pages.tagged(nb, "injected-parameters")
    assert nb.cells.index(injected) == nb.cells.index(pages.tagged(nb, "parameters")[0]) + 1
    assert all(line in injected.source for line in ('device = "cpu"', "exercise_epochs = 1", "spread_seeds = [1, 2]"))
    assert "bench_limit" not in injected.source, "only the parameters the notebook declares"
    assert f"checkpoint = {str(tmp_path / 'test' / 'lesson.ckpt')!r}".replace("'", '"') in injected.source
    (recorder,) = pages.tagged(nb, "metrics")
    assert recorder is nb.cells[-1] and recorder.source == results.results_cell(committed).source, "added last"
    assert not recorder.outputs and not pages.tagged(committed, "metrics"), "at run time only"
    rest = [c for c in nb.cells if c is not injected and c is not recorder]
    assert [c.get("outputs") for c in rest] == [c.get("outputs") for c in committed.cells]
    assert pages.tagged(nb, "nbval-check-output")
    (loose,) = runs.prepare(None, tmp_path / "colab", names=["06_plots"], check=False)
    assert not pages.tagged(nbformat.read(loose, as_version=4), "nbval-check-output"), "ranges only"


def test_make_run_executes_with_papermill_and_writes_the_report(tmp_path, monkeypatch):
    """`make run`'s machinery on a stand-in notebook: parameters passed, metrics, figures, report, runs/latest."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 01 · A stand-in"),
        nbformat.v4.new_code_cell("size = 2\ndevice = None", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot(range(size))\nplt.show()"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["series"] = {"results": ["{", '    "size": size,', '    "device": "cpu",', "}"]}
    nbformat.write(nb, folder / "01_stand_in.ipynb")
    monkeypatch.setattr(pages, "NOTEBOOKS", folder)
    out = runs.run({"size": 5, "exercise_epochs": 1}, out_root=tmp_path / "runs")
    assert json.loads((out / "metrics.json").read_text()) == {"01_stand_in": {"size": 5, "device": "cpu"}}
    executed = nbformat.read(out / "01_stand_in.ipynb", as_version=4)
    (recorder,) = pages.tagged(executed, "metrics")
    (output,) = recorder.outputs
    assert recorder is executed.cells[-1] and set(output.data) == {results.RESULTS_MIME, "text/plain"}
    assert output.data["text/plain"] == "", "an executed notebook shows nothing of it"
    assert nbformat.read(folder / "01_stand_in.ipynb", as_version=4) == nb, "the notebook itself is untouched"
    assert (out.parent / "latest").resolve() == out.resolve()
    assert [f.name for f in (out / "figures").glob("*.png")] == ["01_stand_in-1.png"]
    page = (out / "index.html").read_text()
    assert 'href="html/01_stand_in.html"' in page and "01 · A stand-in" in page and "Device: <b>cpu</b>" in page
    assert "<td>size</td><td>5</td>" in page, "the results in the report"
    assert "_record_results" not in (out / "html" / "01_stand_in.html").read_text(), "the notebook's page, without it"


def test_series_run_writes_the_chinese_notebooks_from_the_executed_ones(series_run):
    """`make run ARGS="--lang zh"`: the executed code and outputs, with the committed Chinese Markdown."""
    for stem in EXPECTED:
        executed = nbformat.read(series_run / f"{stem}.ipynb", as_version=4)
        chinese = nbformat.read(series_run / "zh" / f"{stem}.ipynb", as_version=4)
        committed = nbformat.read(REPO / "notebooks" / "zh" / f"{stem}.ipynb", as_version=4)
        assert [c for c in chinese.cells if c.cell_type == "code"] == [
            c for c in executed.cells if c.cell_type == "code"
        ]
        assert [c.source for c in chinese.cells if c.cell_type == "markdown"] == [
            c.source for c in committed.cells if c.cell_type == "markdown"
        ]


def test_series_run_writes_notebooks_figures_metrics(series_run):
    out = series_run
    assert sorted(p.stem for p in out.glob("*.ipynb")) == EXPECTED
    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(metrics) == EXPECTED and all(metrics.values())
    figures = sorted((out / "figures").glob("*.png"))
    assert len(figures) >= 11 and all(f.stat().st_size > 2000 for f in figures)
    assert {f.name.rsplit("-", 1)[0] for f in figures} >= {"02_data_loading", "06_plots", "07_error_analysis"}
    assert all(m.get("device", "cpu") == "cpu" for m in metrics.values()), "the device parameter passed through"


def test_the_report_links_every_notebook_and_embeds_its_figures(series_run):
    page = (series_run / "index.html").read_text()
    for stem in EXPECTED:
        assert f'href="html/{stem}.html"' in page and f'href="zh/{stem}.ipynb"' in page
        assert f'href="zh/html/{stem}.html"' in page
        html = series_run / "html" / f"{stem}.html"
        assert html.stat().st_size > 10_000 and "<html" in html.read_text()[:2000].lower()
        assert '<html lang="zh"' in (series_run / "zh" / "html" / f"{stem}.html").read_text()[:2000]
    figures = sorted((series_run / "figures").glob("*.png"))
    assert all(f'src="figures/{f.name}"' in page for f in figures)
    assert "Device: <b>cpu</b>" in page and re.search(rf"{len(EXPECTED)} notebooks in \d+ s", page)
    assert "val acc" in page and not PROJECT_TARGET.search(page)


def test_series_results_are_the_lessons(series_run):
    m = json.loads((series_run / "metrics.json").read_text())
    assert m["01_gpu_runtime"]["vgg16_params"] == 138_357_544
    assert m["02_data_loading"]["split"] == [50000, 10000] and m["02_data_loading"]["first_label"] == 5
    assert m["02_data_loading"]["batches"] == [391, 40] and m["02_data_loading"]["lesson_batch_pinned"] is False
    assert m["03_model"]["params"] == 25450 and 2.2 < m["03_model"]["untrained_loss"] < 2.45
    assert m["03_model"]["same_outputs_as_helpers"] is True
    train = m["05_training"]
    assert train["lesson_vs_helpers_max_weight_diff"] < 1e-5, "the lesson's fit and helpers.fit agree"
    assert 0.05 < train["initial_val_acc"] < 0.2 and train["val_acc_after_phase1"] > 0.94
    assert 0.96 <= train["val_acc"] <= 0.975 and train["epochs_recorded"] == 11
    assert train["val_loss"] < train["initial_val_loss"] / 10
    assert 0.88 < train["logistic_val_acc"] < train["hidden_val_acc"] - 0.02
    plots = m["06_plots"]
    assert plots["val_acc"] == train["val_acc"], "06 reused 05's checkpoint"
    assert 0.96 <= plots["test_acc"] <= 0.975 and plots["test_acc_batch_mean"] > plots["test_acc"]
    assert plots["labels"] == {"0": 7, "1839": 2, "193": 9}  # JSON keys are strings
    assert plots["predictions"] == plots["labels"]
    assert plots["reload_same"] is True
    assert 0.955 < plots["spread_val_acc"][0] <= plots["spread_val_acc"][1] < 0.98
    evaluation = m["07_error_analysis"]
    assert evaluation["test_acc"] == pytest.approx(plots["test_acc"])
    assert evaluation["wrong"] == round((1 - evaluation["test_acc"]) * 10000)
    checkpoints = m["08_checkpoints"]
    assert checkpoints["resume_same_weights"] is True and checkpoints["diverged_restored"] is True
    speed = m["09_cpu_vs_gpu"]
    assert speed["speedrun_reached"] is True and speed["speedrun_test_acc"] >= 0.97
    assert speed["resident_speedup_cpu"] > 1
    ddp = m["10_many_gpus"]
    assert ddp["processes"] == 2 and ddp["backend"] == "gloo"
    for launch in ("torchrun", "two_nodes", "four_processes"):
        assert ddp[f"{launch}_max_weight_difference"] <= 1e-5, f"{launch}: the same weights as one process"
    assert ddp["spawn_max_weight_difference"] < 0.2 and 0.96 <= ddp["test_acc"] <= 0.975
    assert ddp["failed_job_exit_s"] < 60
    assert 0 < ddp["lesson_model_communication_share"] < 1 and ddp["lesson_model_speedup"] > 0
    assert speed["profiled_speedup_resident"] > 1 and 0 < speed["lesson_waiting_for_data"] < 1
    gpu_speed = m["11_gpu_speed"]
    import helpers_speed

    assert gpu_speed["configurations"] == helpers_speed.speed_configs("cpu"), "the CPU rows only"
    assert gpu_speed["small_compile_speedup"] > 0 and gpu_speed["wide_compile_speedup"] > 0
    if not helpers_speed.bf16_native("cpu"):
        assert gpu_speed["bf16_product_time_ratio"] > 2, "emulated bfloat16 is slow: why the row is left out"
    assert all(0.9 < acc < 0.99 for acc in gpu_speed["exercise_test_acc"].values())


def test_the_lessons_code_agrees_with_helpers(data_root):
    """The notebooks' inline versions of the lesson (cells tagged `lesson`) against helpers, run here."""
    import torch
    from torch.utils.data import DataLoader, Subset

    import helpers

    lesson = {}
    for name in ("03_model", "04_device_transfer", "05_training"):
        for cell in pages.tagged(nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4), "lesson"):
            exec(
                compile(
                    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n" + cell.source, name, "exec"
                ),
                lesson,
            )
    torch.manual_seed(0)
    ours = helpers.MnistModel()
    theirs = lesson["MnistModel"](784, 32, 10)
    theirs.load_state_dict(ours.state_dict())
    mnist = helpers.load_mnist(data_root)
    images, labels = next(iter(DataLoader(Subset(mnist, range(300)), 300)))
    assert torch.equal(theirs(images), ours(images)), "same weights, same outputs"
    assert torch.equal(theirs.training_step((images, labels)), ours.training_step((images, labels))["loss"])

    batches = list(
        DataLoader(Subset(mnist, range(2048)), 128, shuffle=True, generator=torch.Generator().manual_seed(1))
    )
    for opt_func in (torch.optim.SGD, lambda params, lr: torch.optim.SGD(params, lr, momentum=0.9)):
        torch.manual_seed(3)
        a = helpers.MnistModel()
        b = helpers.MnistModel()
        b.load_state_dict(a.state_dict())
        lesson["fit"](1, 0.5, a, batches, batches[:2], opt_func)
        helpers.fit(1, 0.5, b, batches, batches[:2], opt_func, verbose=False)
        for pa, pb in zip(a.parameters(), b.parameters()):
            assert torch.allclose(pa, pb, atol=1e-6, rtol=0), "one epoch of the lesson's fit equals helpers.fit"

    moved = lesson["to_device"]((images, labels), "cpu")
    assert isinstance(moved, list) and all(torch.equal(x, y) for x, y in zip(moved, (images, labels)))
    wrapped = list(lesson["DeviceDataLoader"](batches[:2], "cpu"))
    assert all(torch.equal(x[0], y[0]) for x, y in zip(wrapped, helpers.DeviceDataLoader(batches[:2], "cpu")))
    if not torch.backends.mps.is_available():  # the lesson ignores Apple GPUs; elsewhere the two agree
        assert lesson["get_default_device"]() == helpers.get_default_device()


def test_adopt_makes_a_runs_outputs_the_committed_ones(tmp_path, monkeypatch):
    """`series.py adopt runs/gpu/latest` after `make gpu-check`: a GPU's outputs, counted again, in both languages."""
    folder = tmp_path / "notebooks"
    shutil.copytree(REPO / "notebooks", folder, ignore=shutil.ignore_patterns("data", "__pycache__"))
    monkeypatch.setattr(pages, "NOTEBOOKS", folder)
    nb = nbformat.read(folder / "03_model.ipynb", as_version=4)
    params = pages.tagged(nb, "parameters")[0]
    injected = nbformat.v4.new_code_cell('device = "cuda"', metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(nb.cells.index(params) + 1, injected)  # as papermill writes it into a run
    changed = [c for c in nb.cells if c.cell_type == "code" and c.outputs][-1]
    changed.outputs = [nbformat.v4.new_output("stream", name="stdout", text="on the GPU\n")]
    recorder = results.results_cell(nb)  # as a run appends it, executed
    recorder.outputs = [nbformat.v4.new_output("display_data", {results.RESULTS_MIME: {"params": 1}, "text/plain": ""})]
    nb.cells.append(recorder)
    run = tmp_path / "run"
    run.mkdir()
    nbformat.write(nb, run / "03_model.ipynb")
    assert runs.adopt(run, ["03_model"]) == ["03_model.ipynb"]
    for path in (folder / "03_model.ipynb", folder / "zh" / "03_model.ipynb"):
        adopted = nbformat.read(path, as_version=4)
        code = [c for c in adopted.cells if c.cell_type == "code"]
        assert not pages.tagged(adopted, "injected-parameters") and not pages.tagged(adopted, "metrics")
        assert len(code) == len([c for c in nb.cells if c.cell_type == "code"]) - 2
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
        assert [c.outputs for c in code if c.id == changed.id] == [changed.outputs]
    nb.cells.remove(params)
    nbformat.write(nb, run / "03_model.ipynb")
    with pytest.raises(ValueError, match=f"lacks cells {params.id}: run it from this code"):
        runs.adopt(run, ["03_model"])


# ---------------------------------------------------------------------------- the set-up cell, everywhere


def _setup_in(cwd, env_overrides, path=None, code=None):
    """Run the set-up cell (or `code`) as a notebook kernel would, in `cwd` with these environment variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERIES_", "KAGGLE_"))}
    env |= {"PYTHONPATH": "", "HOME": str(cwd)} | env_overrides
    if path is not None:
        env["PATH"] = path
    if code is None:
        # The cell as it is, but where it would import helpers (and so PyTorch), find it: the import works
        # when the spec is found, and the whole cell, import included, runs in the Colab test below.
        assert pages.SETUP.endswith("\nimport helpers")
        found = "import importlib.util\nprint('HELPERS=' + importlib.util.find_spec('helpers').origin)\n"
        code = pages.SETUP.removesuffix("import helpers") + "print('REPO=' + str(REPO))\n" + found
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """Stand-ins for GitHub: this working tree, committed or not, as branch main of a bare repository and as a
    zip archive, and the same files where the set-up cell downloads notebooks/fetch_series.py from."""
    if not (REPO / ".git").exists():
        pytest.skip("the repository is not a git checkout")
    root = tmp_path_factory.mktemp("origin")
    tree = root / "pytorch-gpu-mnist"  # the files git would commit now: tracked ones and new ones it does not ignore
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    git = ["git", "-C", str(tree), "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "now"], check=True)
    bare = root / "pytorch-gpu-mnist.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run([*git, "push", "-q", str(bare), "HEAD:refs/heads/main"], check=True)
    archive = root / "main.zip"
    prefix = "--prefix=pytorch-gpu-mnist-main/"
    subprocess.run([*git, "archive", "--format=zip", prefix, "-o", str(archive), "HEAD"], check=True)
    return {
        "SERIES_REPO_URL": bare.as_uri(),
        "SERIES_BRANCH": "main",
        "SERIES_ARCHIVE_URL": archive.as_uri(),
        "SERIES_FETCH_URL": tree.as_uri() + "/",
    }


def test_setup_cell_is_short():
    """A learner who unfolds it reads it at a glance: the fetching is in notebooks/fetch_series.py."""
    assert len(pages.SETUP.splitlines()) <= 15


def test_setup_fetcher_uses_the_standard_library_only():
    """fetch_series.py runs before the repository is there."""
    tree = ast.parse((REPO / "notebooks" / "fetch_series.py").read_text(encoding="utf-8"))
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name.split(".")[0] for name in imported} <= sys.stdlib_module_names


def test_the_repositorys_address_is_written_once_in_fetch_series_and_stamped_everywhere():
    """The set-up cell downloads fetch_series.py from, and the badges open, the repository fetch_series.py names."""
    import fetch_series

    github, branch = fetch_series.GITHUB, fetch_series.BRANCH
    assert f'"https://raw.githubusercontent.com/{github}/{branch}/"' in pages.SETUP and "$" not in pages.SETUP
    assert f'/ ".cache" / "{Path(github).name}")' in pages.SETUP, "the fetched copy's folder is named after it"
    assert f"/github/{github}/blob/{branch}/notebooks/" in pages.badge("01_gpu_runtime.ipynb")
    tooling = [REPO / "notebooks" / "series.py", *(REPO / "notebooks" / "serieslib").glob("*.py"), pages.SETUP_FILE]
    assert [p.name for p in tooling if github in p.read_text(encoding="utf-8")] == [], "one definition"


def test_setup_in_local_jupyter_finds_the_repository():
    done = _setup_in(REPO / "notebooks", {"SERIES_REPO_URL": "file:///nowhere", "SERIES_FETCH_URL": "file:///nowhere"})
    assert done.returncode == 0, done.stderr
    assert f"REPO={REPO}" in done.stdout and f"HELPERS={REPO / 'helpers.py'}" in done.stdout
    assert "Fetched" not in done.stdout


def test_setup_in_kaggle_clones_into_the_cache(tmp_path, origin):
    working = tmp_path / "kaggle" / "working"
    working.mkdir(parents=True)
    cache = tmp_path / "cache" / "pytorch-gpu-mnist"
    done = _setup_in(working, origin | {"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "SERIES_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    assert "with git" in done.stdout and f"HELPERS={cache / 'helpers.py'}" in done.stdout
    assert "delete that folder to fetch it again" in done.stdout
    again = _setup_in(working, origin | {"SERIES_CACHE": str(cache), "SERIES_REPO_URL": "file:///nowhere"})
    assert again.returncode == 0 and "Fetched" not in again.stdout, "fetched once, then reused"
    assert f"HELPERS={cache / 'helpers.py'}" in again.stdout


def test_setup_for_a_lone_notebook_without_git_downloads_the_archive(tmp_path, origin):
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    no_git = tmp_path / "bin"  # a PATH on which there is no git
    no_git.mkdir()
    cache = tmp_path / "cache" / "pytorch-gpu-mnist"
    done = _setup_in(downloads, origin | {"SERIES_CACHE": str(cache)}, path=str(no_git))
    assert done.returncode == 0, done.stderr
    assert f"from {origin['SERIES_ARCHIVE_URL']}" in done.stdout and (cache / "notebooks" / "series.py").exists()
    assert not [p for p in cache.parent.iterdir() if p != cache], "no unpacking folder left behind"


def test_setup_that_cannot_download_its_fetcher_says_what_to_do_in_one_error(tmp_path):
    """No internet (Kaggle's default): the first download fails, and one error says what to do."""
    url = "file:///no/such/folder/"
    done = _setup_in(tmp_path, {"SERIES_FETCH_URL": url, "SERIES_CACHE": str(tmp_path / "cache" / "series")})
    assert done.returncode != 0
    assert done.stderr.count("Traceback") == 1 and "During handling" not in done.stderr, done.stderr
    message = done.stderr[done.stderr.index(f"RuntimeError: Cannot download {url}") :]
    assert "Turn internet on (Kaggle: Settings > Internet)" in message and "No such file" in message


@pytest.mark.parametrize("kaggle", [False, True])
def test_setup_that_cannot_fetch_says_what_happened_and_what_to_do(tmp_path, origin, kaggle):
    env = {"SERIES_REPO_URL": "file:///no/such/repository.git", "SERIES_ARCHIVE_URL": "file:///no/such/archive.zip"}
    env["SERIES_FETCH_URL"] = origin["SERIES_FETCH_URL"]
    env |= {"SERIES_CACHE": str(tmp_path / "cache" / "series")} | (
        {"KAGGLE_KERNEL_RUN_TYPE": "Batch"} if kaggle else {}
    )
    done = _setup_in(tmp_path, env)
    assert done.returncode != 0
    message = done.stderr[done.stderr.index("RuntimeError: Could not find or fetch this series' code") :]
    assert (
        "git clone file:///no/such/repository.git failed" in message
        and "downloading file:///no/such/archive.zip" in message
    )
    assert ("Settings > Internet" in message) is kaggle and (
        "open this notebook from its notebooks/ folder" in message
    ) is not kaggle
    assert "StopIteration" not in done.stderr and "CalledProcessError" not in done.stderr
    assert done.stderr.count("Traceback") == 1, done.stderr


def test_setup_in_colab_fetches_the_series_and_imports_helpers(tmp_path, origin):
    """With a stand-in google.colab module and Colab's working folder, the whole cell runs: fetch, then import."""
    fake = tmp_path / "fake_colab" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("# stands in for Colab's module\n")
    content = tmp_path / "content"  # Colab's working folder
    content.mkdir()
    cache = tmp_path / "root" / ".cache" / "pytorch-gpu-mnist"
    code = pages.SETUP + "\nprint('HELPERS=' + helpers.__file__, helpers.get_default_device('cpu'))\n"
    env = origin | {"PYTHONPATH": str(tmp_path / "fake_colab"), "SERIES_CACHE": str(cache)}
    done = _setup_in(content, env, code=code)
    assert done.returncode == 0, done.stderr
    assert f"HELPERS={cache / 'helpers.py'} cpu" in done.stdout and (cache / "notebooks" / "series.py").exists()
