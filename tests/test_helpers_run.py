"""helpers_run.py: one registry of input pipelines, each giving the batches its name promises; and the lesson's run in
one call, which checks what it was given before any work."""

import io
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Subset

import helpers
import helpers_run


@pytest.fixture(scope="module")
def splits(mnist):
    """A small training split of 700 images (a last batch of 60), and validation and test splits of 300 each."""
    return Subset(mnist, range(700)), Subset(mnist, range(700, 1000)), Subset(mnist, range(1000, 1300))


def _labels(loader):
    return [labels.tolist() for _, labels in loader]


def test_the_registry_names_each_pipeline_for_what_it_is():
    assert list(helpers_run.PIPELINES) == ["as_taught", "seeded", "tuned", "resident"]
    with pytest.raises(ValueError, match="unknown pipeline 'lesson': choose one of 'as_taught', 'seeded', 'tuned'"):
        helpers_run.input_pipeline("lesson")


@pytest.mark.parametrize("name", list(helpers_run.PIPELINES))
def test_every_pipeline_gives_the_lessons_batches_on_the_device(splits, name):
    """Training batches of 128 (the last of 60), validation of 256; float images in [0, 1], class labels."""
    train, val, test = helpers_run.PIPELINES[name](*splits, device=torch.device("cpu"), seed=3)
    assert [len(labels) for labels in _labels(train)] == [128] * 5 + [60]
    assert [len(labels) for labels in _labels(val)] == [256, 44] and len(_labels(test)) == 2
    images, labels = next(iter(train))
    assert images.shape == (128, 1, 28, 28) and images.dtype == torch.float32 and 0 <= images.min() <= images.max() <= 1
    assert labels.dtype == torch.int64 and sorted(sum(_labels(train), [])) == sorted(
        splits[0].dataset.targets[:700].tolist()
    )


def test_the_seeded_pipeline_in_one_process_is_make_loaders(splits):
    """Its batches are helpers.make_loaders', epoch after epoch, with evaluation between."""
    train_set, val_set, _ = splits
    ours, our_val = helpers_run.seeded_loaders(train_set, val_set, device=torch.device("cpu"), seed=5)
    theirs, their_val = helpers.make_loaders(train_set, val_set, device="cpu", seed=5)
    epochs = []
    for _ in range(2):
        epochs.append(_labels(ours))
        assert epochs[-1] == _labels(theirs)
        assert _labels(our_val) == _labels(their_val)
    assert epochs[1] != epochs[0], "each epoch shuffles again: the equality above is of orders that change"
    other_seed, _ = helpers_run.seeded_loaders(train_set, val_set, device=torch.device("cpu"), seed=6)
    assert _labels(other_seed) != epochs[0], "and another seed gives another order"


def test_the_lessons_loaders_as_taught_use_two_workers(splits):
    train, val, _ = helpers_run.taught_loaders(*splits, device=torch.device("cpu"))
    assert isinstance(train.dl, DataLoader) and train.dl.num_workers == 2 and val.dl.num_workers == 2


def test_the_lessons_run_refuses_what_it_cannot_run_before_loading_data(tmp_path, monkeypatch):
    monkeypatch.setattr(helpers_run, "load_mnist", lambda *a, **k: pytest.fail("data loaded before the checks"))
    with pytest.raises(ValueError, match="give one learning rate per phase: 2 epoch counts but 1 learning rates"):
        helpers_run.train_lesson(tmp_path, "cpu", epochs=(1, 1), lrs=(0.5,))
    with pytest.raises(ValueError, match="unknown pipeline 'fast'"):
        helpers_run.train_lesson(tmp_path, "cpu", pipeline="fast")
    with pytest.raises(FileNotFoundError, match="does not exist; create it"):
        helpers_run.train_lesson(tmp_path, "cpu", save=tmp_path / "missing" / "w.pt")


def test_the_lessons_run_trains_tests_and_saves(data_root, tmp_path, capsys):
    result = helpers_run.train_lesson(
        data_root, "cpu", epochs=(1,), lrs=(0.5,), pipeline="resident", limit=1000, save=tmp_path / "w.pt"
    )
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
        helpers_run.train_lesson(data_root, "cpu", epochs=(1,), lrs=(0.5,), pipeline="resident", limit=256, save=save)
    assert save.read_bytes() == b"the weights of an earlier run"
    assert [path.name for path in tmp_path.iterdir()] == ["w.pt"], "no half-written file beside it"
