"""helpers.py, section 1 (notebooks 01 and 04): seeding, finding and describing devices, timing a product, moving
data to a device. Every device name that is not one, or is not here, is refused with one clear message."""

import collections
import random

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import helpers

# ---------------------------------------------------------------------------- seeding


def test_seed_everything_repeats():
    helpers.seed_everything(7)
    a = (random.random(), torch.rand(3))
    helpers.seed_everything(7)
    b = (random.random(), torch.rand(3))
    assert a[0] == b[0] and torch.equal(a[1], b[1])


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5])
def test_a_seed_out_of_range_is_refused(seed):
    with pytest.raises(ValueError, match="seed must be a whole number from 0 to 2\\*\\*63 - 1"):
        helpers.seed_everything(seed)


@pytest.mark.parametrize("seed", [-1, 2**63])
def test_a_seed_is_checked_in_one_place_with_one_wording(seed):
    """helpers.check_seed says what a seed must be; seed_everything and the notebooks' settings refuse a bad one with
    its words."""
    import series_setup

    words = "must be a whole number from 0 to 2**63 - 1, such as 42"
    assert helpers.check_seed(7) == 7 and helpers.check_seed(2**63 - 1) == 2**63 - 1
    refusals = []
    for check in (
        lambda: helpers.check_seed(seed),
        lambda: helpers.seed_everything(seed),
        lambda: series_setup.check_settings({"seed": seed}, {"seed": series_setup.SEED_SETTING}),
    ):
        with pytest.raises(ValueError) as refused:
            check()
        refusals.append(str(refused.value))
    assert all(words in refusal for refusal in refusals), refusals


# ---------------------------------------------------------------------------- finding the device


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
    source = r"\(from the environment variable HELPERS_DEVICE\) is not available on this machine; available: cpu"
    with pytest.raises(ValueError, match=rf"'{name}' {source}"):  # the variable it came from, named
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


def test_nonsense_device_name():
    with pytest.raises(ValueError, match="'banana' is not a device name"):
        helpers.get_default_device("banana")


@pytest.fixture
def no_accelerator(monkeypatch):
    """A machine without CUDA or any accelerator, on any machine (a CUDA one included)."""
    monkeypatch.setattr(helpers, "_accelerator", lambda: None)
    monkeypatch.setattr(helpers, "accelerator_count", lambda: 0)


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


# ------------------------------------------------------------------------ describing, synchronising and timing a device


def test_describe_cpu():
    text = helpers.describe_device("cpu")
    assert text.startswith("cpu:") and f"{torch.get_num_threads()} PyTorch threads" in text


def test_describe_run_says_which_device_this_run_computes_on_and_what_gpu_figures_are():
    text = helpers.describe_run("cpu")
    assert text.startswith("This run computes on ") and "\n" not in text, "one line, true whenever it runs"
    assert helpers.describe_device("cpu") in text and torch.__version__ in text
    assert "No GPU here" in text and "what to expect" in text


@pytest.mark.cuda
def test_describe_run_on_cuda_says_the_gpu_figures_were_measured():
    text = helpers.describe_run("cuda")
    assert "cuda:" in text and "measured on this cuda device" in text and "No GPU" not in text


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


def test_time_matmul_rows(monkeypatch):
    """One row per size, in order: `seconds` the median of the timed products and `gflops` an n x n product's 2n^3
    operations over it. A clock on which the products take 3, 1 and 2 ms gives 2 ms; no speed is claimed."""
    rows = helpers.time_matmul([16, 64], "cpu", repeats=3)
    assert [(r["device"], r["size"]) for r in rows] == [("cpu", 16), ("cpu", 64)]
    assert all(r["gflops"] == pytest.approx(2 * r["size"] ** 3 / r["seconds"] / 1e9) for r in rows)
    took, clock = iter([0.003, 0.001, 0.002] * 2), {"now": 0.0, "calls": 0}

    def perf_counter():  # every second call ends a product: the time moves on by what it took
        clock["calls"] += 1
        clock["now"] += next(took) if clock["calls"] % 2 == 0 else 0.0
        return clock["now"]

    monkeypatch.setattr(helpers.time, "perf_counter", perf_counter)
    timed = helpers.time_matmul([16, 64], "cpu", repeats=3)
    assert [r["seconds"] for r in timed] == pytest.approx([0.002, 0.002])
    assert [r["gflops"] for r in timed] == pytest.approx([2 * 16**3 / 0.002 / 1e9, 2 * 64**3 / 0.002 / 1e9])
    with pytest.raises(ValueError, match="not available"):
        helpers.time_matmul([16], "cuda:9")


def test_zero_repeats_is_refused_before_timing():
    with pytest.raises(ValueError, match="repeats must be a whole number of at least 1"):
        helpers.time_matmul((8,), "cpu", repeats=0)


# -------------------------------------------------------------------------- moving data: to_device and DeviceDataLoader


def test_to_device_keeps_container_types():
    Pair = collections.namedtuple("Pair", "x y")
    data = {"a": [torch.ones(1), (torch.zeros(2), 3)], "p": Pair(torch.ones(1), "label")}
    moved = helpers.to_device(data, "cpu")
    assert isinstance(moved["a"], list) and isinstance(moved["a"][1], tuple)
    assert isinstance(moved["p"], Pair) and moved["p"].y == "label" and moved["a"][1][1] == 3
    assert torch.equal(moved["a"][0], torch.ones(1))
    model = nn.Linear(2, 2)
    assert helpers.to_device(model, "cpu") is model


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


@pytest.mark.cuda
def test_pinned_batches_copy_to_cuda_without_blocking():
    dl = DataLoader(TensorDataset(torch.rand(64, 1, 28, 28), torch.arange(64) % 10), 32, pin_memory=True)
    images, labels = next(iter(dl))
    assert images.is_pinned()
    moved = helpers.to_device([images, labels], "cuda")
    helpers.synchronize("cuda")
    assert moved[0].device.type == "cuda" and torch.equal(moved[0].cpu(), images)
    assert helpers.loader_settings("cuda")["pin_memory"] is True


def test_device_data_loader_passes_through():
    dl = DataLoader(TensorDataset(torch.arange(10.0), torch.arange(10)), batch_size=4)
    ddl = helpers.DeviceDataLoader(dl, "cpu")
    assert len(ddl) == 3 and ddl.batch_size == 4 and ddl.dataset is dl.dataset
    assert [len(b[0]) for b in ddl] == [4, 4, 2]
    assert all(b[0].device.type == "cpu" for b in ddl)


def test_to_device_with_its_arguments_swapped_says_so():
    """to_device('cpu', images) printed a 2,589-character tensor and 'is not a device name'."""
    images = torch.rand(128, 1, 28, 28)
    with pytest.raises(TypeError, match=r"tensor of shape \[128, 1, 28, 28\]: are the arguments swapped\?") as err:
        helpers.to_device("cpu", images)
    assert len(str(err.value)) < 250
