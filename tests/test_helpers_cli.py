"""helpers_cli.py, the command line: its dry runs do what they say; every bad option or output path is refused with
one clear line before any work."""

import json
import os
import re
import subprocess
import sys

import pytest

import helpers
import helpers_cli
import helpers_data
import helpers_ddp
import helpers_run
import helpers_speed

REPO = helpers.Path(helpers.__file__).resolve().parent


ENV = {k: v for k, v in os.environ.items() if k != "HELPERS_DEBUG"} | {"HELPERS_PROGRESS": "0", "OMP_NUM_THREADS": "1"}


# ---------------------------------------------------------------------------- what the commands do


def test_command_line_dry_runs(data_root, tmp_path, capsys):
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "bench", "--out", str(tmp_path / "b")]) == 0
    saved = json.loads((tmp_path / "b" / "bench.json").read_text())
    assert [r["pipeline"] for r in saved["pipelines"]][:2] == ["as_taught", "resident"]
    assert [r["config"] for r in saved["speed"]] == ["float32"], "a dry run compiles nothing, converts nothing"
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "speedrun"]) == 0
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "speedrun", "--target", "0.999"]) == 0


def test_the_command_line_is_a_parser_and_a_table_of_commands(capsys):
    """Read from what a person sees: the commands --help lists are those the table runs, and each parses."""
    listed = re.search(r"\{([\w,-]+)\}", helpers_cli.parser().format_help()).group(1).split(",")
    assert set(listed) == set(helpers_cli.COMMANDS), "every command the parser knows has its function"
    assert all(helpers_cli.parser().parse_args([command]).command == command for command in listed)
    with pytest.raises(SystemExit) as exit_code:
        helpers_cli.parser().parse_args(["fly"])
    assert exit_code.value.code == 2 and "invalid choice: fly" in capsys.readouterr().err.replace("'", "")


# ---------------------------------------------------------------------------- refused before any work


@pytest.fixture
def no_work(monkeypatch):
    """Loading data, training or benchmarking fails the test: the checks must come first."""

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the arguments were checked")

    names = ("load_mnist", "ensure_mnist", "benchmark_pipelines", "benchmark_ddp", "speedrun")
    for module in (helpers, helpers_data, helpers_run, helpers_speed, helpers_ddp, helpers_cli):
        for name in names:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, forbidden)


@pytest.mark.parametrize(
    ("save", "error", "match"),
    [
        ("missing/w.pt", FileNotFoundError, "the folder .*missing does not exist; create it"),
        ("a_file/w.pt", NotADirectoryError, "a_file is a file, not a folder"),
        (".", ValueError, "it is a folder; give a file path"),
    ],
)
def test_a_save_path_that_cannot_be_written_fails_before_any_training(tmp_path, no_work, save, error, match):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(error, match=match):  # before it loads any data
        helpers_run.train_lesson(device="cpu", save=tmp_path / save)


def test_every_output_path_is_checked_first(tmp_path, no_work, monkeypatch):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(NotADirectoryError, match="a_file is a file, not a folder"):
        helpers_cli.main(["--dry-run", "bench", "--out", str(tmp_path / "a_file" / "bench")])
    monkeypatch.setattr(helpers.os, "access", lambda path, mode: False)  # as for a user without the right
    with pytest.raises(PermissionError, match="is not writable; give a path you can write to"):
        helpers_run.train_lesson(device="cpu", save=tmp_path / "w.pt")


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["bench", "--epochs", "0"], "--epochs must be a number of at least 1, got 0"),
        (["bench", "--limit", "0"], "--limit must be a number of at least 1, got 0"),
        (["bench", "--ddp", "--nprocs", "1"], "--nprocs must be at least 2 and divide a batch of 128, got 1"),
        (["bench", "--ddp", "--nprocs", "3"], "--nprocs must be at least 2 and divide a batch of 128, got 3"),
        (["speedrun", "--epochs", "0"], "--epochs must be a number of at least 1, got 0"),
        (["speedrun", "--batch-size", "0"], "--batch-size must be a number of at least 1, got 0"),
        (["speedrun", "--target", "1.5"], "--target is a test accuracy from 0 to 1"),
        (["speedrun", "--momentum", "nan"], "--momentum must be a number of at least 0, got nan"),  # not "diverged"
        (["--data", "", "speedrun"], "--data must be a folder's path as this system writes it"),  # not 72 MB in ./
        (["--data", "C:\\data", "speedrun"], "--data must be a folder's path"),  # not a folder named C:\data
    ],
)
def test_options_are_checked_before_the_dry_run_replaces_them(no_work, argv, match):
    with pytest.raises(ValueError, match=match):
        helpers_cli.main(["--dry-run", *argv])


@pytest.mark.parametrize("seed", ["99999999999999999999", "-1"])
def test_a_seed_out_of_range_is_refused_on_the_command_line(no_work, seed):
    with pytest.raises(ValueError, match=r"--seed must be a whole number from 0 to 2\*\*63 - 1"):
        helpers_cli.main(["--seed", seed, "speedrun"])


def test_a_ddp_benchmark_of_processes_that_cannot_share_a_batch_is_one_line_before_any_process(tmp_path):
    command = [sys.executable, str(REPO / "helpers_cli.py"), "bench", "--ddp", "--nprocs", "3", "--dry-run"]
    done = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: --nprocs must be at least 2 and divide a batch of 128, got 3\n"


# ---------------------------------------------------------------------------- errors, as a person at a shell sees them


def test_cli_prints_one_line_and_exits_2(monkeypatch, capsys):
    def fails(error):
        def main(argv):
            raise error

        return main

    monkeypatch.setattr(helpers_cli, "main", fails(helpers_data.MnistUnavailable("MNIST is not here\nfix: get it")))
    assert helpers_cli.cli(["speedrun"]) == 2
    assert capsys.readouterr().err == "error: MNIST is not here\nfix: get it\n", "its own lines, no traceback"
    monkeypatch.setattr(helpers_cli, "main", fails(helpers.TrainingInterrupted("training interrupted after 1", [])))
    assert helpers_cli.cli(["speedrun"]) == 130
    assert capsys.readouterr().err == "interrupted: training interrupted after 1\n"
    monkeypatch.setattr(helpers_cli, "main", fails(ValueError("bad")))
    with pytest.raises(ValueError, match="bad"):
        helpers_cli.cli(["--debug", "speedrun"])
    monkeypatch.setenv("HELPERS_DEBUG", "1")
    with pytest.raises(ValueError, match="bad"):
        helpers_cli.cli(["speedrun"])
    monkeypatch.setattr(helpers_cli, "main", fails(RuntimeError("a bug")))  # not an expected error: its traceback
    with pytest.raises(RuntimeError, match="a bug"):
        helpers_cli.cli(["speedrun"])


def test_an_error_from_the_shell_is_one_line_and_debug_shows_the_traceback(tmp_path):
    command = [sys.executable, str(REPO / "helpers_cli.py"), "--device", "garbage", "--dry-run", "speedrun"]
    done = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("error: 'garbage' is not a device name") and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    command.insert(2, "--debug")
    debug = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "'garbage' is not a device name" in debug.stderr


def test_dry_run_goes_before_or_after_the_command(monkeypatch):
    seen = []
    monkeypatch.setattr(helpers_cli, "speedrun", lambda **kw: seen.append(kw["epochs"]) or {"reached": True})
    for argv in (["--dry-run", "speedrun"], ["speedrun", "--dry-run"], ["speedrun"]):
        assert helpers_cli.main(argv) == 0
    assert seen == [1, 1, 6], "a dry run trains one epoch, wherever --dry-run stands"


def test_a_save_path_through_a_dangling_link_fails_before_any_training(tmp_path, no_work):
    """--save onto a link into a folder that is not there trained, then lost the weights in torch.save."""
    (tmp_path / "link.pt").symlink_to(tmp_path / "unmounted" / "model.pt")
    with pytest.raises(FileNotFoundError, match=r"link\.pt \(a link to .*model\.pt\): the folder .*unmounted"):
        helpers_run.train_lesson(device="cpu", save=tmp_path / "link.pt")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_save_path_where_no_file_can_be_made_fails_before_any_training(no_work):
    """/proc passes os.access for root, but no file can be made there: torch.save failed after training."""
    with pytest.raises(PermissionError, match=r"no file can be made in /proc"):
        helpers_run.train_lesson(device="cpu", save="/proc/x.pt")
