"""The maintainers' tooling, notebooks/series.py and notebooks/serieslib: stamp, results, prepare, run (papermill,
metrics), and the command line refusing what it cannot do before running anything.
The Chinese edition (translate): test_translation.py. Faults (a folder not its own, a dead kernel, a bad device):
test_series_faults.py."""

import json
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

import series  # noqa: E402
from serieslib import exercises, pages, results, runs  # noqa: E402

NOTEBOOKS = pages.notebook_paths()


# ---------------------------------------------------------------------------- pages and results


def test_stamp_removes_leftovers_under_the_badge(tmp_path):
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    title = nb.cells[0].source.splitlines()[0]
    nb.cells[0].source = f"{title}\nBADGE\n[![Open In Colab](old)](old)\n\nText."
    path = tmp_path / NOTEBOOKS[0].name
    nbformat.write(nb, path)
    assert pages.stamp(path)
    assert nbformat.read(path, as_version=4).cells[0].source == f"{title}\n{pages.badge(path.name)}\n\nText."


def test_results_read_as_a_person_reads_them():
    assert results.format_value([0.123456, {"a": 2.0, "b": "x"}, 3]) == "[0.1235, {a: 2.0000, b: x}, 3]"
    assert results.format_value([6.0e-08, 0.0, -0.0003]) == "[6.0e-08, 0.0000, -3.0e-04]"


# ---------------------------------------------------------------------------- runs: prepare, run


def injected(nb) -> dict:
    """The settings papermill's parameterization set: the assignments of the cell it adds after the settings cell."""
    (cell,) = pages.tagged(nb, "injected-parameters")
    assert nb.cells.index(cell) == nb.cells.index(pages.settings_cell(nb)) + 1, "right after the settings cell"
    namespace: dict = {}
    exec(cell.source, namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def test_prepare_sets_the_test_settings_as_papermill_does_and_keeps_the_committed_outputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `prepare --out runs/test`: a relative folder, and kernels that run elsewhere
    (prepared,) = runs.prepare(Path("test"), names=["06_plots"])
    nb = nbformat.read(prepared, as_version=4)
    committed = nbformat.read(REPO / "notebooks" / "06_plots.ipynb", as_version=4)
    assert pages.settings_cell(nb).source == pages.settings_cell(committed).source, "the settings cell as committed"
    assert injected(nb) == {
        "device": "cpu",
        "exercise_epochs": 1,
        "spread_seeds": [1, 2],
        "progress": False,
        "checkpoint": str(tmp_path / "test" / "lesson.ckpt"),
    }, "the test settings the notebook has, in papermill's own cell, and only those"
    (recorder,) = pages.tagged(nb, "metrics")
    assert recorder is nb.cells[-1] and recorder.source == results.results_cell(committed).source, "added last"
    assert not recorder.outputs and not pages.tagged(committed, "metrics"), "at run time only"
    (solution,) = pages.tagged(nb, "solution")  # a proof after each worked solution: make test runs it, checked
    (proof,) = pages.tagged(nb, "solution-proof")
    assert nb.cells.index(proof) == nb.cells.index(solution) + 1 and "fashion_test_acc = " in proof.source
    assert proof.source.endswith('q1.check()\nassert q1.passed, "Solution 1 does not pass its check"')
    added = (recorder, proof, *pages.tagged(nb, "injected-parameters"))
    rest = [c for c in nb.cells if c not in added]
    assert [c.get("outputs") for c in rest] == [c.get("outputs") for c in committed.cells]
    assert pages.tagged(nb, "nbval-check-output")
    (loose,) = runs.prepare(tmp_path / "colab", names=["06_plots"], check=False)
    assert not pages.tagged(nbformat.read(loose, as_version=4), "nbval-check-output"), "ranges only"


def test_each_run_keeps_its_scratch_files_in_its_own_folder(tmp_path):
    """08's checkpoints, 09's traces and 10's weights go under the run's folder: not into runs/checkpoint-demo and
    the like, which an open notebook (or another run) uses at the same time."""
    for stem in ("08_checkpoints", "09_cpu_vs_gpu", "10_many_gpus"):
        nb = runs._prepared(REPO / "notebooks" / f"{stem}.ipynb", {"device": "cpu"}, tmp_path / "run")
        assert injected(nb)["work_dir"] == str(tmp_path / "run" / "work" / stem)
        committed = nbformat.read(REPO / "notebooks" / f"{stem}.ipynb", as_version=4)
        assert pages.settings(committed)["work_dir"] is None, "an open notebook keeps its own default folder"


def test_run_executes_no_worked_solution_and_prepare_proves_each_one(tmp_path):
    """`make run` is a learner's Run All: no proof cells. `prepare` adds one after each solution, which runs it and
    asserts that its check passed."""
    path = REPO / "notebooks" / "09_cpu_vs_gpu.ipynb"
    ran = runs._prepared(path, {"device": "cpu"}, tmp_path)
    assert pages.tagged(ran, "solution") and not pages.tagged(ran, "solution-proof")
    (proof,) = pages.tagged(exercises.with_proofs(ran, path.stem), "solution-proof")
    assert "for hidden in (32, 1024)" in proof.source and "assert q1.passed" in proof.source


def test_make_run_executes_with_papermill_and_writes_the_metrics(tmp_path, monkeypatch, capsys):
    """`make run`'s machinery on a stand-in notebook: settings passed, metrics, the summary, runs/latest."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 01 · A stand-in"),
        nbformat.v4.new_code_cell("# @title Settings\nsize = 2\ndevice = None", metadata={"tags": ["parameters"]}),
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
    summary = capsys.readouterr().out.splitlines()
    assert any(line.startswith("01_stand_in ") and " ok " in line and "size=5" in line for line in summary)


# ---------------------------------------------------------------------------- the command line


def test_series_refuses_an_unknown_notebook_before_running_anything(monkeypatch):
    monkeypatch.setattr(series, "run", lambda *args: pytest.fail("ran"))
    monkeypatch.setattr(series, "refresh", lambda *args: pytest.fail("ran"))
    for command in ("run", "refresh", "translate"):
        with pytest.raises(SystemExit, match="no notebook named 99_nope: choose from 01_gpu_runtime, 02_data_loading"):
            series.main([command, "01_gpu_runtime", "99_nope"])


def test_series_refuses_a_setting_no_selected_notebook_has_or_accepts(monkeypatch):
    ran = []
    monkeypatch.setattr(series, "run", lambda *args: ran.append(args))
    with pytest.raises(SystemExit, match="setting.s. epochs; they have: device, repeats, seed, sizes"):
        series.main(["run", "01_gpu_runtime", "-p", "epochs", "-1"])
    with pytest.raises(SystemExit, match="no selected notebook has the setting.s. epochs1, epochs2"):
        series.main(["run", "05_training", "-p", "epochs1", "0", "-p", "epochs2", "0"])  # 05's lesson lines now
    assert not ran
    series.main(["run", "01_gpu_runtime.ipynb", "05_training", "-p", "exercise_limit", "500"])  # 05's only
    assert ran[0][0] == {"exercise_limit": 500} and ran[0][2] == ["01_gpu_runtime.ipynb", "05_training"]


def test_series_refuses_a_setting_a_notebook_would_refuse_before_any_kernel_starts(monkeypatch):
    """`-p exercise_limit 60000` is refused before any kernel: 05's training split has 50,000 images."""
    monkeypatch.setattr(series, "run", lambda *args: pytest.fail("ran"))
    with pytest.raises(
        SystemExit,
        match=r"05_training: the setting exercise_limit must be None, or a whole number of "
        r"at least 1 and at most 50,000; it is 60000",
    ):
        series.main(["run", "05_training", "-p", "exercise_limit", "60000"])
    with pytest.raises(
        SystemExit, match=r"11_gpu_speed: the setting bench_epochs must be a whole number of at least 2"
    ):
        series.main(["run", "11_gpu_speed", "-p", "bench_epochs", "1"])


def test_series_takes_parameters_and_names_in_any_order(monkeypatch):
    ran = []
    monkeypatch.setattr(series, "run", lambda *args: ran.append(args))
    series.main(["run", "-p", "device", "cpu", "01_gpu_runtime", "-p", "seed", "3", "05_training"])
    assert ran[0][0] == {"device": "cpu", "seed": 3} and ran[0][2] == ["01_gpu_runtime", "05_training"]
