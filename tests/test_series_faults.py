"""The tooling when something is wrong: a folder that is not its own, two runs in one second, a bad device or a
relative path, a dead kernel mid-run, Ctrl-C, an unwritable runs/, an error message longer than a line, and the
kernel's shutdown. Each is refused in one line before anything changes, or kept."""

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill
import pytest
from nbclient.exceptions import DeadKernelError

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

import series  # noqa: E402
from serieslib import checks, pages, runs  # noqa: E402

SETTINGS = "# @title Settings\nsize = 2\ndevice = None\ndata_root = None  # a path\ncheckpoint = None"
RESULTS = [
    "{",
    '    "size": size,',
    '    "device": "cpu",',
    '    "data_root": data_root,',
    '    "checkpoint": checkpoint,',
    "}",
]


def stand_in(folder: Path, stem: str, code: str = "print(size)") -> Path:
    """A notebook of the series' shape in `folder`: a title, a settings cell, `code`, results in metadata."""
    folder.mkdir(exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {stem}"),
        nbformat.v4.new_code_cell(SETTINGS, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(code),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["series"] = {"results": RESULTS}
    nbformat.write(nb, folder / f"{stem}.ipynb")
    return folder / f"{stem}.ipynb"


@pytest.fixture
def series_of(tmp_path, monkeypatch):
    """Make the series these stand-ins (stem -> code), in tmp_path/notebooks; returns that folder."""

    def make(**notebooks: str) -> Path:
        folder = tmp_path / "notebooks"
        for stem, code in notebooks.items():
            stand_in(folder, stem, code)
        monkeypatch.setattr(pages, "NOTEBOOKS", folder)
        return folder

    return make


@pytest.fixture
def no_kernels(monkeypatch):
    """Fail the test if any notebook starts executing."""
    monkeypatch.setattr(runs, "_execute", lambda *args: pytest.fail("a notebook ran"))


# ---------------------------------------------------------------------------- prepare's folder


@pytest.mark.parametrize(
    ("out", "precious"),
    [(".", "README.md"), ("notebooks", "notebooks/01_a.ipynb"), ("runs", "runs/20240101-120000/metrics.json")],
)
def test_prepare_refuses_a_folder_that_is_not_its_own_and_deletes_nothing(tmp_path, monkeypatch, out, precious):
    """`prepare --out .`, `--out notebooks`, `--out runs` are refused: prepare empties its folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / precious).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / precious).write_text("precious")
    folder = (tmp_path / out).resolve()
    with pytest.raises(SystemExit, match=rf"^{folder} is not empty and prepare did not make it .*: pass --out"):
        series.main(["prepare", "--out", out, "06_plots"])
    assert [p.read_text() for p in tmp_path.rglob("*") if p.is_file()] == ["precious"], "nothing deleted or added"


def test_prepare_writes_into_a_new_empty_or_own_folder_again_and_again(tmp_path):
    """`make test` runs `prepare --out runs/test` every time: its own folder (marked) is emptied and rewritten."""
    for out in (tmp_path / "new" / "test", tmp_path / "empty"):
        out.mkdir(parents=True, exist_ok=True) if out.name == "empty" else None
        runs.prepare(out, names=["06_plots"])
        (out / "lesson.ckpt").write_text("left by the last test run")
        (prepared,) = runs.prepare(out, names=["06_plots"])
        assert prepared == out / "prepared" / "06_plots.ipynb" and (out / checks.PREPARED_MARK).is_file()
        assert not (out / "lesson.ckpt").exists(), "its own folder starts afresh"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(checks.Refused, match="a-file is a file, not a folder: pass --out a new folder"):
        runs.prepare(tmp_path / "a-file", names=["06_plots"])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["refresh", "--out", "runs/x"], "--out"),
        (["run", "--lang", "zh"], "--lang"),
        (["refresh", "01_gpu_runtime", "-p", "device", "cpu"], "-p device cpu"),  # settings are run's alone
        (["stamp", "01_gpu_runtime"], "01_gpu_runtime"),
    ],
)
def test_an_option_a_command_lacks_is_refused_by_argparse_before_anything_runs(monkeypatch, capsys, argv, named):
    monkeypatch.setattr(series, "_check_selection", lambda args: pytest.fail("parsed"))
    with pytest.raises(SystemExit) as refused:
        series.main(argv)
    assert refused.value.code == 2 and f"error: unrecognized arguments: {named}" in capsys.readouterr().err


# ---------------------------------------------------------------------------- a folder per run


def test_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setattr(runs.time, "strftime", lambda _: "20250101-120000")
    made = [checks.new_run_folder(tmp_path / "runs") for _ in range(3)]
    assert [p.name for p in made] == ["20250101-120000", "20250101-120000-2", "20250101-120000-3"]
    assert all(p.is_dir() for p in made)


# ---------------------------------------------------------------------------- checked once, before any kernel


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("tpu", r"'tpu' \(-p device\) is not a device name; use e.g. 'cpu', 'cuda'"),
        ("cuda:9", r"Device 'cuda:9' \(-p device\) is not available on this machine; available: cpu"),
    ],
)
def test_run_refuses_a_bad_device_once_before_any_kernel_starts(tmp_path, no_kernels, device, message):
    with pytest.raises(SystemExit, match=message):
        series.main(["run", "01_gpu_runtime", "-p", "device", device, "--out", str(tmp_path / "runs")])
    assert not (tmp_path / "runs").exists(), "nothing made"


def test_run_passes_paths_as_typed_and_mixes_names_and_parameters(series_of, tmp_path, monkeypatch):
    """`series.py run -p device cpu 01_stand_in -p data_root data`: the notebook gets "data", and takes it from the
    repository's folder as a learner's setting is (test_series_setup.py), wherever the command was typed."""
    series_of(**{"01_stand_in": "print(size)"})
    monkeypatch.chdir(tmp_path)
    series.main(
        [
            "run",
            "-p",
            "device",
            "cpu",
            "01_stand_in",
            "-p",
            "data_root",
            "data",
            "-p",
            "checkpoint",
            "c.pt",
            "--out",
            "runs",
        ]
    )
    (out,) = [p for p in (tmp_path / "runs").iterdir() if p.name != "latest"]
    metrics = json.loads((out / "metrics.json").read_text())["01_stand_in"]
    assert metrics["data_root"] == "data" and metrics["checkpoint"] == "c.pt"


# ---------------------------------------------------------------------------- a dead kernel, Ctrl-C


def _stopping_at(monkeypatch, stem: str, error: BaseException) -> None:
    """papermill raises `error` when it starts executing `stem`, as Ctrl-C or a kernel's death does."""
    execute = papermill.execute_notebook

    def fake(input_path, output_path, **kwargs):
        if not kwargs.get("prepare_only") and Path(input_path).stem == stem:
            raise error
        return execute(input_path, output_path, **kwargs)

    monkeypatch.setattr(papermill, "execute_notebook", fake)


def test_a_dead_kernel_is_said_and_the_run_goes_on_without_moving_latest(series_of, tmp_path, monkeypatch, capsys):
    series_of(**{"01_stand_in": "print(size)", "02_stand_in": "print(2)", "03_stand_in": "print(3)"})
    earlier = tmp_path / "runs" / "earlier"
    earlier.mkdir(parents=True)
    (tmp_path / "runs" / "latest").symlink_to("earlier")
    _stopping_at(monkeypatch, "02_stand_in", DeadKernelError("Kernel died"))
    with pytest.raises(SystemExit, match="1 notebook.s. failed: 02_stand_in"):
        runs.run({}, out_root=tmp_path / "runs")
    assert "02_stand_in: FAILED: the kernel died" in capsys.readouterr().out
    assert (tmp_path / "runs" / "latest").resolve() == earlier, "latest moves only to a run in which all ran"
    (out,) = [p for p in (tmp_path / "runs").iterdir() if p.name not in ("latest", "earlier")]
    assert json.loads((out / "metrics.json").read_text())["03_stand_in"]["size"] == 2, "the notebooks after it ran"


def test_ctrl_c_is_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(series.COMMANDS, "translate", interrupted)
    with pytest.raises(SystemExit) as stopped:
        series.main(["translate"])
    assert stopped.value.code == 130 and capsys.readouterr().err == "series.py translate: interrupted (Ctrl-C)\n"


# ---------------------------------------------------------------------------- runs/ a file, or read-only


def test_run_refuses_a_runs_folder_it_cannot_write_before_any_kernel(tmp_path, monkeypatch, no_kernels):
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(SystemExit, match=rf"^{tmp_path / 'runs'} is a file, not a folder for runs: move it away"):
        series.main(["run", "01_gpu_runtime", "--out", str(tmp_path / "runs")])
    locked = tmp_path / "locked"
    locked.mkdir()
    mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self.parent == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(checks.Refused, match=rf"cannot make a run's folder in {locked} \(Permission denied\): make it"):
        runs.run({}, out_root=locked)
    (tmp_path / "runs2" / "latest").mkdir(parents=True)
    with pytest.raises(checks.Refused, match="latest is not the link that run makes there: move it away"):
        runs.run({}, out_root=tmp_path / "runs2")


# ---------------------------------------------------------------------------- a failed notebook's error


def test_a_failed_notebook_shows_its_whole_error(series_of, tmp_path, capsys):
    long = "x" * 250 + " fix: pass -p size 3"
    series_of(**{"01_stand_in": f"raise ValueError({long!r})"})
    with pytest.raises(SystemExit, match="1 notebook.s. failed: 01_stand_in"):
        runs.run({}, out_root=tmp_path / "runs")
    printed = capsys.readouterr().out.splitlines()
    assert any(line.startswith("01_stand_in ") and " FAILED " in line and line.endswith(long) for line in printed)


# ---------------------------------------------------------------------------- the kernel's shutdown


def test_shutdown_does_not_interrupt_the_kernel_but_a_timeout_still_does(monkeypatch):
    """No SIGINT as a kernel shuts down: a kernel finishing its reply would log "KeyboardInterrupt caught in kernel"."""
    from jupyter_client.manager import AsyncKernelManager

    sent = []

    async def interrupt(self):
        sent.append(self.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    manager = runs.kernel_manager()()
    for shutting_down in (True, False):
        manager.shutting_down = shutting_down
        asyncio.run(manager._async_interrupt_kernel())
    assert sent == [False]


def test_importing_series_loads_no_torch():
    """The device is checked in a subprocess: the command line itself stays quick to start."""
    code = "import sys; sys.path.insert(0, 'notebooks'); import series; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def _python_that_says_it_is_310(folder: Path) -> Path:
    """A `python3` that reports version 3.10.12, as Ubuntu 22.04's does; otherwise this Python."""
    (folder / "fake310").mkdir()
    (folder / "fake310" / "sitecustomize.py").write_text(
        "import sys\nsys.version_info = (3, 10, 12, 'final', 0)\nsys.version = '3.10.12 (main) [GCC 11.4.0]'\n"
    )
    python = folder / "python3.10"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={folder / "fake310"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


@pytest.fixture
def makefile_here(tmp_path):
    """The Makefile and its requirements in an empty folder, where `make venv` may create .venv."""
    for name in ("Makefile", "requirements.txt", "requirements-dev.txt"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_make_venv_with_python_310_says_what_to_install_before_pip(makefile_here):
    """`make venv` with Python 3.10 says what to install before pip runs (pip says 'No matching distribution')."""
    python = _python_that_says_it_is_310(makefile_here)
    made = subprocess.run(["make", "venv", f"PYTHON={python}"], cwd=makefile_here, capture_output=True, text=True)
    assert made.returncode != 0
    assert f"Python 3.11 or newer needed; found 3.10.12 ({python})" in made.stderr, made.stderr
    assert "pip" not in made.stdout + made.stderr and not (makefile_here / ".venv").exists()


def test_make_venv_with_a_venv_of_python_310_says_to_delete_it(makefile_here):
    """A .venv made by Python 3.10 is named, with how to remove it, before pip runs in it."""
    (makefile_here / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(_python_that_says_it_is_310(makefile_here), makefile_here / ".venv" / "bin" / "python")
    made = subprocess.run(["make", "venv"], cwd=makefile_here, capture_output=True, text=True)
    assert made.returncode != 0
    assert "made by Python 3.10.12, which is too old: delete it (rm -r .venv) and run make again" in made.stderr
    assert "pip" not in made.stdout + made.stderr
    assert sorted(p.name for p in (makefile_here / ".venv").iterdir()) == ["bin"]  # nothing installed


# ---------------------------------------------------------------------------- a learner's folder and install


def test_a_duplicated_notebook_is_named_once_and_left_alone(tmp_path, monkeypatch, capsys):
    """JupyterLab's Duplicate makes 03_model-Copy1.ipynb: prepare (so `make test`) takes the series' own notebooks,
    and one line names the stray, which is neither read nor changed."""
    folder = tmp_path / "notebooks"
    shutil.copytree(REPO / "notebooks", folder, ignore=shutil.ignore_patterns("data", "__pycache__"))
    stray = folder / "03_model-Copy1.ipynb"
    shutil.copy(folder / "03_model.ipynb", stray)
    (folder / "Untitled.ipynb").write_text("{}")  # a scratch notebook, not even a valid one
    before = stray.read_bytes()
    monkeypatch.setattr(pages, "NOTEBOOKS", folder)
    assert "03_model-Copy1" not in [p.stem for p in pages.notebook_paths()]
    series.main(["prepare", "--out", str(tmp_path / "test")])
    said = capsys.readouterr()
    assert said.err.count("03_model-Copy1.ipynb") == 1 and "Untitled.ipynb" in said.err
    assert said.err.splitlines()[0].startswith("left alone, not one of the series' notebooks:")
    prepared = sorted(p.name for p in (tmp_path / "test" / "prepared").iterdir())
    assert prepared == sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert stray.read_bytes() == before


@pytest.mark.parametrize("command", ["run", "prepare"])
def test_series_without_papermill_says_which_file_installs_it_before_making_anything(command, tmp_path, monkeypatch):
    """A learner's .venv (requirements.txt alone) has no papermill: said, with the file that installs it, before any
    folder is made."""
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "papermill" else found(name))
    with pytest.raises(SystemExit, match=f"series.py {command} needs papermill, which requirements-dev.txt installs"):
        series.main([command, "01_gpu_runtime", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists(), "nothing made"


def test_an_unquoted_value_with_a_space_is_pointed_at(monkeypatch):
    """`make run ARGS="-p data_root my data 03_model"`: "no notebook named data" says to quote a value with spaces."""
    monkeypatch.setattr(series, "run", lambda *args: pytest.fail("ran"))
    with pytest.raises(SystemExit, match=r"no notebook named data: .*a value with spaces needs quotes"):
        series.main(["run", "-p", "data_root", "my", "data", "03_model"])
