"""Devices, the model, evaluate and fit (with their bad inputs), plots and predictions."""

import collections
import copy
import random
import re

import matplotlib.figure
import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Subset, TensorDataset

import helpers

# ---------------------------------------------------------------------------- devices


def test_default_device_is_the_accelerator_if_any_and_prefer_overrides(monkeypatch):
    present = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    assert helpers.get_default_device() == (present or torch.device("cpu"))
    assert helpers.get_default_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("HELPERS_DEVICE", "cpu")
    assert helpers.get_default_device() == torch.device("cpu")


def _pretend(monkeypatch, accelerator, count=1):
    """Make helpers see `accelerator` ('cuda', 'mps', 'xpu' or None) with `count` devices."""
    device = torch.device(accelerator) if accelerator else None
    monkeypatch.setattr(helpers, "_accelerator", lambda: device)
    monkeypatch.setattr(helpers, "accelerator_count", lambda: count if device else 0)


@pytest.mark.parametrize("name", ["cuda", "cuda:7", "mps", "xpu"])
def test_missing_device_names_what_is_available(name, monkeypatch):
    _pretend(monkeypatch, None)
    with pytest.raises(ValueError, match=r"not available on this machine; available: cpu\."):
        helpers.get_default_device(name)
    monkeypatch.setenv("HELPERS_DEVICE", name)
    with pytest.raises(ValueError, match="available: cpu"):
        helpers.get_default_device()


def test_device_index_beyond_count_is_refused(monkeypatch):
    _pretend(monkeypatch, "cuda", count=2)
    assert helpers.available_devices() == ["cpu", "cuda:0", "cuda:1"]
    assert helpers.get_default_device("cuda:1") == torch.device("cuda:1")
    assert helpers.get_default_device() == torch.device("cuda")
    with pytest.raises(ValueError, match="'cuda:2' is not available on this machine; available: cpu, cuda:0, cuda:1"):
        helpers.get_default_device("cuda:2")
    with pytest.raises(ValueError, match="'mps' is not available"):
        helpers.get_default_device("mps")


@pytest.mark.parametrize("accelerator", ["mps", "xpu"])
def test_any_accelerator_is_chosen_and_listed(accelerator, monkeypatch):
    _pretend(monkeypatch, accelerator)
    assert helpers.get_default_device() == torch.device(accelerator)
    assert helpers.get_default_device(accelerator) == torch.device(accelerator)
    assert helpers.available_devices()[-1] in (accelerator, f"{accelerator}:0")


def test_accelerator_agrees_with_torch():
    """The real probe, unmocked: torch.accelerator where PyTorch has it (2.6 and newer)."""
    expected = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    assert helpers._accelerator() == expected
    assert len(helpers.available_devices()) == 1 + (torch.accelerator.device_count() if expected else 0)


def test_nonsense_device_name():
    with pytest.raises(ValueError, match="'banana' is not a device name"):
        helpers.get_default_device("banana")


def test_describe_cpu():
    text = helpers.describe_device("cpu")
    assert text.startswith("cpu:") and f"{torch.get_num_threads()} PyTorch threads" in text


def test_to_device_keeps_container_types():
    Pair = collections.namedtuple("Pair", "x y")
    data = {"a": [torch.ones(1), (torch.zeros(2), 3)], "p": Pair(torch.ones(1), "label")}
    moved = helpers.to_device(data, "cpu")
    assert isinstance(moved["a"], list) and isinstance(moved["a"][1], tuple)
    assert isinstance(moved["p"], Pair) and moved["p"].y == "label" and moved["a"][1][1] == 3
    assert torch.equal(moved["a"][0], torch.ones(1))
    model = nn.Linear(2, 2)
    assert helpers.to_device(model, "cpu") is model


@pytest.mark.cuda
def test_pinned_batches_copy_to_cuda_without_blocking():
    dl = DataLoader(TensorDataset(torch.rand(64, 1, 28, 28), torch.arange(64) % 10), 32, pin_memory=True)
    images, labels = next(iter(dl))
    assert images.is_pinned()
    moved = helpers.to_device([images, labels], "cuda")
    helpers.synchronize("cuda")
    assert moved[0].device.type == "cuda" and torch.equal(moved[0].cpu(), images)
    assert helpers.loader_settings("cuda")["pin_memory"] is True


@pytest.mark.cuda
def test_synchronize_waits_for_cuda():
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a = torch.randn(2048, 2048, device="cuda")
    start.record()
    a @ a
    end.record()
    helpers.synchronize("cuda")
    assert end.query(), "the queued product has finished"
    helpers.synchronize(torch.device("cpu"))  # a no-op, not an error


def test_to_device_non_blocking_only_from_pinned_memory_to_cuda(monkeypatch):
    seen = []
    monkeypatch.setattr(helpers, "_accelerator", lambda: torch.device("cuda"))  # to_device checks the device exists
    monkeypatch.setattr(helpers, "accelerator_count", lambda: 1)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **kw: seen.append(kw.get("non_blocking")) or self)
    t = torch.ones(2)
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: True)
    helpers.to_device(t, "cuda")
    helpers.to_device(t, "cpu")
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: False)
    helpers.to_device(t, "cuda")
    helpers.to_device(t, "cuda", non_blocking=True)
    assert seen == [True, False, False, True]


def test_device_data_loader_passes_through():
    dl = DataLoader(TensorDataset(torch.arange(10.0), torch.arange(10)), batch_size=4)
    ddl = helpers.DeviceDataLoader(dl, "cpu")
    assert len(ddl) == 3 and ddl.batch_size == 4 and ddl.dataset is dl.dataset
    assert [len(b[0]) for b in ddl] == [4, 4, 2]
    assert all(b[0].device.type == "cpu" for b in ddl)


# ---------------------------------------------------------------------------- model


def test_model_shapes_and_parameters():
    model = helpers.MnistModel()
    assert [list(p.shape) for p in model.parameters()] == [[32, 784], [32], [10, 32], [10]]
    assert sum(p.numel() for p in model.parameters()) == 25450
    assert list(model(torch.zeros(5, 1, 28, 28)).shape) == [5, 10]
    assert list(model(torch.zeros(5, 784)).shape) == [5, 10]


@pytest.mark.parametrize("shape", [(5, 1, 27, 28), (5, 3, 28, 28), (784,), (5, 100)])
def test_model_rejects_wrong_shapes(shape):
    with pytest.raises(ValueError, match="784 values per image.*" + re.escape(f"got shape {list(shape)}")):
        helpers.MnistModel()(torch.zeros(shape))


def test_accuracy():
    outputs = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6]])
    assert helpers.accuracy(outputs, torch.tensor([0, 1, 1, 1])).item() == pytest.approx(0.75)
    with pytest.raises(ValueError, match="accuracy wants"):
        helpers.accuracy(outputs, torch.tensor([0, 1]))


class Recorder(helpers.MnistModel):
    """Records the autograd and training mode seen during validation."""

    def validation_step(self, batch):
        self.seen = (torch.is_grad_enabled(), self.training)
        return super().validation_step(batch)


def _unequal_batches():
    """Two batches, 4 and 1 images, with per-batch accuracies 1.0 and 0.0."""
    torch.manual_seed(0)
    model = helpers.MnistModel()
    images = torch.rand(5, 1, 28, 28)
    preds = model(images).argmax(1)
    labels = preds.clone()
    labels[4] = (preds[4] + 1) % 10
    return model, [(images[:4], labels[:4]), (images[4:], labels[4:])], images, labels


def test_evaluate_weights_batches_by_size():
    model, batches, images, labels = _unequal_batches()
    result = helpers.evaluate(model, batches)
    assert result["val_acc"] == pytest.approx(0.8)  # 4 of 5 images; a mean of batch means says 0.5
    expected_loss = nn.functional.cross_entropy(model(images), labels).item()
    assert result["val_loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert isinstance(result["val_loss"], float)


@pytest.mark.parametrize("train_mode", [True, False])
def test_evaluate_without_autograd_in_eval_mode_and_restores_mode(train_mode):
    model = Recorder()
    model.train(train_mode)
    helpers.evaluate(model, [(torch.rand(3, 1, 28, 28), torch.tensor([1, 2, 3]))])
    assert model.seen == (False, False)
    assert model.training is train_mode


def test_model_and_data_on_different_devices_get_a_clear_error():
    stray = helpers.MnistModel().to("meta")  # stands in for a GPU: a device the data is not on
    batches = [(torch.rand(3, 1, 28, 28), torch.tensor([1, 2, 3]))]
    expected = r"the model is on meta but the batch is on cpu: move the model with to_device\(model, 'cpu'\)"
    with pytest.raises(ValueError, match=expected):
        helpers.evaluate(stray, batches)
    with pytest.raises(ValueError, match=expected):
        helpers.fit(1, 0.1, stray, batches, batches)


def test_evaluate_empty_loader():
    with pytest.raises(ValueError, match="empty loader"):
        helpers.evaluate(helpers.MnistModel(), [])


# ---------------------------------------------------------------------------- fit


def _small_loaders(n=512):
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)
    train = helpers.DeviceResidentLoader(x, y, 64, shuffle=True, device="cpu")
    val = helpers.DeviceResidentLoader(x[:100], y[:100], 64, device="cpu")
    return train, val


@pytest.mark.parametrize(
    ("epochs", "lr", "match"),
    [
        (-1, 0.1, "epochs"),
        (1.5, 0.1, "epochs"),
        (1, 0, "learning rate"),
        (1, -0.1, "learning rate"),
        (1, float("nan"), "learning rate"),
        (1, "0.1", "learning rate"),
    ],
)
def test_fit_rejects_bad_arguments(epochs, lr, match):
    train, val = _small_loaders()
    with pytest.raises(ValueError, match=match):
        helpers.fit(epochs, lr, helpers.MnistModel(), train, val)


def test_fit_history_records(capsys):
    train, val = _small_loaders()
    assert helpers.fit(0, 0.1, helpers.MnistModel(), train, val) == []
    history = helpers.fit(2, 0.1, helpers.MnistModel(), train, val)
    assert len(history) == 2
    for h in history:
        assert {"val_loss", "val_acc", "train_loss", "train_acc", "train_s", "epoch_s"} <= set(h)
        assert 0 <= h["train_acc"] <= 1 and h["epoch_s"] >= h["train_s"] > 0
    assert "Epoch [1], train_loss:" in capsys.readouterr().out


def test_fit_train_metrics_are_weighted_running_means():
    x, y = torch.rand(10, 1, 28, 28), torch.randint(0, 10, (10,))
    model = helpers.MnistModel()
    start = copy.deepcopy(model)
    loader = helpers.DeviceResidentLoader(x, y, 10, device="cpu")  # one batch: metrics of the untrained model
    h = helpers.fit(1, 1e-9, model, loader, loader, verbose=False)[0]
    with torch.no_grad():
        out = start(x)
    assert h["train_loss"] == pytest.approx(nn.functional.cross_entropy(out, y).item(), rel=1e-4)
    assert h["train_acc"] == pytest.approx((out.argmax(1) == y).float().mean().item())


def test_progress_switch(monkeypatch, capsys):
    train, val = _small_loaders()
    monkeypatch.setenv("HELPERS_PROGRESS", "1")
    helpers.fit(1, 0.1, helpers.MnistModel(), train, val, verbose=False)
    assert "Epoch 0" in capsys.readouterr().err
    helpers.fit(1, 0.1, helpers.MnistModel(), train, val, verbose=False, progress=False)
    monkeypatch.setenv("HELPERS_PROGRESS", "0")
    helpers.fit(1, 0.1, helpers.MnistModel(), train, val, verbose=False)
    assert capsys.readouterr().err == ""


class Tripwire:
    """A loader that misbehaves at one batch of one epoch: yields NaN images, or raises Ctrl-C."""

    def __init__(self, inner, epoch, batch, action):
        self.inner, self.epoch, self.batch, self.action, self.epochs_seen = inner, epoch, batch, action, 0

    def __len__(self):
        return len(self.inner)

    def __iter__(self):
        for i, (x, y) in enumerate(self.inner):
            if self.epochs_seen == self.epoch and i == self.batch:
                if self.action == "interrupt":
                    raise KeyboardInterrupt
                x = torch.full_like(x, float("nan"))
            yield x, y
        self.epochs_seen += 1


@pytest.mark.parametrize("action", ["nan", "interrupt"])
def test_fit_keeps_completed_epochs_and_their_weights(action, capsys):
    train, val = _small_loaders()
    torch.manual_seed(0)
    model = helpers.MnistModel()
    reference = copy.deepcopy(model)
    helpers.fit(1, 0.1, reference, _small_loaders()[0], val, verbose=False)  # the same first epoch, undisturbed
    error = helpers.TrainingDiverged if action == "nan" else helpers.TrainingInterrupted
    with pytest.raises(error) as info:
        helpers.fit(3, 0.1, model, Tripwire(train, 1, 2, action), val)
    assert len(info.value.history) == 1
    for a, b in zip(model.state_dict().values(), reference.state_dict().values()):
        assert torch.equal(a, b), "the model must hold the weights of the last completed epoch"
    if action == "nan":
        assert "diverged in epoch 1" in str(info.value) and "lower learning rate" in str(info.value)
        assert isinstance(info.value, FloatingPointError)
    else:
        assert isinstance(info.value, KeyboardInterrupt)
        assert "kept 1 completed epochs" in capsys.readouterr().out


def test_divergence_suggests_a_learning_rate_that_trains(capsys):
    train, val = _small_loaders()
    # A NaN loss in one step of one epoch, as a blow-up gives, not NaN in the data (see the NonFiniteData tests)
    nan_loader = Tripwire(train, 0, 1, "nan")
    with pytest.raises(helpers.TrainingDiverged, match=r"lr=1e\+20\. .*such as lr=0\.5 \(the lesson's"):
        helpers.fit(1, 1e20, helpers.MnistModel(), nan_loader, val)
    nan_loader = Tripwire(train, 0, 1, "nan")
    with pytest.raises(helpers.TrainingDiverged, match=r"such as lr=0\.03\.$"):
        helpers.fit(1, 0.3, helpers.MnistModel(), nan_loader, val)


def test_uint8_images_and_float_labels_get_a_clear_error():
    model = helpers.MnistModel()
    raw = torch.randint(0, 256, (4, 1, 28, 28), dtype=torch.uint8)  # dataset.data fed directly
    with pytest.raises(TypeError, match=r"floats scaled to \[0, 1\]; got torch.uint8.*ToTensor\(\).*float\(\) / 255"):
        model(raw)
    float_labels = torch.tensor([1.0, 2.0, 3.0, 4.0])
    batch = (raw.float() / 255, float_labels)
    with pytest.raises(
        TypeError, match=r"labels must be class indices .*torch.int64.*got torch.float32.*labels.long\(\)"
    ):
        helpers.fit(1, 0.1, model, [batch], [batch])
    with pytest.raises(TypeError, match="labels must be class indices"):
        helpers.evaluate(model, [batch])
    assert helpers.evaluate(model, [(raw.float() / 255, float_labels.long())])["val_loss"] > 0


def test_persistent_workers_start_before_the_generator_is_restored():
    """Pins the private `DataLoader._iterator` that `_start_persistent_workers` reads: fails if torch changes it."""
    dl = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, num_workers=1, persistent_workers=True)
    assert dl._iterator is None, "torch changed DataLoader._iterator: see helpers._start_persistent_workers"
    helpers._start_persistent_workers(helpers.DeviceDataLoader(dl, "cpu"))
    assert dl._iterator is not None
    started = dl._iterator
    helpers._start_persistent_workers(dl)
    assert dl._iterator is started, "started once, not again"
    del dl, started


# ---------------------------------------------------------------------------- plots and predictions


def test_show_batch_and_curves():
    dl = DataLoader(TensorDataset(torch.rand(40, 1, 28, 28), torch.zeros(40)), batch_size=32)
    fig = helpers.show_batch(dl)
    assert isinstance(fig, matplotlib.figure.Figure) and "32 images" in fig.axes[0].get_title()
    history = [{"val_loss": 2.3, "val_acc": 0.1}] + [
        {"val_loss": 0.5, "val_acc": 0.9, "train_loss": 0.6, "train_acc": 0.85}
    ] * 2
    losses = helpers.plot_losses(history)
    ax = losses.axes[0]
    assert ax.get_title() == "Loss vs. No. of epochs" and ax.get_xlabel() == "epoch" and ax.get_ylabel() == "loss"
    assert [line.get_label() for line in ax.lines] == ["training", "validation"]
    assert list(ax.lines[1].get_xdata()) == [0, 1, 2] and list(ax.lines[0].get_xdata()) == [1, 2]
    accs = helpers.plot_accuracies(history).axes[0]
    assert accs.get_title() == "Accuracy vs. No. of epochs" and len(accs.lines) == 2
    with pytest.raises(ValueError, match="history is empty"):
        helpers.plot_losses([])


def test_predict_image_shapes_and_mode(mnist_test):
    torch.manual_seed(0)
    model = helpers.MnistModel().train()
    image = mnist_test[0][0]
    p = helpers.predict_image(image, model)
    assert isinstance(p, int) and 0 <= p <= 9
    assert helpers.predict_image(image[0], model) == p
    assert model.training
    for shape in [(3, 28, 28), (1, 1, 28, 28), (784,), (1, 32, 32)]:
        with pytest.raises(ValueError, match=re.escape(f"[1, 28, 28] or [28, 28]; got {list(shape)}")):
            helpers.predict_image(torch.zeros(shape), model)


def test_seed_everything_repeats():
    helpers.seed_everything(7)
    a = (random.random(), torch.rand(3))
    helpers.seed_everything(7)
    b = (random.random(), torch.rand(3))
    assert a[0] == b[0] and torch.equal(a[1], b[1])


def test_resident_loader_matches_to_tensor(mnist):
    subset = Subset(mnist, list(range(300)))
    loader = helpers.DeviceResidentLoader.from_dataset(subset, 128, device="cpu")
    assert len(loader) == 3
    images, labels = next(iter(loader))
    expected = torch.stack([mnist[i][0] for i in range(128)])
    assert images.dtype == torch.float32 and torch.equal(images, expected)
    assert labels.dtype == torch.int64 and labels.tolist() == [mnist[i][1] for i in range(128)]
    assert [len(b[1]) for b in loader] == [128, 128, 44]
    dropped = helpers.DeviceResidentLoader.from_dataset(subset, 128, device="cpu", drop_last=True)
    assert len(dropped) == 2 and [len(b[1]) for b in dropped] == [128, 128]


def test_resident_loader_shuffles_reproducibly():
    x, y = torch.arange(100, dtype=torch.uint8).reshape(100, 1, 1, 1), torch.arange(100)
    a = helpers.DeviceResidentLoader(x, y, 10, shuffle=True, device="cpu", seed=3)
    b = helpers.DeviceResidentLoader(x, y, 10, shuffle=True, device="cpu", seed=3)
    first = torch.cat([labels for _, labels in a])
    assert sorted(first.tolist()) == list(range(100)) and first.tolist() != list(range(100))
    assert torch.equal(first, torch.cat([labels for _, labels in b]))
    assert not torch.equal(first, torch.cat([labels for _, labels in a])), "each epoch a new order"
    with pytest.raises(ValueError, match="differ in length"):
        helpers.DeviceResidentLoader(x, y[:5])
    with pytest.raises(ValueError, match="batch_size"):
        helpers.DeviceResidentLoader(x, y, 0)


@pytest.mark.cuda
def test_resident_loader_shuffles_on_cuda_with_a_cuda_generator():
    x, y = torch.arange(100, dtype=torch.uint8).reshape(100, 1, 1, 1), torch.arange(100)
    a = helpers.DeviceResidentLoader(x, y, 10, shuffle=True, device="cuda", seed=3)
    b = helpers.DeviceResidentLoader(x, y, 10, shuffle=True, device="cuda", seed=3)
    assert a.generator.device.type == "cuda" and a.images.device.type == "cuda"
    first = torch.cat([labels for _, labels in a])
    assert first.device.type == "cuda" and sorted(first.tolist()) == list(range(100))
    assert torch.equal(first, torch.cat([labels for _, labels in b]))


def test_resident_loader_from_any_dataset():
    ds = TensorDataset(torch.rand(20, 1, 28, 28), torch.arange(20) % 10)
    loader = helpers.DeviceResidentLoader.from_dataset(ds, 8, device="cpu")
    images, labels = next(iter(loader))
    assert torch.equal(images, ds.tensors[0][:8]) and torch.equal(labels, ds.tensors[1][:8])


def test_fit_and_evaluate_read_the_device_once_per_epoch_not_per_step(monkeypatch):
    """On an accelerator every read of a tensor's value from Python waits for the device."""
    reads = []
    for name in ("item", "tolist", "cpu", "__bool__", "__float__", "__int__", "numpy"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            reads.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)

    def count_reads(n_samples):
        x, y = torch.rand(n_samples, 1, 28, 28), torch.randint(0, 10, (n_samples,))
        loader = helpers.DeviceResidentLoader(x, y, 16, shuffle=True, device="cpu")
        reads.clear()
        helpers.fit(2, 0.1, helpers.MnistModel(), loader, loader, verbose=False)
        return len(reads)

    few, many = count_reads(64), count_reads(256)  # 4 and 16 steps per epoch
    assert few == many, f"reads grow with the number of steps: {few} for 4 steps, {many} for 16"
    assert many <= 2 * 4, f"{many} reads in 2 epochs"


class LabelSmoothing(helpers.MnistModel):
    """A learner's model that changes the loss, as the lesson's design invites: training_step is overridden."""

    def training_step(self, batch):
        images, labels = batch
        return nn.functional.cross_entropy(self(images), labels, label_smoothing=0.3)


class LabelSmoothingWithAccuracy(helpers.MnistModel):
    """The same loss, reporting its accuracy too, as validation_step does: a dict with the loss in it."""

    def training_step(self, batch):
        images, labels = batch
        out = self(images)
        loss = nn.functional.cross_entropy(out, labels, label_smoothing=0.3)
        return {"loss": loss, "acc": helpers.accuracy(out, labels), "n": len(labels)}


@pytest.mark.parametrize("overridden", [LabelSmoothing, LabelSmoothingWithAccuracy])
def test_fit_trains_through_the_models_own_training_step(overridden):
    x, y = torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))
    loader = helpers.DeviceResidentLoader(x, y, 64, device="cpu")
    torch.manual_seed(0)
    plain = helpers.MnistModel()
    smoothed = overridden()
    smoothed.load_state_dict(plain.state_dict())
    with torch.no_grad():
        out = plain(x)
    expected = nn.functional.cross_entropy(out, y, label_smoothing=0.3).item()
    h = helpers.fit(1, 0.5, smoothed, loader, loader, verbose=False)[0]
    assert h["train_loss"] == pytest.approx(expected, rel=1e-5), "the loss is the overridden training_step's"
    helpers.fit(1, 0.5, plain, loader, loader, verbose=False)
    assert not torch.equal(plain.linear1.weight, smoothed.linear1.weight), "and so are the gradients"
    if overridden is LabelSmoothing:
        assert "train_acc" not in h, "a training step that returns the loss alone measures nothing else"
    else:
        assert h["train_acc"] == pytest.approx((out.argmax(1) == y).float().mean().item()), "what it measured"


def test_training_accuracy_needs_no_forward_hook():
    """A training step that runs the model twice, or not at all, is summarised from what it returns."""

    class TwoPasses(helpers.MnistModel):
        def training_step(self, batch):
            self(batch[0])  # a forward pass whose scores are not the step's
            return super().training_step(batch)

    x, y = torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,))
    torch.manual_seed(0)
    model = TwoPasses()
    with torch.no_grad():
        expected = (model(x).argmax(1) == y).float().mean().item()
    h = helpers.fit(1, 1e-9, model, [(x, y)], [(x, y)], verbose=False)[0]
    assert h["train_acc"] == pytest.approx(expected)
    assert not model._forward_hooks, "fit leaves no hook behind"


def test_a_plain_classifier_is_trained_and_evaluated_as_the_lesson_would():
    x, y = torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))  # no training_step, validation_step, epoch_end
    result = helpers.evaluate(plain, [(x, y)])
    with torch.no_grad():
        out = plain(x)
    assert result["val_loss"] == pytest.approx(nn.functional.cross_entropy(out, y).item(), rel=1e-5)
    assert result["val_acc"] == pytest.approx((out.argmax(1) == y).float().mean().item())
    history = helpers.fit(3, 0.1, plain, [(x, y)], [(x, y)], verbose=False)
    assert history[-1]["val_loss"] < history[0]["val_loss"] < result["val_loss"], "it learns the batch it sees"
