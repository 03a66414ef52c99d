"""helpers.py, section 5 and what fit does with a checkpoint (notebook 08): checkpoints that lose nothing, resume bit
for bit, refuse bad files with the reason, and survive a full disk or a crash mid-write."""

import copy
import errno
import os
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from conftest import cpu_loader, random_images, same_weights, small_loaders
from torch.utils.data import Subset

import helpers
import helpers_data

# ---------------------------------------------------------------------------- save_checkpoint and load_checkpoint


def test_round_trip(tmp_path):
    torch.manual_seed(0)
    model = helpers.MnistModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.training_step((torch.rand(4, 1, 28, 28), torch.tensor([1, 2, 3, 4]))).backward()
    opt.step()
    history = [{"val_loss": 1.0, "val_acc": 0.5}]
    path = helpers.save_checkpoint(
        tmp_path / "a.ckpt", model, opt, epoch=3, history=history, seed=9, hparams={"lr": 0.1}
    )
    other = helpers.MnistModel()
    other_opt = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
    state = helpers.load_checkpoint(path, other, other_opt)
    assert same_weights(model, other)
    assert (state["epoch"], state["history"], state["seed"], state["hparams"]) == (3, history, 9, {"lr": 0.1})
    momentum = [s["momentum_buffer"] for s in other_opt.state.values()]
    assert momentum and all(torch.equal(a, b["momentum_buffer"]) for a, b in zip(momentum, opt.state.values()))
    assert set(state["rng"]) == {"torch", "cuda", "python", "numpy", "loader"}


def test_crash_mid_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    model = helpers.MnistModel()
    helpers.save_checkpoint(path, model, epoch=1)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk pulled out")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk pulled out"):
        helpers.save_checkpoint(path, helpers.MnistModel(), epoch=2)
    assert path.read_bytes() == before
    assert helpers.load_checkpoint(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"], "no temporary file left behind"


def test_truncated_file(tmp_path):
    """A truncated checkpoint is refused with what happened and what to do."""
    path = helpers.save_checkpoint(tmp_path / "t.ckpt", helpers.MnistModel())
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ValueError, match=r"not a readable checkpoint \(truncated.*\. Delete it and save it again"):
        helpers.load_checkpoint(path, helpers.MnistModel())


def test_not_a_checkpoint(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        helpers.load_checkpoint(text)
    plain = tmp_path / "weights.pth"
    torch.save(helpers.MnistModel().state_dict(), plain)  # the lesson's file: weights only
    with pytest.raises(ValueError, match="weights alone .*not a checkpoint with its history"):
        helpers.load_checkpoint(plain)
    other = tmp_path / "other.pt"
    torch.save({"epoch": 3, "notes": "mine"}, other)  # a dict of someone else's making
    with pytest.raises(ValueError, match="not a checkpoint written by save_checkpoint"):
        helpers.load_checkpoint(other)


def test_wrong_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        helpers.load_checkpoint(tmp_path / "missing.ckpt", helpers.MnistModel())


def test_other_model_shape_names_keys_and_shapes(tmp_path):
    path = helpers.save_checkpoint(tmp_path / "m.ckpt", helpers.MnistModel(hidden_size=64))
    with pytest.raises(ValueError) as err:
        helpers.load_checkpoint(path, helpers.MnistModel(hidden_size=32))
    assert "linear1.weight: checkpoint [64, 784] vs model [32, 784]" in str(err.value)
    with pytest.raises(ValueError, match=r"missing keys \['weight'\].*unexpected keys"):
        helpers.load_checkpoint(path, torch.nn.Linear(2, 2, bias=False))


def test_a_checkpoint_missing_keys_is_named_incomplete(tmp_path):
    path = tmp_path / "c.ckpt"
    torch.save({"format": helpers.CHECKPOINT_FORMAT, "model": helpers.MnistModel().state_dict()}, path)
    with pytest.raises(ValueError, match="incomplete checkpoint: it lacks optimizer, epoch, history"):
        helpers.load_checkpoint(path, helpers.MnistModel())


def test_an_optimizer_that_does_not_fit_loads_nothing(tmp_path):
    model = helpers.MnistModel()
    adam = torch.optim.Adam(model.parameters())
    model.training_step(random_images(8)).backward()
    adam.step()
    helpers.save_checkpoint(tmp_path / "adam.ckpt", model, adam, epoch=1)
    other = helpers.MnistModel()
    start = copy.deepcopy(other)
    sgd = torch.optim.SGD(other.parameters(), 0.1)
    sgd_before = copy.deepcopy(sgd.state_dict())
    with pytest.raises(ValueError, match="holds the state of Adam, which does not fit this SGD"):
        helpers.load_checkpoint(tmp_path / "adam.ckpt", other, sgd)
    assert same_weights(other, start), "the model's weights are untouched"
    assert sgd.state_dict() == sgd_before


def _failing_open(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return fail


def test_a_read_only_checkpoint_folder_names_the_checkpoint_not_a_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setattr(helpers_data, "open", _failing_open(errno.EACCES), raising=False)
    with pytest.raises(OSError) as info:
        helpers.save_checkpoint(tmp_path / "run.ckpt", helpers.MnistModel())
    message = str(info.value)
    assert "cannot write" in message and "run.ckpt: Permission denied" in message and ".tmp-" not in message
    assert "writable" in message


@pytest.mark.cuda
def test_cuda_random_state_is_saved_and_restored(tmp_path):
    torch.cuda.manual_seed_all(11)
    path = helpers.save_checkpoint(tmp_path / "c.ckpt", helpers.MnistModel())
    expected = torch.rand(5, device="cuda")
    state = helpers.load_checkpoint(path)
    assert state["rng"]["cuda"] and all(s.device.type == "cpu" for s in state["rng"]["cuda"])
    torch.cuda.manual_seed_all(99)
    helpers._set_rng_state(state["rng"], None)
    assert torch.equal(torch.rand(5, device="cuda"), expected)


def test_numpy_random_state_is_saved_and_restored(tmp_path):
    np.random.seed(5)
    path = helpers.save_checkpoint(tmp_path / "c.ckpt", helpers.MnistModel())
    expected = np.random.rand(3)
    np.random.seed(6)
    helpers._set_rng_state(helpers.load_checkpoint(path)["rng"], None)
    assert np.array_equal(np.random.rand(3), expected)


def test_resuming_reads_the_checkpoint_once(tmp_path, monkeypatch):
    train, val = small_loaders()
    path = tmp_path / "run.ckpt"
    helpers.fit(1, 0.1, helpers.MnistModel(), train, val, checkpoint_path=path, verbose=False)
    reads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: reads.append(a[0]) or real_load(*a, **k))
    helpers.fit(2, 0.1, helpers.MnistModel(), train, val, checkpoint_path=path, verbose=False)
    assert reads == [path]


def test_the_weights_fit_keeps_for_an_error_are_a_copy_in_the_cpus_memory():
    model = helpers.MnistModel().to(helpers.get_default_device())
    kept = helpers._weights_on_cpu(model)
    with torch.no_grad():
        model.linear1.weight.add_(1)
    assert all(t.device.type == "cpu" for t in kept.values())
    assert not torch.equal(kept["linear1.weight"], model.linear1.weight.cpu())


# ---------------------------------------------- fit with a checkpoint: resume, one fit call per checkpoint, a full disk


class StopAfter:
    """Raises KeyboardInterrupt after `steps` training-mode forward passes (a pressed stop button)."""

    def __init__(self, model, steps):
        self.calls = 0
        self.steps = steps
        self.handle = model.register_forward_hook(self)

    def __call__(self, module, args, output):
        self.calls += module.training
        if self.calls == self.steps:
            self.handle.remove()
            raise KeyboardInterrupt


def _fresh(train_set, device_resident):
    helpers.seed_everything(3)
    model = helpers.MnistModel()
    if device_resident:
        loader = helpers.DeviceResidentLoader.from_dataset(train_set, 64, shuffle=True, device="cpu", seed=5)
    else:  # a DataLoader with a persistent worker: its shuffling state must survive the restart too
        loader, _ = helpers.make_loaders(
            train_set, train_set, batch_size=64, seed=5, num_workers=1, persistent_workers=True
        )
    return model, loader


def _momentum(params, lr):
    return torch.optim.SGD(params, lr, momentum=0.9)


@pytest.mark.parametrize("device_resident", [True, False])
def test_interrupt_and_resume_equals_uninterrupted_bit_for_bit(mnist, tmp_path, device_resident, capsys):
    train_set = Subset(mnist, range(1000))
    val = helpers.DeviceResidentLoader.from_dataset(Subset(mnist, range(1000, 1300)), 256, device="cpu")
    reference, loader = _fresh(train_set, device_resident)
    ref_history = helpers.fit(3, 0.3, reference, loader, val, opt_func=_momentum, verbose=False)

    path = tmp_path / "run.ckpt"
    model, loader = _fresh(train_set, device_resident)
    StopAfter(model, steps=len(loader) + 5)  # in the middle of the second epoch
    with pytest.raises(helpers.TrainingInterrupted) as info:
        helpers.fit(3, 0.3, model, loader, val, opt_func=_momentum, checkpoint_path=path, verbose=False)
    assert len(info.value.history) == 1 and helpers.load_checkpoint(path)["epoch"] == 1
    assert f"saved in {helpers_data.display_path(path)}" in capsys.readouterr().out  # short, from any working folder
    copied = shutil.copy(path, tmp_path / "copied.ckpt")

    resumed, fresh_loader = _fresh(train_set, device_resident)  # as in a new session
    history = helpers.fit(3, 0.3, resumed, fresh_loader, val, opt_func=_momentum, checkpoint_path=path, verbose=False)
    assert "Resuming from" in capsys.readouterr().out
    assert same_weights(reference, resumed)
    assert [h["val_acc"] for h in history] == [h["val_acc"] for h in ref_history]
    assert [h["train_loss"] for h in history] == [h["train_loss"] for h in ref_history]

    again, _ = _fresh(train_set, device_resident)  # in the same session, with the loader that was interrupted
    helpers.fit(3, 0.3, again, loader, val, opt_func=_momentum, checkpoint_path=copied, verbose=False)
    assert same_weights(reference, again)


def test_a_checkpoint_belongs_to_one_fit_call(mnist, tmp_path, capsys):
    """The lesson's two phases on one path: the second is refused with the reason, not silently skipped."""
    train = helpers.DeviceResidentLoader.from_dataset(Subset(mnist, range(256)), 64, shuffle=True, device="cpu")
    path = tmp_path / "r.ckpt"
    helpers.fit(1, 0.1, helpers.MnistModel(), train, train, checkpoint_path=path, verbose=False)
    capsys.readouterr()
    model = helpers.MnistModel()
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError, match=r"holds 1 epochs of fit\(1, 0.1\).*this call is fit\(2, 0.05\).*its own"):
        helpers.fit(2, 0.05, model, train, train, checkpoint_path=path, verbose=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()), "nothing loaded"
    # the same call with more epochs resumes
    history = helpers.fit(2, 0.1, helpers.MnistModel(), train, train, checkpoint_path=path, verbose=False)
    assert "1 of 2 epochs already done" in capsys.readouterr().out
    assert len(history) == 2
    # a finished run is not trained again
    done = helpers.fit(2, 0.1, helpers.MnistModel(), train, train, checkpoint_path=path, verbose=False)
    assert done == history
    with pytest.raises(ValueError, match=r"holds 2 epochs of fit\(2, 0.1\).*this call is fit\(1, 0.1\)"):
        helpers.fit(1, 0.1, helpers.MnistModel(), train, train, checkpoint_path=path, verbose=False)
    with pytest.raises(ValueError, match="with Adam. A checkpoint belongs to one fit call"):
        helpers.fit(3, 0.1, helpers.MnistModel(), train, train, torch.optim.Adam, checkpoint_path=path)


def test_resuming_names_the_checkpoint_by_a_short_path(tmp_path, monkeypatch, capsys):
    """As the interruption message does: a notebook's output shows no machine path."""
    monkeypatch.chdir(tmp_path)
    train = cpu_loader(*random_images(128))
    helpers.fit(1, 0.1, helpers.MnistModel(), train, train, checkpoint_path=tmp_path / "run.ckpt", verbose=False)
    helpers.fit(2, 0.1, helpers.MnistModel(), train, train, checkpoint_path=tmp_path / "run.ckpt", verbose=False)
    assert "Resuming from run.ckpt: 1 of 2 epochs already done" in capsys.readouterr().out


def test_a_full_disk_at_a_save_keeps_the_completed_epochs(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    train = cpu_loader(*random_images(128))
    model = helpers.MnistModel()
    helpers.fit(1, 0.1, model, train, train, checkpoint_path=path, verbose=False)
    monkeypatch.setattr(helpers_data, "open", _failing_open(errno.ENOSPC), raising=False)
    with pytest.raises(helpers.CheckpointNotSaved, match=r"epoch 1 finished.*No space left.*free some disk") as info:
        helpers.fit(3, 0.1, model, train, train, checkpoint_path=path, verbose=False)
    assert len(info.value.history) == 2 and helpers.load_checkpoint(path)["epoch"] == 1


def test_weights_saved_alone_say_how_to_load_them(tmp_path):
    model = helpers.MnistModel()
    torch.save(model.state_dict(), tmp_path / "w.pt")  # as the lesson saves its weights
    with pytest.raises(
        ValueError, match=r"weights alone .*model.load_state_dict\(torch.load\(path, weights_only=True\)\)"
    ):
        helpers.load_checkpoint(tmp_path / "w.pt", helpers.MnistModel())


def test_a_checkpoint_of_another_hidden_size_names_the_size_to_set(tmp_path):
    helpers.save_checkpoint(tmp_path / "c.ckpt", helpers.MnistModel(784, 64, 10), hparams={"hidden_size": 64})
    with pytest.raises(
        ValueError, match=r"linear1.weight: checkpoint \[64, 784\] vs model \[32, 784\].*hidden_size = 64"
    ):
        helpers.load_checkpoint(tmp_path / "c.ckpt", helpers.MnistModel())


def test_a_folder_given_as_the_checkpoint_says_to_give_a_file(tmp_path):
    """A folder was 'no checkpoint at ...: train first to create it'."""
    train, val = cpu_loader(*random_images(128)), cpu_loader(*random_images(64))
    folder = r"is a folder, not a checkpoint: give the file's path, such as .*run\.ckpt"
    with pytest.raises(IsADirectoryError, match=folder):
        helpers.fit(1, 0.5, helpers.MnistModel(), train, val, checkpoint_path=tmp_path, verbose=False)


def test_a_checkpoint_behind_a_symbolic_link_is_written_through_it(tmp_path):
    """A link to a checkpoint on another disk (Colab's Drive) was replaced by a file; the linked one stayed old."""
    (tmp_path / "drive").mkdir()
    (tmp_path / "here").mkdir()
    link = tmp_path / "here" / "run.ckpt"
    link.symlink_to(tmp_path / "drive" / "run.ckpt")
    train, val = cpu_loader(*random_images(128)), cpu_loader(*random_images(64))
    helpers.fit(2, 0.5, helpers.MnistModel(), train, val, checkpoint_path=link, verbose=False)
    assert link.is_symlink() and helpers.load_checkpoint(tmp_path / "drive" / "run.ckpt")["epoch"] == 2
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["run.ckpt"], "nothing left beside the link"


# ---------------------------------------------- files that are not the lesson's checkpoints


def test_a_whole_pickled_model_is_told_to_save_its_state_dict(tmp_path):
    """torch.save(model, path) given as a checkpoint: PyTorch's page of advice ends in weights_only=False (unsafe)."""
    path = tmp_path / "model.pt"
    torch.save(helpers.MnistModel(), path)
    with pytest.raises(ValueError) as raised:
        helpers.load_checkpoint(path, helpers.MnistModel())
    message = str(raised.value)
    assert "If it holds a whole model saved with torch.save(model, ...), save model.state_dict() instead" in message
    assert "weights_only=False" not in message and len(message.splitlines()) == 1


def test_a_checkpoint_of_a_ddp_model_says_how_to_strip_module(tmp_path):
    model = helpers.MnistModel()
    helpers.save_checkpoint(tmp_path / "ddp.ckpt", model)
    state = torch.load(tmp_path / "ddp.ckpt", weights_only=True)
    state["model"] = {f"module.{k}": v for k, v in state["model"].items()}  # as DistributedDataParallel names them
    torch.save(state, tmp_path / "ddp.ckpt")
    with pytest.raises(ValueError, match=r"its keys start with 'module.': it was saved from a model wrapped in Dist"):
        helpers.load_checkpoint(tmp_path / "ddp.ckpt", helpers.MnistModel())


# ---------------------------------------------------------------------------- files passed between notebooks

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _cells(stem: str, *ids: str) -> str:
    """The source of the code cells `ids` of the English notebook `stem`, in order."""
    cells = {c.get("id"): c for c in nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4).cells}
    return "\n".join(cells[i].source for i in ids)


def _run_06s_loading_cell(checkpoint: Path) -> tuple[list, list]:
    """06's cell that loads 05's model and history, run on `checkpoint`: (the history it keeps, the fits it ran)."""
    fits = []
    namespace = {
        "helpers": helpers, "CHECKPOINT": checkpoint, "device": "cpu", "input_size": 784, "hidden_size": 32,
        "num_classes": 10, "train_loader": None, "val_loader": None, "to_device": helpers.to_device,
        "MnistModel": lambda in_size, hidden_size, out_size: helpers.MnistModel(in_size, hidden_size, out_size),
        "evaluate": lambda model, loader: {"val_loss": 2.3, "val_acc": 0.1},
        "fit": lambda epochs, lr, *args: fits.append((epochs, lr)) or [{"val_loss": 0.1, "val_acc": 0.97}] * epochs,
    }  # fmt: skip
    exec(_cells("06_plots", "c06-32"), namespace)
    return namespace["history"], fits


def test_a_history_without_the_untrained_model_is_not_read_by_06_as_05s(tmp_path, capsys):
    """A checkpoint says whether its history starts with the untrained model, and 06 reads only 05's kind: a
    history of helpers.fit, read as 05's, would plot from a trained epoch under the wrong epoch count."""
    train, val = cpu_loader(*random_images(128), shuffle=True), cpu_loader(*random_images(64, seed=1))
    path = tmp_path / "fit.ckpt"
    helpers.fit(3, 0.5, helpers.MnistModel(), train, val, checkpoint_path=path, progress=False, verbose=False)
    assert helpers.load_checkpoint(path)["untrained_first"] is False
    history, fits = _run_06s_loading_cell(path)
    said = capsys.readouterr().out
    assert "(2 epochs)" not in said and "the history has no untrained epoch 0" in said
    assert fits == [(5, 0.5), (5, 0.1)] and len(history) == 11, "trained again, as 05 does, from epoch 0"

    lesson = tmp_path / "lesson.ckpt"  # as 05 saves it
    history_05 = [{"val_loss": 2.3, "val_acc": 0.1}] + [{"val_loss": 0.2, "val_acc": 0.96}] * 10
    helpers.save_checkpoint(lesson, helpers.MnistModel(), history=history_05, untrained_first=True)
    history, fits = _run_06s_loading_cell(lesson)
    assert fits == [] and history == history_05 and "its history (10 epochs)" in capsys.readouterr().out


def test_06_saves_the_lessons_file_in_its_own_folder_and_keeps_the_learners(tmp_path, monkeypatch):
    """06 saves the lesson's `mnist-feedforward.pth` in its own folder: a file of that name beside the notebook (a
    learner's, from the original lesson) is left as it was."""
    beside, work = tmp_path / "notebooks", tmp_path / "runs" / "plots"
    beside.mkdir()
    work.mkdir(parents=True)
    (beside / "mnist-feedforward.pth").write_bytes(b"the learner's own weights")
    monkeypatch.chdir(beside)
    model = helpers.MnistModel()
    cells = nbformat.read(NOTEBOOKS / "06_plots.ipynb", as_version=4).cells
    ids = [c.get("id") for c in cells]
    between = cells[ids.index("c06-20") + 1 : ids.index("c06-21") + 1]  # from the text to the lesson's save
    exec("\n".join(c.source for c in between if c.cell_type == "code"), {"os": os, "torch": torch, "model": model,
                                                                          "WORK": work})  # fmt: skip
    assert (beside / "mnist-feedforward.pth").read_bytes() == b"the learner's own weights"
    saved = torch.load(work / "mnist-feedforward.pth", weights_only=True)
    assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items())


def test_a_save_that_fails_halfway_leaves_the_old_checkpoint_whole_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    path.write_bytes(b"the checkpoint of an earlier run")
    real_fsync = helpers_data.os.fsync

    def disk_full(fd):
        real_fsync(fd)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(helpers_data.os, "fsync", disk_full)
    with pytest.raises(OSError, match="cannot write .*run.ckpt: No space left on device; free some disk space"):
        helpers.save_checkpoint(path, helpers.MnistModel())
    assert path.read_bytes() == b"the checkpoint of an earlier run"
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"], "no half-written file beside it"
