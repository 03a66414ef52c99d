"""Bad input and faults in the lesson's functions: each gets one clear message, checked before any work,
and nothing already done is lost."""

import copy
import errno
import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import helpers
import helpers_cli
import helpers_data
import helpers_speed


def _data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)


def _loader(images, labels, batch_size=64, shuffle=False):
    return helpers.DeviceResidentLoader(images, labels, batch_size, shuffle=shuffle, device="cpu")


def _same_weights(a, b):
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.fixture
def no_accelerator(monkeypatch):
    """A machine without CUDA or any accelerator, on any machine (a CUDA one included)."""
    monkeypatch.setattr(helpers, "_accelerator", lambda: None)
    monkeypatch.setattr(helpers, "accelerator_count", lambda: 0)


# ---------------------------------------------------------------------------- devices


@pytest.mark.parametrize(
    "call",
    [
        lambda: helpers.to_device(torch.ones(1), "garbage"),
        lambda: helpers.describe_device("garbage"),
        lambda: helpers.time_matmul((8,), "garbage"),
        lambda: helpers.DeviceDataLoader([], "garbage"),
        lambda: helpers.get_default_device("garbage"),
    ],
    ids=["to_device", "describe_device", "time_matmul", "DeviceDataLoader", "get_default_device"],
)
def test_a_device_name_that_is_not_one_says_what_to_use(call):
    with pytest.raises(ValueError, match=r"'garbage' is not a device name; use e.g. 'cpu'.*available here: cpu"):
        call()


def test_a_bad_device_from_the_environment_says_where_it_came_from(monkeypatch):
    monkeypatch.setenv("HELPERS_DEVICE", "garbage")
    with pytest.raises(ValueError, match=r"'garbage' \(from the environment variable HELPERS_DEVICE\) is not a"):
        helpers.get_default_device()


@pytest.mark.parametrize(
    "call",
    [lambda: helpers.to_device(torch.ones(1), "cuda"), lambda: helpers.DeviceDataLoader([1, 2], "cuda")],
    ids=["to_device", "DeviceDataLoader"],
)
def test_cuda_where_there_is_none_gets_the_colab_advice_at_once(no_accelerator, call):
    with pytest.raises(ValueError, match=r"'cuda' is not available.*Runtime > Change runtime type > GPU"):
        call()


def test_zero_repeats_is_refused_before_timing():
    with pytest.raises(ValueError, match="repeats must be a whole number of at least 1"):
        helpers.time_matmul((8,), "cpu", repeats=0)


@pytest.mark.parametrize(
    "data, match",
    [
        ({1, 2}, "got a set.*to a list"),
        ((x for x in [torch.ones(1)]), "got a generator"),
        (np.ones(3), "NumPy array.*torch.from_numpy"),
        (object(), "got a object"),
    ],
    ids=["set", "generator", "numpy", "object"],
)
def test_to_device_refuses_what_it_cannot_move(data, match):
    with pytest.raises(TypeError, match=match):
        helpers.to_device(data, "cpu")


def test_to_device_passes_plain_values_through():
    assert helpers.to_device([None, 3, 2.5, "a", b"b", True], "cpu") == [None, 3, 2.5, "a", b"b", True]


# ---------------------------------------------------------------------------- the model and its batches


@pytest.mark.parametrize("sizes", [(784, 0, 10), (784, -1, 10), (784, 32.0, 10), (0, 32, 10)])
def test_a_model_size_below_one_is_refused(sizes):
    with pytest.raises(ValueError, match="must be a whole number of at least 1"):
        helpers.MnistModel(*sizes)


def test_float64_images_say_how_to_convert():
    with pytest.raises(TypeError, match=r"images are torch.float64 but the model's weights are torch.float32.*float"):
        helpers.MnistModel()(torch.rand(4, 1, 28, 28, dtype=torch.float64))


def test_an_empty_batch_is_named_in_the_model_and_in_evaluate():
    empty = (torch.rand(0, 1, 28, 28), torch.zeros(0, dtype=torch.int64))
    with pytest.raises(ValueError, match="empty batch"):
        helpers.MnistModel()(empty[0])
    with pytest.raises(ValueError, match="empty batch"):
        helpers.evaluate(helpers.MnistModel(), [empty])


@pytest.mark.parametrize("bad", [10, -1])
def test_labels_out_of_range_are_refused_before_training(bad):
    images, labels = _data(64)
    labels[5] = bad
    model = helpers.MnistModel()
    start = copy.deepcopy(model)
    with pytest.raises(ValueError, match="labels must be class indices from 0 to 9 .*10 outputs"):
        helpers.fit(1, 0.1, model, [(images, labels)], [(images, labels)])
    assert _same_weights(model, start), "nothing trained"
    with pytest.raises(ValueError, match="from 0 to 9"):
        helpers.evaluate(model, [(images, labels)])


def test_labels_of_shape_n_by_1_and_labels_in_a_list():
    images, labels = _data(8)
    with pytest.raises(ValueError, match=r"shape \[N\]; got shape \[8, 1\].*squeeze\(1\)"):
        helpers.evaluate(helpers.MnistModel(), [(images, labels[:, None])])
    with pytest.raises(TypeError, match="labels must be a tensor, got a list.*torch.tensor"):
        helpers.fit(1, 0.1, helpers.MnistModel(), [(images, labels.tolist())], [])


def test_loaders_that_yield_dicts_or_three_parts_say_what_the_loop_wants():
    images, labels = _data(8)
    dicts = [{"image": images, "label": labels}]
    with pytest.raises(TypeError, match=r"yields dicts \(keys \['image', 'label'\]\).*\(images, labels\) pairs"):
        helpers.fit(1, 0.1, helpers.MnistModel(), dicts, dicts)
    triples = DataLoader(TensorDataset(images, labels, torch.arange(8)), batch_size=4)
    with pytest.raises(TypeError, match="yields 3 parts per batch"):
        helpers.evaluate(helpers.MnistModel(), triples)


# ---------------------------------------------------------------------------- values in the data


def test_nan_in_the_data_is_the_datas_fault_not_the_learning_rates():
    images, labels = _data(256)
    images[200, 0, 3, 3] = float("nan")  # in the 4th batch of 64: the first batch is clean
    model = helpers.MnistModel()
    start = copy.deepcopy(model)
    with pytest.raises(helpers.NonFiniteData, match=r"training data holds NaN.*batch 3.*not the learning rate") as info:
        helpers.fit(2, 0.1, model, _loader(images, labels), _loader(*_data(64, seed=1)))
    assert info.value.history == [] and _same_weights(model, start), "the weights it started with"
    assert "lower learning rate" not in str(info.value)


def test_nan_in_the_first_batch_stops_before_a_step():
    images, labels = _data(128)
    images[0, 0, 0, 0] = float("inf")
    model = helpers.MnistModel()
    start = copy.deepcopy(model)
    with pytest.raises(helpers.NonFiniteData, match="first batch holds NaN or infinite"):
        helpers.fit(1, 0.1, model, _loader(images, labels), _loader(images, labels))
    assert _same_weights(model, start)


def test_evaluate_on_nan_data_says_so():
    images, labels = _data(128)
    images[100, 0, 0, 0] = float("nan")
    with pytest.raises(helpers.NonFiniteData, match="validation data holds NaN.*batch 1"):
        helpers.evaluate(helpers.MnistModel(), _loader(images, labels))


def test_unscaled_pixels_get_a_warning_that_names_the_fix():
    images, labels = _data(64)
    with pytest.warns(UserWarning, match=r"pixel values go up to 25\d.*ToTensor\(\).*255"):
        helpers.evaluate(helpers.MnistModel(), [(images * 255, labels)])


# ---------------------------------------------------------------------------- checkpoints


def test_a_checkpoint_missing_keys_is_named_incomplete(tmp_path):
    path = tmp_path / "c.ckpt"
    torch.save({"format": helpers.CHECKPOINT_FORMAT, "model": helpers.MnistModel().state_dict()}, path)
    with pytest.raises(ValueError, match="incomplete checkpoint: it lacks optimizer, epoch, history"):
        helpers.load_checkpoint(path, helpers.MnistModel())


def test_a_newer_checkpoint_format_says_to_update(tmp_path):
    path = tmp_path / "c.ckpt"
    torch.save({"format": "helpers-checkpoint-2"}, path)
    with pytest.raises(ValueError, match="format 'helpers-checkpoint-2'.*update helpers.py"):
        helpers.load_checkpoint(path)


def test_an_optimizer_that_does_not_fit_loads_nothing(tmp_path):
    model = helpers.MnistModel()
    adam = torch.optim.Adam(model.parameters())
    model.training_step(_data(8))["loss"].backward()
    adam.step()
    helpers.save_checkpoint(tmp_path / "adam.ckpt", model, adam, epoch=1)
    other = helpers.MnistModel()
    start = copy.deepcopy(other)
    sgd = torch.optim.SGD(other.parameters(), 0.1)
    sgd_before = copy.deepcopy(sgd.state_dict())
    with pytest.raises(ValueError, match="holds the state of Adam, which does not fit this SGD"):
        helpers.load_checkpoint(tmp_path / "adam.ckpt", other, sgd)
    assert _same_weights(other, start), "the model's weights are untouched"
    assert sgd.state_dict() == sgd_before


def _failing_open(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return fail


def test_a_full_disk_at_a_save_keeps_the_completed_epochs(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    train = _loader(*_data(128))
    model = helpers.MnistModel()
    helpers.fit(1, 0.1, model, train, train, checkpoint_path=path, verbose=False)
    monkeypatch.setattr(helpers_data, "open", _failing_open(errno.ENOSPC), raising=False)
    with pytest.raises(helpers.CheckpointNotSaved, match=r"epoch 1 finished.*No space left.*free some disk") as info:
        helpers.fit(3, 0.1, model, train, train, checkpoint_path=path, verbose=False)
    assert len(info.value.history) == 2 and helpers.load_checkpoint(path)["epoch"] == 1


def test_a_read_only_checkpoint_folder_names_the_checkpoint_not_a_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setattr(helpers_data, "open", _failing_open(errno.EACCES), raising=False)
    with pytest.raises(OSError) as info:
        helpers.save_checkpoint(tmp_path / "run.ckpt", helpers.MnistModel())
    message = str(info.value)
    assert "cannot write" in message and "run.ckpt: Permission denied" in message and ".tmp-" not in message
    assert "writable" in message


def test_temporary_files_of_dead_processes_are_cleaned_on_the_next_write(tmp_path):
    dead = tmp_path / ".run.ckpt.tmp-999999999"  # no such process
    alive = tmp_path / f".run.ckpt.tmp-{os.getppid()}"  # a process that runs: its write may be under way
    other = tmp_path / ".other.ckpt.tmp-999999999"
    for path in (dead, alive, other):
        path.write_bytes(b"x" * 100)
    helpers.save_checkpoint(tmp_path / "run.ckpt", helpers.MnistModel())
    assert not dead.exists() and alive.exists() and other.exists()


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5])
def test_a_seed_out_of_range_is_refused(seed):
    with pytest.raises(ValueError, match="seed must be a whole number from 0 to 2\\*\\*63 - 1"):
        helpers.seed_everything(seed)


def test_a_speedrun_of_no_epochs_is_refused_before_loading_data(tmp_path):
    with pytest.raises(ValueError, match="epochs must be at least 1 for a speedrun"):
        helpers_speed.speedrun(root=tmp_path / "nothing-here", epochs=0)


def test_a_benchmark_on_a_device_that_is_not_one_fails_before_loading_data(tmp_path):
    argv = ["--data", str(tmp_path / "no-data"), "bench", "--devices", "garbage", "--out", str(tmp_path / "out")]
    with pytest.raises(ValueError, match="'garbage' is not a device name"):
        helpers_cli.main(argv)
    assert not (tmp_path / "no-data").exists()
