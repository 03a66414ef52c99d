"""series_setup.py, what every notebook's set-up cell calls: each setting checked before any work, with one message
that names it; relative paths taken from the repository's folder wherever the kernel runs; the code refused when it
is not the notebook's (a learner's own helpers, another version); what `start` returns; papermill's `-p` honoured.
The set-up cell itself and the install it runs where the code is missing: test_setup_cell.py."""

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "notebooks"))

from serieslib import pages  # noqa: E402

import helpers  # noqa: E402
import series_setup  # noqa: E402


@pytest.fixture
def no_work(monkeypatch):
    """start() without its slow parts: the data's check and the exercises' binding record their calls instead."""
    calls = []
    monkeypatch.setattr(series_setup.helpers_data, "ensure_mnist", lambda root, setting: calls.append(("data", root)))
    monkeypatch.setattr(
        series_setup.helpers_exercises, "exercises", lambda stem, ns, lang: calls.append(("q", stem)) or []
    )
    return calls


def settings_of(stem: str) -> dict:
    return pages.settings(nbformat.read(REPO / "notebooks" / f"{stem}.ipynb", as_version=4))


# ---------------------------------------------------------------------------- the settings, checked first


BAD = [
    ("seed", "abc", "the setting seed must be a whole number from 0 to 2**63 - 1, such as 42; it is 'abc'"),
    ("seed", -1, "it is -1"),
    ("seed", True, "it is True"),
    ("exercise_limit", 60_000, "None, or a whole number of at least 1 and at most 50,000; it is 60000"),
    ("data_root", "", "None, or a path"),
    ("progress", "yes", "None, True or False; it is 'yes'"),
    ("device", 3, "'auto' (the best here), or a device name such as 'cpu'"),
]


@pytest.mark.parametrize(("name", "value", "words"), BAD, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(BAD)])
def test_a_bad_setting_stops_the_set_up_before_any_work_with_one_message(name, value, words, no_work):
    namespace = settings_of("05_training") | {name: value}
    with pytest.raises(ValueError) as raised:
        series_setup.start("05_training", namespace)
    assert words in str(raised.value)
    assert str(raised.value).endswith(
        f"settings cell at the top of the notebook (or pass another to a headless run: -p {name} VALUE)"
    )
    assert no_work == [], "nothing loaded, nothing bound"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("sizes", [], "sizes must be a list of sizes, whole numbers of at least 1, such as [128, 512]; it is []"),
        ("sizes", 128, "sizes must be a list of sizes"),
        ("repeats", 32.5, "repeats must be a whole number of at least 1; it is 32.5"),
        ("seed", 2**63, "seed must be a whole number from 0 to 2**63 - 1"),
    ],
)
def test_each_kind_of_setting_is_named_with_what_it_accepts(name, value, says, no_work):
    with pytest.raises(ValueError, match=re.escape(says)):
        series_setup.start("01_gpu_runtime", settings_of("01_gpu_runtime") | {name: value})


def test_spread_seeds_takes_none_or_a_list_of_seeds():
    accepts = {"spread_seeds": series_setup.SEEDS_SETTING}
    for good in (None, [1], [1, 2, 3]):
        series_setup.check_settings({"spread_seeds": good}, accepts)
    for bad in ([], [1, -1], 3, "1,2"):
        with pytest.raises(ValueError, match="spread_seeds must be None, or a list of seeds"):
            series_setup.check_settings({"spread_seeds": bad}, accepts)


def test_a_device_setting_that_is_no_device_names_the_setting(no_work):
    with pytest.raises(ValueError, match=r"'tpu' \(the setting device\) is not a device name"):
        series_setup.start("02_data_loading", settings_of("02_data_loading") | {"device": "tpu"})


def test_a_device_this_machine_lacks_is_refused_naming_the_setting(no_work):
    with pytest.raises(ValueError, match=r"Device 'cuda:7' \(the setting device\) is not available on this machine"):
        series_setup.start("02_data_loading", settings_of("02_data_loading") | {"device": "cuda:7"})
    assert no_work == []


def test_every_notebooks_defaults_pass_and_start_returns_what_its_set_up_cell_names(no_work, capsys, tmp_path):
    for stem, spec in series_setup.NOTEBOOKS.items():
        namespace = settings_of(stem) | {"work_dir": str(tmp_path / stem), "checkpoint": str(tmp_path / "c.ckpt")}
        namespace = {k: v for k, v in namespace.items() if k in spec.settings}
        returned = series_setup.start(stem, namespace)
        returned = returned if isinstance(returned, tuple) else (returned,)
        setup = pages.tagged(nbformat.read(REPO / "notebooks" / f"{stem}.ipynb", as_version=4), "setup")[0].source
        names = setup.splitlines()[-1].split(" = start(")[0]
        assert names == series_setup.setup_names(stem) and len(returned) == len(spec.returns), stem
        for name, value in zip(spec.returns, returned):
            expected = {"DEVICE": torch.device, "DATA": Path, "CHECKPOINT": Path, "WORK": Path, "exercises": tuple}
            assert isinstance(value, expected[name]), (stem, name, value)
    said = capsys.readouterr().out.splitlines()
    assert len(said) == len(series_setup.NOTEBOOKS), "one line a notebook"
    assert all(line.startswith("This run computes on ") and "/" not in line for line in said), "no paths"


def test_start_leaves_the_warning_filters_as_it_found_them(no_work):
    before = list(warnings.filters)
    series_setup.start("02_data_loading", settings_of("02_data_loading"))
    assert warnings.filters == before


def test_start_seeds_before_returning(no_work):
    series_setup.start("03_model", settings_of("03_model") | {"seed": 7})
    first = torch.rand(3)
    series_setup.start("03_model", settings_of("03_model") | {"seed": 7})
    assert torch.equal(first, torch.rand(3))


def test_an_unknown_notebook_is_named_with_the_series_ones():
    with pytest.raises(ValueError, match="'03_model-Copy1' is not a notebook of the series; they are: 01_gpu_runtime"):
        series_setup.start("03_model-Copy1", {})


# ---------------------------------------------------------------------------- paths mean what the learner typed


@pytest.mark.parametrize("cwd", ["notebooks", "elsewhere"])
def test_a_relative_path_starts_in_the_repositorys_folder_wherever_the_kernel_runs(cwd, no_work, tmp_path, monkeypatch):
    """data_root="data" is the repository's data/, not notebooks/data (a second 55 MB copy), from any working folder;
    `series.py run -p data_root data` passes the same words, so it means the same."""
    monkeypatch.chdir(REPO / "notebooks" if cwd == "notebooks" else tmp_path)
    namespace = settings_of("08_checkpoints") | {"data_root": "data", "work_dir": "runs/mine"}
    device, data, work, _ = series_setup.start("08_checkpoints", namespace)
    assert data == REPO / "data" and no_work[0] == ("data", REPO / "data")
    assert work == REPO / "runs" / "mine" and work.is_dir()
    assert not (REPO / "notebooks" / "data").exists() and not (tmp_path / "data").exists()


def test_a_path_typed_with_a_tilde_means_the_home_folder(no_work, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    _, data, _ = series_setup.start("03_model", settings_of("03_model") | {"data_root": "~/mnist"})
    assert data == tmp_path / "mnist"


def test_outside_a_clone_relative_paths_start_in_the_working_folder(no_work, tmp_path, monkeypatch):
    """Colab and Kaggle install the modules: data/ beside the notebook, in /content, as the lesson's MNIST('data/')."""
    monkeypatch.setattr(series_setup, "HERE", tmp_path / "site-packages")
    monkeypatch.chdir(tmp_path)
    _, data, _ = series_setup.start("03_model", settings_of("03_model"))
    assert data == tmp_path / "data"


def test_05_checks_that_its_checkpoint_can_be_written_before_training(no_work, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"^the setting checkpoint: cannot write to .*is a file, not a folder"):
        series_setup.start("05_training", settings_of("05_training") | {"checkpoint": str(tmp_path / "file" / "c")})


# ---------------------------------------------------------------------------- the notebook's own code


def test_a_learners_own_helpers_module_is_named_with_what_to_rename(no_work, tmp_path):
    mine = tmp_path / "helpers.py"
    mine.write_text("def my_function(): pass\n")
    done = subprocess.run(
        [sys.executable, "-c", "import helpers, series_setup; series_setup.start('03_model', {'device': None})"],
        cwd=tmp_path,
        env=os.environ | {"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"},
        capture_output=True,
        text=True,
    )
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: The `helpers` imported here is {mine}, a module of your own"), last
    assert "Rename yours" in last


class _Metadata(dict):
    """What importlib.metadata.metadata returns, for the fields series_setup reads."""

    def get_all(self, name):
        return self.get(name)


def test_installed_code_of_another_version_is_refused_with_the_install_of_the_right_one(no_work, monkeypatch, tmp_path):
    monkeypatch.setattr(series_setup, "HERE", Path("/site-packages"))
    monkeypatch.chdir(tmp_path)  # as Colab's /content
    installed = {"Version": "2026.11.1", "Project-URL": [f"Repository, https://github.com/{pages.GITHUB}"]}
    monkeypatch.setattr(series_setup.importlib.metadata, "metadata", lambda name: _Metadata(installed))
    with pytest.raises(RuntimeError) as raised:
        series_setup.start("03_model", settings_of("03_model"), version=pages.VERSION)
    message = str(raised.value)
    assert f"written for version {pages.VERSION} of the series' code, and version 2026.11.1 is installed" in message
    assert f"git+https://github.com/{pages.GITHUB}@v{pages.VERSION}" in message
    series_setup.start("03_model", settings_of("03_model"), version="2026.11.1")


# ---------------------------------------------------------------------------- papermill's -p, as its users use it


def _papermill(tmp_path: Path, *options: str, cwd: Path = REPO / "notebooks") -> subprocess.CompletedProcess:
    """`papermill notebooks/01_gpu_runtime.ipynb out.ipynb OPTIONS`, as its users type it, the kernel in `cwd`."""
    out = tmp_path / "out.ipynb"
    command = [sys.executable, "-m", "papermill", str(REPO / "notebooks" / "01_gpu_runtime.ipynb"), str(out)]
    command += ["--cwd", str(cwd), "--no-progress-bar", "-k", "python3", *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _outputs(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n".join(
        o.get("text", "") + o.get("evalue", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )


def test_papermill_p_sets_a_notebooks_settings_and_a_bad_one_stops_in_the_set_up(tmp_path, no_work):
    """`papermill 01_gpu_runtime.ipynb out.ipynb -p seed 7 -y "sizes: [64, 96]"`: honoured (the timing table has
    those sizes and no other); `-p seed abc` stops in the set-up cell with the settings check's message, and so does
    a list given with -p, which papermill passes as text."""
    done = _papermill(tmp_path, "-p", "device", "cpu", "-y", "sizes: [64, 96]", "-p", "repeats", "1", "-p", "seed", "7")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cell with tag 'parameters'" not in done.stderr, "papermill found the settings cell"
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    (injected,) = pages.tagged(nb, "injected-parameters")
    assert nb.cells.index(injected) == nb.cells.index(pages.settings_cell(nb)) + 1
    table = [line.split() for line in _outputs(tmp_path / "out.ipynb").splitlines() if line.startswith("cpu ")]
    assert [row[1] for row in table] == ["64", "96"], "the sizes given, and no other"
    assert json.loads(json.dumps(nb.metadata["papermill"]["parameters"]))["seed"] == 7
    with pytest.raises(ValueError, match=r"the setting sizes must be a list of sizes.*-y 'sizes: \[1, 2\]'"):
        series_setup.start("01_gpu_runtime", settings_of("01_gpu_runtime") | {"sizes": "[64, 96]"})  # as -p gives it
    bad = _papermill(tmp_path, "-p", "seed", "abc")
    assert bad.returncode != 0
    assert "the setting seed must be a whole number from 0 to 2**63 - 1, such as 42; it is 'abc'" in bad.stderr
    failed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    (setup,) = pages.tagged(failed, "setup")
    assert [o.output_type for o in setup.outputs] == ["error"], "it stopped in the set-up cell"
    assert all(not c.get("outputs") for c in failed.cells[failed.cells.index(setup) + 1 :]), "before any work"


def test_papermill_started_outside_the_repository_runs_the_repositorys_code_offline(tmp_path):
    """papermill (or Jupyter) started elsewhere on a notebook of the clone, where the kernel's folder is not the
    notebook's: the modules requirements.txt installed (-e .) are this clone's, found from any folder, with no
    network (never "Cannot download ... Turn internet on")."""
    offline = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "url.file:///nowhere.insteadOf",
        "GIT_CONFIG_VALUE_0": "https",
    }
    done = subprocess.run(
        [sys.executable, "-m", "papermill", str(REPO / "notebooks" / "01_gpu_runtime.ipynb"), "out.ipynb", "-k",
         "python3", "--no-progress-bar", "-p", "repeats", "1", "-y", "sizes: [64]", "--inject-paths"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=os.environ | offline,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    (setup,) = pages.tagged(nb, "setup")
    (said,) = [o.get("text") or o.data["text/plain"] for o in setup.outputs]  # printed, or shown in every language
    assert said.startswith("This run computes on cpu") and "Cannot download" not in said, "the clone's code, offline"


# ---------------------------------------------------------------------------- settings cells edited by hand


def test_a_deleted_settings_cell_is_said_so(no_work):
    with pytest.raises(ValueError, match=r"none of this notebook's settings \(device, seed, data_root\) is defined"):
        series_setup.start("03_model", {"In": [""]})


@pytest.mark.skipif(sys.platform.startswith("win"), reason="a Windows path is a path there")
@pytest.mark.parametrize("typed", [r"C:\Users\me\data", "C:\new\\data", "data\tmine", "C:/data"])
def test_a_windows_path_or_a_control_character_is_refused_before_any_folder_is_made(typed, no_work, tmp_path):
    """On Linux, r"C:\\Users\\me\\data" became a folder of that name in the repository, 72 MB downloaded into it, and
    "C:\\new\\data" one whose name holds a line break."""
    with pytest.raises(ValueError, match=r"the setting data_root must be None, or a path .* as Linux writes it"):
        series_setup.start("03_model", settings_of("03_model") | {"data_root": typed})
    assert no_work == []


# ---------------------------------------------------------------------------- settings that look right but are not


def test_none_typed_in_quotes_is_refused_naming_it_not_taken_as_a_folder_called_none(no_work):
    """`checkpoint = "None"` (in quotes) is refused, naming the fix: as a path it would be <repository>/None."""
    for text in ("None", "none", "null"):
        with pytest.raises(ValueError, match=rf"the setting checkpoint is the text '{text}', in quotes; for None"):
            series_setup.start("05_training", settings_of("05_training") | {"checkpoint": text})
    assert no_work == []


def test_a_setting_whose_line_is_gone_is_named_before_any_work(no_work):
    """05's `exercise_limit` commented out is named in the set-up, before a NameError in the exercises' data cell."""
    namespace = {k: v for k, v in settings_of("05_training").items() if k != "exercise_limit"}
    with pytest.raises(ValueError, match=r"^the setting exercise_limit is not defined: its line in the settings cell"):
        series_setup.start("05_training", namespace)
    assert no_work == []


@pytest.mark.parametrize(("name", "value"), [("data_root", 2024), ("checkpoint", 2.5)])
def test_a_number_for_a_path_tells_papermill_users_to_pass_it_with_r(name, value, no_work):
    """`-p data_root 2024` is refused as a number, with papermill's -r, which passes it as text (-p would not)."""
    with pytest.raises(ValueError, match=rf"headless run: -r {name} {value} \(-r passes its value as text"):
        series_setup.start("05_training", settings_of("05_training") | {name: value})


def test_a_folder_setting_that_names_a_file_asks_for_its_folder_and_never_to_remove_it(no_work, tmp_path):
    """data_root pointing at a file (mnist.zip) asks for its folder, and never to remove or rename the file."""
    archive = tmp_path / "mnist.zip"
    archive.write_bytes(b"a learner's file")
    for name, stem, typed in [
        ("data_root", "03_model", archive),
        ("data_root", "03_model", archive / "inside"),
        ("work_dir", "08_checkpoints", archive),
    ]:
        with pytest.raises(ValueError) as refused:
            series_setup.start(stem, settings_of(stem) | {name: str(typed)})
        message = str(refused.value)
        assert message.startswith(f"the setting {name} is a folder, and {archive} is a file: give ")
        assert "remove" not in message and "rename" not in message
        if typed == archive:
            assert f"the folder that holds it ({tmp_path})" in message
    assert archive.read_bytes() == b"a learner's file" and no_work == []


def test_the_device_setting_is_auto_by_default_and_still_takes_none_and_a_name(no_work):
    """device is a dropdown of choices (no unquoted `device = cpu` in Colab's form), `auto` by default."""
    best = helpers.get_default_device()
    assert settings_of("05_training")["device"] == "auto"
    for value, expected in [("auto", best), (None, best), ("cpu", torch.device("cpu"))]:
        device = series_setup.start("01_gpu_runtime", settings_of("01_gpu_runtime") | {"device": value})
        assert device == expected


# ---------------------------------------------------------------------------- the Chinese edition's start


def test_a_chinese_start_refuses_a_bad_setting_in_chinese(no_work):
    namespace = settings_of("05_training") | {"exercise_limit": 60_000}
    with pytest.raises(ValueError) as refused:
        series_setup.start("05_training", namespace, lang="zh")
    assert str(refused.value) == (
        "设置项 exercise_limit 必须是一个不小于 1、不大于 50,000 的整数，或者 None，而它是 60000。请在笔记本顶部的"
        "设置项单元格中修改它；无界面运行时也可以传入别的值，写法是 -p exercise_limit VALUE"
    )
    assert no_work == [], "refused before any work, as in English"


def test_a_chinese_start_says_its_run_line_in_chinese(no_work, capsys):
    series_setup.start("03_model", settings_of("03_model") | {"device": "cpu"}, lang="zh")
    said = capsys.readouterr().out
    assert said.startswith("本次运行使用的设备是 cpu（") and "PyTorch 版本为" in said and "This run" not in said, said
    series_setup.start("03_model", settings_of("03_model") | {"device": "cpu"})
    assert capsys.readouterr().out.startswith("This run computes on cpu: "), "English stays as it was"


def test_a_chinese_start_refuses_a_device_that_is_not_here_in_chinese(no_work):
    namespace = settings_of("03_model") | {"device": "cuda:7"}
    with pytest.raises(ValueError, match=r"^设备 'cuda:7'（设置项 device）在这台机器上不可用，可用的有 "):
        series_setup.start("03_model", namespace, lang="zh")
