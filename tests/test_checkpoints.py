"""Checkpoints that lose nothing, resume bit for bit, and refuse bad files; evaluation in depth."""

import copy
import os

import matplotlib.figure
import pytest
import torch
from torch.utils.data import Subset

import helpers


def _weights_equal(a, b):
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_round_trip(tmp_path):
    torch.manual_seed(0)
    model = helpers.MnistModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.training_step((torch.rand(4, 1, 28, 28), torch.tensor([1, 2, 3, 4])))["loss"].backward()
    opt.step()
    history = [{"val_loss": 1.0, "val_acc": 0.5}]
    path = helpers.save_checkpoint(
        tmp_path / "a.ckpt", model, opt, epoch=3, history=history, seed=9, hparams={"lr": 0.1}
    )
    other = helpers.MnistModel()
    other_opt = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
    state = helpers.load_checkpoint(path, other, other_opt)
    assert _weights_equal(model, other)
    assert (state["epoch"], state["history"], state["seed"], state["hparams"]) == (3, history, 9, {"lr": 0.1})
    momentum = [s["momentum_buffer"] for s in other_opt.state.values()]
    assert momentum and all(torch.equal(a, b["momentum_buffer"]) for a, b in zip(momentum, opt.state.values()))
    assert set(state["rng"]) == {"torch", "cuda", "python", "loader"}


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
    path = helpers.save_checkpoint(tmp_path / "t.ckpt", helpers.MnistModel())
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        helpers.load_checkpoint(path, helpers.MnistModel())


def test_not_a_checkpoint(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        helpers.load_checkpoint(text)
    plain = tmp_path / "weights.pth"
    torch.save(helpers.MnistModel().state_dict(), plain)  # the lesson's file: weights only
    with pytest.raises(ValueError, match="not a checkpoint written by save_checkpoint"):
        helpers.load_checkpoint(plain)


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
    assert f"saved in {path}" in capsys.readouterr().out

    resumed, loader = _fresh(train_set, device_resident)  # as in a new session
    history = helpers.fit(3, 0.3, resumed, loader, val, opt_func=_momentum, checkpoint_path=path, verbose=False)
    assert "Resuming from" in capsys.readouterr().out
    assert _weights_equal(reference, resumed)
    assert [h["val_acc"] for h in history] == [h["val_acc"] for h in ref_history]
    assert [h["train_loss"] for h in history] == [h["train_loss"] for h in ref_history]


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


def _momentum(params, lr):
    return torch.optim.SGD(params, lr, momentum=0.9)


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


# ---------------------------------------------------------------------------- evaluation in depth


def test_confusion_matrix_and_per_class_accuracy():
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    preds = torch.tensor([0, 1, 1, 1, 0, 2])
    cm = helpers.confusion_matrix(labels, preds, num_classes=3)
    assert cm.tolist() == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]
    assert helpers.per_class_accuracy(cm).tolist() == pytest.approx([0.5, 2 / 3, 1.0])
    with pytest.raises(ValueError, match="0..2"):
        helpers.confusion_matrix(torch.tensor([3]), torch.tensor([0]), num_classes=3)
    with pytest.raises(ValueError, match="one length"):
        helpers.confusion_matrix(labels, preds[:2])


def test_predictions_mistakes_and_pictures(mnist_test):
    torch.manual_seed(0)
    model = helpers.MnistModel()
    subset = Subset(mnist_test, range(300))
    loader = helpers.DeviceResidentLoader.from_dataset(subset, 128, device="cpu")
    preds = helpers.predict_loader(model, loader)
    assert preds["labels"].tolist() == [mnist_test[i][1] for i in range(300)]
    assert preds["probs"].shape == (300, 10) and torch.allclose(preds["probs"].sum(1), torch.ones(300))
    assert torch.equal(preds["preds"], preds["probs"].argmax(1))
    worst = helpers.most_confident_mistakes(preds, k=5)
    conf = preds["probs"][worst, preds["preds"][worst]]
    assert len(worst) == 5 and (preds["preds"][worst] != preds["labels"][worst]).all()
    assert conf.tolist() == sorted(conf.tolist(), reverse=True)
    wrong = (preds["preds"] != preds["labels"]).nonzero().flatten()
    assert conf[0] == preds["probs"][wrong, preds["preds"][wrong]].max()
    cm = helpers.confusion_matrix(preds["labels"], preds["preds"])
    fig = helpers.plot_confusion_matrix(cm)
    assert isinstance(fig, matplotlib.figure.Figure)
    ax = fig.axes[0]
    assert ax.get_title() == "Confusion matrix" and ax.get_xlabel() == "predicted label" and len(ax.texts) == 100
    grid = helpers.show_mistakes(subset, preds, worst)
    i = int(worst[0])
    assert grid.axes[0].get_title().startswith(f"{preds['labels'][i]} / {preds['preds'][i]}")
    with pytest.raises(ValueError, match="empty loader"):
        helpers.predict_loader(model, [])
    with pytest.raises(ValueError, match="no mistakes"):
        helpers.show_mistakes(subset, preds, [])


def test_show_source_prints_real_source(capsys):
    helpers.show_source(helpers.accuracy)
    assert "def accuracy(outputs" in capsys.readouterr().out
