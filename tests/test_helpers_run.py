"""helpers_run.py: the lesson's run in one call, which checks what it was given before any work."""

import io
from pathlib import Path

import pytest
import torch

import helpers
import helpers_run


def test_the_lessons_run_refuses_what_it_cannot_run_before_loading_data(tmp_path, monkeypatch):
    monkeypatch.setattr(helpers_run, "load_mnist", lambda *a, **k: pytest.fail("data loaded before the checks"))
    with pytest.raises(ValueError, match="give one learning rate per phase: 2 epoch counts but 1 learning rates"):
        helpers_run.train_lesson(tmp_path, "cpu", epochs=(1, 1), lrs=(0.5,))
    with pytest.raises(FileNotFoundError, match="does not exist; create it"):
        helpers_run.train_lesson(tmp_path, "cpu", save=tmp_path / "missing" / "w.pt")


def test_the_lessons_run_trains_tests_and_saves(data_root, tmp_path, capsys):
    result = helpers_run.train_lesson(data_root, "cpu", epochs=(1,), lrs=(0.5,), limit=1000, save=tmp_path / "w.pt")
    out = capsys.readouterr().out
    assert len(result["history"]) == 2 and "test: loss" in out and f"accuracy {result['test_acc']:.4f}" in out
    assert result["test_acc"] > result["history"][0]["val_acc"] + 0.1, "8 steps from chance: it learns"
    saved = helpers.MnistModel()
    saved.load_state_dict(torch.load(tmp_path / "w.pt", weights_only=True))
    assert all(torch.equal(a, b) for a, b in zip(saved.state_dict().values(), result["model"].state_dict().values()))


def test_the_lessons_run_saves_atomically_so_an_interrupted_save_leaves_the_old_file(data_root, tmp_path, monkeypatch):
    """torch.save interrupted halfway (Ctrl-C, a full disk): the file at `save` is the one from before, whole."""
    save = tmp_path / "w.pt"
    save.write_bytes(b"the weights of an earlier run")
    real_save = torch.save

    def interrupted(obj, f, *args, **kwargs):  # writes half of what it would, where it was told to, and stops
        whole = io.BytesIO()
        real_save(obj, whole, *args, **kwargs)
        half = whole.getvalue()[: len(whole.getvalue()) // 2]
        Path(f).write_bytes(half) if isinstance(f, (str, Path)) else f.write(half)
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        helpers_run.train_lesson(data_root, "cpu", epochs=(1,), lrs=(0.5,), limit=256, save=save)
    assert save.read_bytes() == b"the weights of an earlier run"
    assert [path.name for path in tmp_path.iterdir()] == ["w.pt"], "no half-written file beside it"
