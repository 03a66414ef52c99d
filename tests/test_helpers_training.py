"""helpers.py, sections 2, 3, 4 and 8 (notebooks 02, 03 and 05): the data and its loaders, the model and the
batches it accepts, evaluate, fit, and the device-resident loader; bad input gets one clear message, checked
before any work, and nothing already trained is lost. fit with a checkpoint: test_helpers_checkpoints.py."""

import copy
import errno
import re
import time

import pytest
import torch
import torch.nn as nn
from conftest import cpu_loader, random_images, same_weights, small_loaders
from torch.utils.data import DataLoader, Subset, TensorDataset

import helpers

# ------------------------------------------------------ data: MNIST, the validation split and the loaders (notebook 02)


def test_real_mnist_train_and_test(mnist, mnist_test):
    assert len(mnist) == 60000 and len(mnist_test) == 10000
    image, label = mnist[0]
    assert list(image.shape) == [1, 28, 28] and label == 5
    assert image.dtype == torch.float32 and image.min() >= 0 and image.max() <= 1
    assert mnist_test[0][1] == 7 and mnist_test[1839][1] == 2 and mnist_test[193][1] == 9


def test_split_is_seeded(mnist):
    train, val = helpers.split_dataset(mnist, val_size=10000, seed=42)
    assert (len(train), len(val)) == (50000, 10000)
    again, _ = helpers.split_dataset(mnist, seed=42)
    other, _ = helpers.split_dataset(mnist, seed=43)
    assert list(again.indices) == list(train.indices)
    assert list(other.indices) != list(train.indices)
    assert not set(train.indices) & set(val.indices)


@pytest.mark.parametrize("val_size", [0, -5, 60000, 70000])
def test_split_rejects_bad_sizes(mnist, val_size):
    with pytest.raises(ValueError, match="val_size"):
        helpers.split_dataset(mnist, val_size=val_size)


def test_loader_settings_pin_only_with_cuda():
    cpu = helpers.loader_settings("cpu")
    assert cpu["pin_memory"] is False
    assert helpers.loader_settings(torch.device("cuda"))["pin_memory"] is True
    assert cpu["persistent_workers"] == (cpu["num_workers"] > 0)


@pytest.mark.parametrize(
    ("platform", "cores", "workers"),
    [
        ("linux", 1, 0),
        ("linux", 2, 0),
        ("linux", 3, 1),
        ("linux", 4, 2),
        ("linux", 64, 4),
        ("darwin", 8, 0),
        ("win32", 8, 0),
    ],
)
def test_workers_only_with_cores_to_spare_and_never_on_windows_or_macos(platform, cores, workers, monkeypatch):
    monkeypatch.setattr(helpers.sys, "platform", platform)
    monkeypatch.setattr(helpers.os, "cpu_count", lambda: cores)
    settings = helpers.loader_settings("cpu")
    assert settings["num_workers"] == workers
    assert settings["persistent_workers"] is (workers > 0)


def test_make_loaders_shapes_and_seeded_order(mnist):
    train, val = helpers.split_dataset(mnist)
    train_loader, val_loader = helpers.make_loaders(train, val, device="cpu", seed=1)
    assert (len(train_loader), len(val_loader)) == (391, 40)
    images, labels = next(iter(train_loader))
    assert list(images.shape) == [128, 1, 28, 28] and labels.dtype == torch.int64
    assert next(iter(val_loader))[0].shape[0] == 256
    again, _ = helpers.make_loaders(train, val, device="cpu", seed=1)
    assert torch.equal(next(iter(again))[1], labels)
    first_val = [b[1] for b in val_loader][-1]
    assert len(first_val) == 16  # the short last batch, not shuffled away


# ------------------------------------------------------------------- the model and the batches it accepts (notebook 03)


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


@pytest.mark.parametrize("sizes", [(784, 0, 10), (784, -1, 10), (784, 32.0, 10), (0, 32, 10)])
def test_a_model_size_below_one_is_refused(sizes):
    with pytest.raises(ValueError, match="must be a whole number of at least 1"):
        helpers.MnistModel(*sizes)


def test_float64_images_say_how_to_convert():
    with pytest.raises(TypeError, match=r"images are torch.float64 but the model's weights are torch.float32.*float"):
        helpers.MnistModel()(torch.rand(4, 1, 28, 28, dtype=torch.float64))


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


def test_accuracy():
    outputs = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6]])
    assert helpers.accuracy(outputs, torch.tensor([0, 1, 1, 1])).item() == pytest.approx(0.75)
    with pytest.raises(ValueError, match="accuracy wants"):
        helpers.accuracy(outputs, torch.tensor([0, 1]))


def test_an_empty_batch_is_named_in_the_model_and_in_evaluate():
    empty = (torch.rand(0, 1, 28, 28), torch.zeros(0, dtype=torch.int64))
    with pytest.raises(ValueError, match="empty batch"):
        helpers.MnistModel()(empty[0])
    with pytest.raises(ValueError, match="empty batch"):
        helpers.evaluate(helpers.MnistModel(), [empty])


@pytest.mark.parametrize("bad", [10, -1])
def test_labels_out_of_range_are_refused_before_training(bad):
    images, labels = random_images(64)
    labels[5] = bad
    model = helpers.MnistModel()
    start = copy.deepcopy(model)
    with pytest.raises(ValueError, match="labels must be class indices from 0 to 9 .*10 outputs"):
        helpers.fit(1, 0.1, model, [(images, labels)], [(images, labels)])
    assert same_weights(model, start), "nothing trained"
    with pytest.raises(ValueError, match="from 0 to 9"):
        helpers.evaluate(model, [(images, labels)])


def test_labels_of_shape_n_by_1_and_labels_in_a_list():
    images, labels = random_images(8)
    with pytest.raises(ValueError, match=r"shape \[N\]; got shape \[8, 1\].*squeeze\(1\)"):
        helpers.evaluate(helpers.MnistModel(), [(images, labels[:, None])])
    with pytest.raises(TypeError, match="labels must be a tensor, got a list.*torch.tensor"):
        helpers.fit(1, 0.1, helpers.MnistModel(), [(images, labels.tolist())], [])


def test_loaders_that_yield_dicts_or_three_parts_say_what_the_loop_wants():
    images, labels = random_images(8)
    dicts = [{"image": images, "label": labels}]
    with pytest.raises(TypeError, match=r"yields dicts \(keys \['image', 'label'\]\).*\(images, labels\) pairs"):
        helpers.fit(1, 0.1, helpers.MnistModel(), dicts, dicts)
    triples = DataLoader(TensorDataset(images, labels, torch.arange(8)), batch_size=4)
    with pytest.raises(TypeError, match="yields 3 parts per batch"):
        helpers.evaluate(helpers.MnistModel(), triples)


# ------------------------------------------------------------------- evaluate, and the values in the data (notebook 05)


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
    stray = helpers.MnistModel()  # never moved: on the CPU, while the data is on meta, standing in for a GPU
    batches = [(torch.rand(3, 1, 28, 28, device="meta"), torch.tensor([1, 2, 3], device="meta"))]
    expected = r"model is on cpu but the batch is on meta: meta holds shapes but no values.*give the loader real data"
    with pytest.raises(ValueError, match=expected) as info:
        helpers.evaluate(stray, batches)
    assert "to_device(model, 'meta')" not in str(info.value), "moving the model to meta would throw its weights away"
    with pytest.raises(ValueError, match=expected):
        helpers.fit(1, 0.1, stray, batches, batches)
    cpu_batches = [(torch.rand(3, 1, 28, 28), torch.tensor([1, 2, 3]))]
    with pytest.raises(ValueError, match="the model is on meta .* no weights: create it again on cpu"):
        helpers.evaluate(helpers.MnistModel().to("meta"), cpu_batches)


@pytest.mark.cuda
def test_model_and_data_on_the_cpu_and_a_gpu_say_which_to_move():
    cpu_batches = [(torch.rand(3, 1, 28, 28), torch.tensor([1, 2, 3]))]
    gpu_batches = [helpers.to_device(batch, "cuda:0") for batch in cpu_batches]
    with pytest.raises(ValueError, match=r"model is on cpu but the batch is on cuda:0: .*to_device\(model, 'cuda:0'\)"):
        helpers.fit(1, 0.1, helpers.MnistModel(), gpu_batches, gpu_batches)
    on_gpu = helpers.to_device(helpers.MnistModel(), "cuda:0")
    with pytest.raises(ValueError, match=r"on cuda:0 but the batch is on cpu: .*DeviceDataLoader\(loader, 'cuda:0'\)"):
        helpers.evaluate(on_gpu, cpu_batches)


def test_evaluate_empty_loader():
    with pytest.raises(ValueError, match="empty loader"):
        helpers.evaluate(helpers.MnistModel(), [])


def test_nan_in_the_data_is_the_datas_fault_not_the_learning_rates():
    images, labels = random_images(256)
    images[200, 0, 3, 3] = float("nan")  # in the 4th batch of 64: the first batch is clean
    model = helpers.MnistModel()
    start = copy.deepcopy(model)
    with pytest.raises(helpers.NonFiniteData, match=r"training data holds NaN.*batch 3.*not the learning rate") as info:
        helpers.fit(2, 0.1, model, cpu_loader(images, labels), cpu_loader(*random_images(64, seed=1)))
    assert info.value.history == [] and same_weights(model, start), "the weights it started with"
    assert "lower learning rate" not in str(info.value)


def test_nan_in_the_first_batch_stops_before_a_step():
    images, labels = random_images(128)
    images[0, 0, 0, 0] = float("inf")
    model = helpers.MnistModel()
    start = copy.deepcopy(model)
    with pytest.raises(helpers.NonFiniteData, match="first batch holds NaN or infinite"):
        helpers.fit(1, 0.1, model, cpu_loader(images, labels), cpu_loader(images, labels))
    assert same_weights(model, start)


def test_evaluate_on_nan_data_says_so():
    images, labels = random_images(128)
    images[100, 0, 0, 0] = float("nan")
    with pytest.raises(helpers.NonFiniteData, match="validation data holds NaN.*batch 1"):
        helpers.evaluate(helpers.MnistModel(), cpu_loader(images, labels))


def test_unscaled_pixels_get_a_warning_that_names_the_fix():
    images, labels = random_images(64)
    with pytest.warns(UserWarning, match=r"pixel values go up to 25\d.*ToTensor\(\).*255"):
        helpers.evaluate(helpers.MnistModel(), [(images * 255, labels)])


# ---------------------------------------------------------------------------- fit (notebook 05)


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
    train, val = small_loaders()
    with pytest.raises(ValueError, match=match):
        helpers.fit(epochs, lr, helpers.MnistModel(), train, val)


class SlowToTrain(helpers.MnistModel):
    """The lesson's model, 5 ms slower per training step: what train_s must count."""

    def forward(self, xb):
        time.sleep(0.005 if self.training else 0)
        return super().forward(xb)


def test_fit_history_records(capsys):
    train, val = small_loaders()  # 8 training batches
    assert helpers.fit(0, 0.1, helpers.MnistModel(), train, val) == []
    history = helpers.fit(2, 0.1, SlowToTrain(), train, val)
    assert len(history) == 2
    for h in history:
        assert {"val_loss", "val_acc", "train_loss", "train_s", "epoch_s"} <= set(h)
        assert h["train_loss"] > 0 and h["epoch_s"] >= h["train_s"] >= 8 * 0.005
    assert "Epoch [1], train_loss:" in capsys.readouterr().out


def test_fit_train_loss_is_the_mean_over_images_of_the_steps_losses():
    """The last, smaller batch weighs its images, not a full batch: 4 + 1 images, not a mean of 2 batch means."""
    torch.manual_seed(0)
    model = helpers.MnistModel()
    x, y = torch.rand(5, 1, 28, 28), torch.randint(0, 10, (5,))
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model(x), y).item()
    h = helpers.fit(1, 1e-12, model, [(x[:4], y[:4]), (x[4:], y[4:])], [(x, y)], verbose=False)[0]
    assert h["train_loss"] == pytest.approx(expected, rel=1e-4)


def test_progress_switch(monkeypatch, capsys):
    train, val = small_loaders()
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
    train, val = small_loaders()
    torch.manual_seed(0)
    model = helpers.MnistModel()
    reference = copy.deepcopy(model)
    helpers.fit(1, 0.1, reference, small_loaders()[0], val, verbose=False)  # the same first epoch, undisturbed
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
    train, val = small_loaders()
    # A NaN loss in one step of one epoch, as a blow-up gives, not NaN in the data (see the NonFiniteData tests)
    nan_loader = Tripwire(train, 0, 1, "nan")
    with pytest.raises(helpers.TrainingDiverged, match=r"lr=1e\+20\. .*such as lr=0\.5 \(the lesson's"):
        helpers.fit(1, 1e20, helpers.MnistModel(), nan_loader, val)
    nan_loader = Tripwire(train, 0, 1, "nan")
    with pytest.raises(helpers.TrainingDiverged, match=r"such as lr=0\.03\.$"):
        helpers.fit(1, 0.3, helpers.MnistModel(), nan_loader, val)


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


class WithPenalty(helpers.MnistModel):
    """A learner's model that adds to the lesson's loss, as `super().training_step(batch) + penalty`."""

    def training_step(self, batch):
        return super().training_step(batch) + 0.1 * self.linear1.weight.square().sum()


@pytest.mark.parametrize("overridden", [LabelSmoothing, WithPenalty])
def test_fit_trains_through_the_models_own_training_step(overridden):
    x, y = torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))
    loader = helpers.DeviceResidentLoader(x, y, 64, device="cpu")
    torch.manual_seed(0)
    plain = helpers.MnistModel()
    changed = overridden()
    changed.load_state_dict(plain.state_dict())
    with torch.no_grad():
        expected = changed.training_step((x, y)).item()
    h = helpers.fit(1, 0.5, changed, loader, loader, verbose=False)[0]
    assert h["train_loss"] == pytest.approx(expected, rel=1e-5), "the loss is the overridden training_step's"
    helpers.fit(1, 0.5, plain, loader, loader, verbose=False)
    assert not torch.equal(plain.linear1.weight, changed.linear1.weight), "and so are the gradients"


def test_helpers_model_returns_the_loss_as_the_lesson_teaches():
    """The lesson's own loop, `loss = model.training_step(batch); loss.backward()`, trains helpers.MnistModel."""
    torch.manual_seed(0)
    model = helpers.MnistModel()
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    loss = model.training_step((x, y))
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0
    loss.backward()
    assert model.linear1.weight.grad is not None
    penalised = WithPenalty()  # a subclass adds to the loss the lesson's training_step returns, a tensor
    penalised.load_state_dict(model.state_dict())
    expected = loss.item() + 0.1 * model.linear1.weight.square().sum().item()
    assert penalised.training_step((x, y)).item() == pytest.approx(expected, rel=1e-6)


def test_a_plain_network_is_refused_with_what_to_wrap_it_in_and_trains_wrapped():
    x, y = torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))  # no training_step, validation_step, epoch_end
    for run in (lambda: helpers.evaluate(plain, [(x, y)]), lambda: helpers.fit(1, 0.1, plain, [(x, y)], [(x, y)])):
        with pytest.raises(
            TypeError, match=r"a Sequential has none of the lesson's methods.*helpers.Classifier\(model\)"
        ):
            run()
    wrapped = helpers.Classifier(plain)
    result = helpers.evaluate(wrapped, [(x, y)])
    with torch.no_grad():
        out = plain(x)
    assert result["val_loss"] == pytest.approx(nn.functional.cross_entropy(out, y).item(), rel=1e-5)
    assert result["val_acc"] == pytest.approx((out.argmax(1) == y).float().mean().item())
    history = helpers.fit(3, 0.1, wrapped, [(x, y)], [(x, y)], verbose=False)
    assert history[-1]["val_loss"] < history[0]["val_loss"] < result["val_loss"], "it learns the batch it sees"
    assert wrapped.net is plain, "the network is wrapped, not copied"


# ------------------------------- data kept on the device: DeviceResidentLoader (notebooks 04-08; measured in 09)


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


def test_the_resident_loaders_docstring_names_the_notebooks_that_use_it():
    """Read from the notebooks: 04's exercise builds its idea, 05-08 train with it, 09 measures it."""
    import nbformat

    folder = helpers.Path(helpers.__file__).resolve().parent / "notebooks"
    using = [
        int(path.name[:2])
        for path in sorted(folder.glob("0[1-9]_*.ipynb"))
        if "DeviceResidentLoader" in "".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    ]
    lesson = [n for n in using if n <= 8]
    assert lesson == list(range(lesson[0], 9)) and 9 in using
    summary = helpers.DeviceResidentLoader.__doc__.splitlines()[0]
    assert summary.endswith(f"(notebooks {lesson[0]:02d}-08; 09 measures it)."), summary


# ---------------------------------------------------------------------------- a notebook's settings


def test_a_save_path_is_checked_and_its_folder_made_before_training(tmp_path):
    path = helpers.check_save_path(tmp_path / "runs" / "lesson.ckpt")
    assert path.parent.is_dir() and not path.exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"cannot write to .*file.*is a file, not a folder; give another path"):
        helpers.check_save_path(tmp_path / "file" / "lesson.ckpt")
    with pytest.raises(ValueError, match=r"runs: it is a folder; give a file's path, such as .*runs/lesson.ckpt"):
        helpers.check_save_path(tmp_path / "runs")


def test_a_save_path_no_file_can_be_made_in_is_refused_naming_it(tmp_path, monkeypatch):
    """A read-only folder, or one like /proc: the file that would be made there fails before any training."""

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(helpers.tempfile, "TemporaryFile", refused)
    with pytest.raises(PermissionError, match=r"cannot write to .*lesson.ckpt: Permission denied; give a path"):
        helpers.check_save_path(tmp_path / "lesson.ckpt")


# ------------------------------------------------------------------- arguments fit cannot use: refused before training


def test_numpy_and_tensor_hyperparameters_train_as_python_numbers():
    """np.int64(1) epochs and np.float32(0.5) or tensor(0.5) learning rates were refused as 'not a number'."""
    import numpy as np

    train, val = small_loaders(256)
    for epochs, lr in ((np.int64(1), np.float32(0.5)), (1, torch.tensor(0.5))):
        model = helpers.MnistModel()
        history = helpers.fit(epochs, lr, model, train, val, verbose=False)
        assert len(history) == 1


def test_an_optimizer_made_already_is_refused_with_the_class_to_pass(monkeypatch):
    model = helpers.MnistModel()
    train, val = small_loaders(128)
    with pytest.raises(TypeError, match=r"got a SGD already made: pass torch\.optim\.SGD, or functools\.partial"):
        helpers.fit(1, 0.5, model, train, val, torch.optim.SGD(model.parameters(), 0.5))


@pytest.mark.parametrize("limit", [0, -1, 2.5, "100"])
def test_a_limit_that_is_not_a_count_of_images_is_refused(limit):
    """limit=-1 or 0 left no training images and no message; limit=2.5 raised Python's TypeError."""
    data = TensorDataset(*random_images(200))
    with pytest.raises(ValueError, match=rf"limit is how many training images to keep.*got {re.escape(repr(limit))}"):
        helpers.split_dataset(data, val_size=50, limit=limit)


def test_classifier_of_nothing_says_the_maker_must_return_it():
    """A make_model() without return gave fit 'optimizer got an empty parameter list'."""
    with pytest.raises(TypeError, match="got None: a function that makes the network must end with return"):
        helpers.Classifier(None)


def test_a_generator_as_a_loader_is_refused_before_training_not_called_empty_in_epoch_two():
    """A one-shot generator trained epoch 0, then "an empty loader" in epoch 1, its history lost."""
    images, labels = torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))
    batches = [(images[i : i + 32], labels[i : i + 32]) for i in (0, 32)]
    model = helpers.MnistModel()
    with pytest.raises(TypeError, match=r"train_loader is an iterator \(generator\), which can be read only once"):
        helpers.fit(2, 0.1, model, (b for b in batches), batches, progress=False, verbose=False)
    assert len(helpers.fit(1, 0.1, model, (b for b in batches), batches, progress=False, verbose=False)) == 1


def test_labels_on_another_device_than_the_model_get_the_devices_message():
    """to_device moves images and labels together; a loader of one's own may move only the images."""
    images, labels = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,), device="meta")
    with pytest.raises(ValueError, match="meta"):
        list(helpers.first_checked(helpers.MnistModel(), [(images, labels)]))


# ---------------------------------------------- a learner's own code: helpers' own one-line errors


class TwoOutputs(helpers.ImageClassificationBase):
    """A model whose forward returns (scores, features), as some tutorials' models do."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(784, 10)

    def forward(self, xb):
        return self.linear(xb.flatten(1)), xb


class NumberStep(helpers.Classifier):
    """The lesson's step with `.item()` at its end: it returns a float."""

    def training_step(self, batch):
        return super().training_step(batch).item()


def test_a_forward_that_returns_a_tuple_is_said_in_one_line_with_the_fix():
    train, val = small_loaders(128)
    for call in (lambda m: helpers.fit(1, 0.5, m, train, val, progress=False), lambda m: helpers.evaluate(m, val)):
        with pytest.raises(TypeError, match=r"^the model's forward returned a tuple.*scores alone") as caught:
            call(TwoOutputs())
        assert caught.value.__cause__ is None and "\n" not in str(caught.value)


def test_float64_images_with_a_float32_model_say_to_convert_the_images():
    x, y = random_images(128)
    loader = cpu_loader(x.double(), y)
    model = helpers.Classifier(nn.Sequential(nn.Flatten(), nn.Linear(784, 10)))
    before = copy.deepcopy(model)
    with pytest.raises(TypeError, match=r"differ in precision.*images\.float\(\)"):
        helpers.fit(1, 0.5, model, loader, loader, progress=False)
    assert same_weights(model, before)


def test_a_training_step_that_returns_a_number_says_to_return_the_loss_tensor():
    train, val = small_loaders(128)
    model = NumberStep(nn.Sequential(nn.Flatten(), nn.Linear(784, 10)))
    with pytest.raises(TypeError, match=r"training_step returned a float, not the loss tensor.*without \.item\(\)"):
        helpers.fit(1, 0.5, model, train, val, progress=False)


@pytest.mark.parametrize("val_loader", [None, 3])
def test_fit_without_a_validation_loader_is_refused_before_the_first_batch(val_loader):
    train, _ = small_loaders(128)
    model = helpers.MnistModel()
    steps = []
    model.register_forward_hook(lambda *args: steps.append(1))
    with pytest.raises(TypeError, match=r"^val_loader is (None|a int), not batches fit can go through"):
        helpers.fit(2, 0.5, model, train, val_loader, progress=False)
    assert not steps, "refused before any step"


def test_split_dataset_takes_a_fraction_as_scikit_learn_does_and_refuses_other_numbers_by_name():
    data = TensorDataset(*random_images(100))
    train, val = helpers.split_dataset(data, val_size=0.2)
    assert (len(train), len(val)) == (80, 20)
    assert len(helpers.split_dataset(data, val_size=0.333)[1]) == 34  # rounded up, as scikit-learn's test_size
    for bad in (1.5, "20", None):
        with pytest.raises(ValueError, match=r"^val_size is how many samples.*such as 0\.2; got"):
            helpers.split_dataset(data, val_size=bad)
