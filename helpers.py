"""The lesson's module for the series "Training a neural network on a GPU with PyTorch" (notebooks 01-08).

In the lesson's order: devices, data, the model, evaluate and fit, checkpoints, plots and predictions, error analysis,
data kept on the device. The lesson's names (`get_default_device`, `to_device`, `fit`, ...), with the original's flaws
fixed: evaluation under `eval()` and `no_grad()`, averages over samples not batches, the accelerator by default, a
seeded split, `pin_memory` only with CUDA, `fit` through the model's `training_step`, one clear error for bad input.
It imports only `helpers_data`; `helpers_run`, `helpers_speed` and `helpers_ddp` import it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import itertools
import math
import numbers
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Subset, random_split
from torchvision.datasets import MNIST, FashionMNIST
from torchvision.transforms import ToTensor

import helpers_data


@dataclasses.dataclass(frozen=True)
class LessonSettings:
    """The lesson's hyperparameters: one place for every default that reproduces its run (notebook 05)."""

    epochs: tuple[int, ...] = (5, 5)  # fit(5, 0.5) then fit(5, 0.1)
    lrs: tuple[float, ...] = (0.5, 0.1)
    batch_size: int = 128
    val_batch_size: int = 256
    val_size: int = 10_000
    seed: int = 42


LESSON = LessonSettings()


def check_seed(seed: Any) -> int:
    """`seed` as an int; a ValueError unless it is a whole number from 0 to 2**63 - 1 (notebook 02)."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be a whole number from 0 to 2**63 - 1, such as 42; got {seed!r}")
    return int(seed)


def seed_everything(seed: int = LESSON.seed) -> None:
    """Seed Python, NumPy and PyTorch (all devices) so a run repeats on the same machine (notebook 02)."""
    seed = check_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds CUDA, MPS and the other accelerators


def _accelerator() -> torch.device | None:
    """The accelerator PyTorch can use here (CUDA, Apple MPS, Intel XPU, ...), or None."""
    return torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None


def accelerator_count() -> int:
    """How many devices the accelerator has, 0 without one (notebook 10: one process each)."""
    return torch.accelerator.device_count() if _accelerator() is not None else 0


def available_devices() -> list[str]:
    """Names of the devices PyTorch can use here, e.g. ['cpu', 'cuda:0', 'cuda:1'] or ['cpu', 'mps'] (notebook 01)."""
    accelerator = _accelerator()
    if accelerator is None:
        return ["cpu"]
    if accelerator.type == "mps":
        return ["cpu", "mps"]
    return ["cpu"] + [f"{accelerator.type}:{i}" for i in range(accelerator_count())]


def _check_device(device: torch.device, source: str = "") -> torch.device:
    """Return `device` if it exists on this machine, else raise ValueError naming what does (and where it came from)."""
    if device.type == "cpu":
        return device
    accelerator = _accelerator()
    same_type = accelerator is not None and device.type == accelerator.type
    if same_type and (device.index is None or device.index < accelerator_count()):
        return device
    raise ValueError(
        f"Device {str(device)!r}{source} is not available on this machine; available: "
        f"{', '.join(available_devices())}. In Colab choose Runtime > Change runtime type > GPU, or ask for one of "
        "the available devices."
    )


def as_device(device: str | torch.device, source: str = "") -> torch.device:
    """`device` as a torch.device that exists here (notebook 01); a ValueError that says what to ask for instead."""
    if isinstance(device, torch.Tensor):
        raise TypeError(
            f"a device is a name such as 'cpu' or 'cuda', or a torch.device; got a tensor of shape "
            f"{list(device.shape)}: are the arguments swapped? to_device(data, device) takes the data first"
        )
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"{device!r}{source} is not a device name; use e.g. 'cpu', 'cuda', 'cuda:1' or 'mps' "
            f"(available here: {', '.join(available_devices())})"
        ) from None
    return _check_device(parsed, source)


def get_default_device(prefer: str | torch.device | None = None) -> torch.device:
    """The accelerator if there is one, else the CPU (notebook 01); `prefer` or $HELPERS_DEVICE overrides ("auto",
    the notebooks' setting for the best here, does not)."""
    if prefer and prefer != "auto":
        return as_device(prefer)
    if os.environ.get("HELPERS_DEVICE"):
        return as_device(os.environ["HELPERS_DEVICE"], " (from the environment variable HELPERS_DEVICE)")
    return _accelerator() or torch.device("cpu")


def describe_device(device: str | torch.device | None = None) -> str:
    """One line about a device: GPU name, memory and compute capability, or CPU and threads (notebook 01)."""
    device = get_default_device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return (
            f"cuda:{index} {props.name}, {props.total_memory / 2**30:.1f} GiB, "
            f"compute capability {props.major}.{props.minor}"
        )
    if device.type == "mps":
        return f"mps: Apple GPU ({platform.machine()}, macOS {platform.mac_ver()[0]})"
    if device.type != "cpu":
        return f"{device}: {device.type} accelerator"
    cpu = platform.processor() or platform.machine()
    return f"cpu: {cpu}, {os.cpu_count()} logical cores, {torch.get_num_threads()} PyTorch threads"


def describe_run(device: str | torch.device | None = None) -> str:
    """One line for a notebook's set-up cell: the device this run computes on, and what it means for GPU figures."""
    device = get_default_device(device)
    where = f"This run computes on {describe_device(device)}, with PyTorch {torch.__version__}."
    if device.type == "cpu":
        return where + " No GPU here: where the text speaks of a GPU, it says what to expect."
    return where + f" The GPU figures below are measured on this {device.type} device."


def synchronize(device: str | torch.device) -> None:
    """Wait for queued work on an accelerator to finish, so that a timer measures it (notebook 01)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    elif device.type != "cpu":
        torch.accelerator.synchronize(device)


def time_matmul(
    sizes: Sequence[int] = (128, 512, 1024, 2048), device: str | torch.device = "cpu", repeats: int = 5
) -> list[dict]:
    """Median seconds (after a warm-up, synchronised) for an n x n float32 matrix product (notebook 01)."""
    device = as_device(device)
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number of at least 1 (a median needs a timing), got {repeats!r}")
    rows = []
    for n in sizes:
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        a @ b  # warm-up: the library starts up and picks its method on the first call; time the rest
        times = []
        for _ in range(repeats):
            synchronize(device)
            t0 = time.perf_counter()
            a @ b
            synchronize(device)
            times.append(time.perf_counter() - t0)
        seconds = statistics.median(times)
        rows.append({"device": str(device), "size": n, "seconds": seconds, "gflops": 2 * n**3 / seconds / 1e9})
    return rows


def model_device(model: nn.Module) -> torch.device:
    """The device that holds the model's parameters (the CPU for a model without any) (notebook 04)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def to_device(data: Any, device: str | torch.device, non_blocking: bool | None = None) -> Any:
    """Move tensors and modules to `device`, recursing into lists, tuples and dicts (notebook 04).

    Modules move in place (and are returned too); tensors are copied, so reassign them.
    `non_blocking` defaults to True only where it helps: pinned CPU memory going to CUDA.
    """
    device = as_device(device)
    if isinstance(data, nn.Module):
        return data.to(device)
    if isinstance(data, torch.Tensor):
        if non_blocking is None:
            non_blocking = device.type == "cuda" and data.device.type == "cpu" and data.is_pinned()
        return data.to(device, non_blocking=non_blocking)
    if isinstance(data, dict):
        return type(data)((k, to_device(v, device, non_blocking)) for k, v in data.items())
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(to_device(x, device, non_blocking) for x in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_device(x, device, non_blocking) for x in data)
    if data is None or isinstance(data, (int, float, complex, str, bytes)):
        return data  # nothing to move
    if isinstance(data, np.ndarray):
        raise TypeError("to_device got a NumPy array: make it a tensor first, with torch.from_numpy(array)")
    raise TypeError(
        f"to_device moves tensors and modules, and lists, tuples and dicts of them; got a {type(data).__name__}. "
        "Convert it first (a set or a generator to a list, for example)"
    )


class DeviceDataLoader:
    """Wrap a data loader so that every batch it yields is already on `device` (notebook 04)."""

    def __init__(self, dl: Iterable, device: str | torch.device):
        self.dl = dl
        self.device = as_device(device)  # a device this machine lacks fails here, not at the first batch

    def __iter__(self) -> Iterator:
        for batch in self.dl:
            yield to_device(batch, self.device)

    def __len__(self) -> int:
        return len(self.dl)

    @property
    def dataset(self) -> Dataset:
        return self.dl.dataset

    @property
    def batch_size(self) -> int | None:
        return self.dl.batch_size

    @property
    def generator(self) -> torch.Generator | None:
        return getattr(self.dl, "generator", None)


_TO_TENSOR = ToTensor()


def load_mnist(root: str | Path = "data", train: bool = True, transform: Callable | None = _TO_TENSOR) -> MNIST:
    """torchvision's MNIST (60,000 train or 10,000 test images), downloaded into `root` the first time (notebook 02)."""
    helpers_data.ensure_mnist(root)
    return MNIST(str(Path(root).expanduser()), train=train, transform=transform)


def load_fashion_mnist(
    root: str | Path = "data", train: bool = True, transform: Callable | None = _TO_TENSOR
) -> FashionMNIST:
    """torchvision's Fashion-MNIST (clothes in MNIST's format), downloaded into `root` the first time (notebook 02)."""
    helpers_data.ensure_fashion_mnist(root)
    return FashionMNIST(str(Path(root).expanduser()), train=train, transform=transform)


def split_dataset(
    dataset: Dataset, val_size: int = LESSON.val_size, seed: int = LESSON.seed, limit: int | None = None
) -> tuple[Subset, Subset]:
    """Seeded split (train, validation) (notebook 02); `val_size`: a count or a fraction; `limit`: train on fewer."""
    if isinstance(val_size, float) and 0 < val_size < 1:
        val_size = math.ceil(val_size * len(dataset))  # scikit-learn's rounding of test_size
    if not isinstance(val_size, numbers.Integral) or isinstance(val_size, bool):
        raise ValueError(
            f"val_size is how many samples to set aside, such as 10000, or a fraction of them between 0 and 1, such "
            f"as 0.2; got {val_size!r}"
        )
    val_size = int(val_size)
    if not 0 < val_size < len(dataset):
        raise ValueError(
            f"val_size must be between 1 and {len(dataset) - 1} for {len(dataset)} samples, got {val_size}"
        )
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(
            f"limit is how many training images to keep, a whole number of at least 1 (or None for all); got {limit!r}"
        )
    generator = torch.Generator().manual_seed(seed)
    train_set, val_set = random_split(dataset, [len(dataset) - val_size, val_size], generator=generator)
    if limit is not None:  # the first `limit` of the shuffled training images, for a quick run
        train_set = Subset(train_set, range(min(limit, len(train_set))))
    return train_set, val_set


def loader_settings(device: str | torch.device | None = None, cores: int | None = None) -> dict:
    """`num_workers`, `pin_memory` and `persistent_workers` suited to this platform and device (notebook 02).

    Pinned memory only speeds up copies to CUDA (elsewhere it only warns). Worker processes pay off
    only with cores to spare beside the training loop, so they start at 3 cores, two fewer than
    there are: notebook 02 times them. On Windows and macOS workers start by 'spawn', slow and prone
    to hang notebooks: none.
    """
    device = torch.device(device) if device is not None else get_default_device()
    cores = max(1, os.cpu_count() or 1) if cores is None else max(1, cores)
    workers = min(4, cores - 2) if sys.platform.startswith("linux") and cores > 2 else 0
    return {"num_workers": workers, "pin_memory": device.type == "cuda", "persistent_workers": workers > 0}


def make_loaders(
    train_set: Dataset,
    val_set: Dataset,
    batch_size: int = LESSON.batch_size,
    val_batch_size: int = LESSON.val_batch_size,
    device: str | torch.device | None = None,
    seed: int = LESSON.seed,
    **overrides: Any,
) -> tuple[DataLoader, DataLoader]:
    """Seeded loaders of the lesson's batches: training 128, shuffled each epoch; validation 256 (notebook 02)."""
    settings = loader_settings(device) | overrides
    if settings.get("num_workers", 0) == 0:
        settings["persistent_workers"] = False
    generator = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(train_set, batch_size, shuffle=True, generator=generator, **settings)
    return train_loader, DataLoader(val_set, val_batch_size, **settings)


def accuracy(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Fraction of rows of `outputs` whose highest score is at the label (notebook 03): a 0-d tensor, on the device."""
    if outputs.dim() != 2 or labels.dim() != 1 or len(outputs) != len(labels):
        raise ValueError(
            f"accuracy wants scores [N, classes] and labels [N]; got {list(outputs.shape)} and {list(labels.shape)}"
        )
    return (outputs.argmax(dim=1) == labels).float().mean()


class ImageClassificationBase(nn.Module):
    """The lesson's steps for any image classifier: subclass it and write `forward` (notebook 03).

    The course's own name for it (its next lesson's base class). `training_step` returns the loss, as the
    lesson teaches. `validation_step` also returns the batch's size, so that `validation_epoch_end` weighs
    every image alike, and it reads the device once for the whole epoch.
    """

    def training_step(self, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        out = self(images)  # generate predictions
        return F.cross_entropy(out, labels)  # calculate loss

    def validation_step(self, batch: Sequence[torch.Tensor]) -> dict[str, torch.Tensor | int]:
        images, labels = batch
        out = self(images)
        loss = F.cross_entropy(out, labels).detach()
        return {"val_loss": loss, "val_acc": accuracy(out, labels), "n": len(labels)}

    def validation_epoch_end(self, outputs: Sequence[dict]) -> dict[str, float]:
        sizes = torch.tensor([float(x["n"]) for x in outputs], device=outputs[0]["val_loss"].device)
        epoch_loss = torch.stack([x["val_loss"] for x in outputs]).float() @ sizes / sizes.sum()  # images, not batches
        epoch_acc = torch.stack([x["val_acc"] for x in outputs]).float() @ sizes / sizes.sum()
        loss, acc = torch.stack([epoch_loss, epoch_acc]).tolist()  # the one read of the device
        return {"val_loss": loss, "val_acc": acc}

    def epoch_end(self, epoch: int, result: dict) -> None:
        extra = f", train_loss: {result['train_loss']:.4f}" if "train_loss" in result else ""
        took = f", {result['epoch_s']:.1f}s" if "epoch_s" in result else ""
        print(f"Epoch [{epoch}]{extra}, val_loss: {result['val_loss']:.4f}, val_acc: {result['val_acc']:.4f}{took}")


class Classifier(ImageClassificationBase):
    """Any network, such as an `nn.Sequential`, with the lesson's steps, so that `fit` trains it (notebook 05)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        if not isinstance(net, nn.Module):
            made = ": a function that makes the network must end with return, to give it back" if net is None else ""
            raise TypeError(f"Classifier wants a network, an nn.Module such as nn.Sequential(...); got {net!r}{made}")
        self.net = net

    def forward(self, xb: torch.Tensor) -> torch.Tensor:
        return self.net(xb)


class MnistModel(ImageClassificationBase):
    """Feedforward network with one hidden layer: 784 -> 32 (ReLU) -> 10 (notebook 03)."""

    def __init__(self, input_size: int = 784, hidden_size: int = 32, out_size: int = 10):
        super().__init__()
        sizes = {"input_size": input_size, "hidden_size": hidden_size, "out_size": out_size}
        for name, size in sizes.items():
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {size!r}")
        self.linear1 = nn.Linear(input_size, hidden_size)  # hidden layer
        self.linear2 = nn.Linear(hidden_size, out_size)  # output layer

    def forward(self, xb: torch.Tensor) -> torch.Tensor:
        if not xb.is_floating_point():
            raise TypeError(
                f"MnistModel wants images as floats scaled to [0, 1]; got {xb.dtype}. Use the ToTensor() "
                "transform, or convert raw pixels with images.float() / 255"
            )
        if xb.dtype != self.linear1.weight.dtype:
            raise TypeError(
                f"the images are {xb.dtype} but the model's weights are {self.linear1.weight.dtype}: convert the "
                "images with images.float() (or the model with model.to(images.dtype))"
            )
        if xb.dim() == 0 or xb.size(0) == 0:
            raise ValueError(f"MnistModel got an empty batch (shape {list(xb.shape)}): a batch needs 1 image or more")
        flat = xb.reshape(xb.size(0), -1) if xb.dim() > 1 else xb  # flatten the image tensors
        if flat.dim() != 2 or flat.size(1) != self.linear1.in_features:
            raise ValueError(
                f"MnistModel expects a batch of {self.linear1.in_features} values per image, such as "
                f"[N, 1, 28, 28] or [N, {self.linear1.in_features}]; got shape {list(xb.shape)}"
            )
        return self.linear2(F.relu(self.linear1(flat)))


class NonFiniteData(ValueError):
    """The data holds NaN or infinite values (notebook 05); `.history` holds the epochs `fit` completed before."""

    def __init__(self, message: str, history: list[dict] | None = None):
        super().__init__(message)
        self.history = history or []


def first_checked(model: nn.Module, loader: Iterable) -> Iterator:
    """The batches of `loader`, the first checked against `model` in one device read (notebooks 04, 05).

    An empty loader, a batch that is no (images, labels) pair, labels outside the model's classes, model and batch on
    different devices, or NaN pixels raise one clear error; pixels up to 255 warn."""
    if not hasattr(model, "validation_step"):
        raise TypeError(
            f"a {type(model).__name__} has none of the lesson's methods (training_step, validation_step, ...): wrap "
            "it, helpers.Classifier(model), or subclass helpers.ImageClassificationBase and write its forward"
        )
    batches = iter(loader)
    first = next(batches, None)
    if first is None:
        raise ValueError("an empty loader: it yielded no batches, so there is nothing to train or evaluate on")
    if not isinstance(first, (list, tuple)) or len(first) != 2:
        raise _not_a_pair(first)
    images, labels = first
    if not isinstance(labels, torch.Tensor) or labels.dtype not in (torch.int64, torch.uint8) or labels.dim() != 1:
        raise _not_class_indices(labels)
    weights = next(model.parameters(), None)
    if weights is not None and isinstance(images, torch.Tensor) and images.device != weights.device:
        raise _on_two_devices(weights.device, images.device)
    if weights is not None and labels.device != weights.device:  # to_device moves both; a loader of one's own may not
        raise _on_two_devices(weights.device, labels.device)
    if isinstance(images, torch.Tensor) and images.is_floating_point() and images.numel() and len(labels):
        finite = torch.isfinite(images)
        low, high, top, all_finite = torch.stack(
            [labels.min().float(), labels.max().float(), images.where(finite, 0).max(), finite.all().float()]
        ).tolist()  # the one read
        outputs = next((m.out_features for m in reversed(list(model.modules())) if isinstance(m, nn.Linear)), None)
        if outputs is not None and (low < 0 or high >= outputs):
            raise ValueError(
                f"labels must be class indices from 0 to {outputs - 1} (the model has {outputs} outputs); this batch "
                f"has labels from {low:g} to {high:g}. Check the labels, or give the model out_size={high:g} + 1"
            )
        if not all_finite:
            raise NonFiniteData(
                "the first batch holds NaN or infinite pixel values: no loss can be computed from them. Clean the "
                "data (e.g. images.nan_to_num(0.0)) or drop those images"
            )
        if top > 10:
            warnings.warn(
                f"pixel values go up to {top:g}: the lesson's model expects images scaled to [0, 1]. Use the "
                "ToTensor() transform, or divide raw pixels by 255",
                stacklevel=3,
            )
    return itertools.chain([first], batches)


def _not_a_pair(batch: Any) -> TypeError:
    """The error for a batch that is not an (images, labels) pair."""
    if isinstance(batch, dict):
        return TypeError(
            f"the loader yields dicts (keys {list(batch)}); the lesson's loop wants (images, labels) pairs. "
            "Make the dataset return (image, label), or wrap the loader: ((b['image'], b['label']) for b in loader)"
        )
    parts = f"{len(batch)} parts" if isinstance(batch, (list, tuple)) else f"a {type(batch).__name__}"
    return TypeError(
        f"the loader yields {parts} per batch; the lesson's loop wants (images, labels) pairs. "
        "Drop the extra parts, e.g. ((x, y) for x, y, *_ in loader)"
    )


def _not_class_indices(labels: Any) -> Exception:
    """The error for labels that are not a tensor of shape [N] holding integer class indices."""
    if not isinstance(labels, torch.Tensor):
        return TypeError(f"labels must be a tensor, got a {type(labels).__name__}: convert them with torch.tensor()")
    if labels.dtype not in (torch.int64, torch.uint8):
        return TypeError(
            f"labels must be class indices 0..9 stored as integers (torch.int64), such as tensor([5, 0, 4]); "
            f"got {labels.dtype}. Convert them with labels.long()"
        )
    return ValueError(
        f"labels must be one class index per image, of shape [N]; got shape {list(labels.shape)}. "
        "For [N, 1] use labels.squeeze(1)"
    )


def _on_two_devices(model_at: torch.device, data_at: torch.device) -> ValueError:
    """The error for a model and a batch on different devices, with the fix that keeps the weights."""
    if model_at.type == "meta":
        fix = f"a model on meta has shapes but no weights: create it again on {data_at}"
    elif data_at.type == "meta":
        fix = "meta holds shapes but no values, so nothing can be computed from it: give the loader real data"
    elif data_at.type == "cpu":
        fix = f"send the batches to the model with DeviceDataLoader(loader, {str(model_at)!r})"
    else:
        fix = f"move the model to the data with to_device(model, {str(data_at)!r})"
    return ValueError(f"the model is on {model_at} but the batch is on {data_at}: {fix}")


def _first_non_finite(loader: Iterable) -> int | None:
    """The index of the first batch of `loader` with a NaN or infinite image value, or None."""
    for i, batch in enumerate(loader):
        images = batch[0] if isinstance(batch, (list, tuple)) else batch
        if isinstance(images, torch.Tensor) and images.is_floating_point() and not torch.isfinite(images).all():
            return i
    return None


def _blame_the_data(loader: Iterable, name: str) -> None:
    """Raise NonFiniteData if a NaN loss comes from NaN or infinite values in `loader`'s images."""
    batch = _first_non_finite(loader)
    if batch is not None:
        raise NonFiniteData(
            f"the {name} data holds NaN or infinite pixel values (first in batch {batch}), so the loss is NaN: "
            "the data is the cause, not the learning rate. Clean it (e.g. images.nan_to_num(0.0)) or drop those images"
        )


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block: `model.eval()` and no autograd. Afterwards: the mode the model had before (notebook 05)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def evaluate(model: nn.Module, val_loader: Iterable) -> dict[str, float]:
    """The lesson's `evaluate`, in eval mode and without autograd, averaged over images (notebook 05)."""
    with eval_mode(model):
        try:
            outputs = [model.validation_step(batch) for batch in first_checked(model, val_loader)]
        except Exception as error:
            if explained := _explained(error):
                raise explained from None
            raise
    result = model.validation_epoch_end(outputs)
    if not math.isfinite(result["val_loss"]) and all(torch.isfinite(p).all() for p in model.parameters()):
        _blame_the_data(val_loader, "validation")
    return result


class TrainingDiverged(FloatingPointError):
    """The loss became NaN or infinite; `.history` holds the epochs completed before it (notebook 08)."""

    def __init__(self, message: str, history: list[dict]):
        super().__init__(message)
        self.history = history


class CheckpointNotSaved(OSError):
    """An epoch finished but its checkpoint could not be written (notebook 08); `.history` has the completed epochs."""

    def __init__(self, message: str, history: list[dict]):
        super().__init__(message)
        self.history = history


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during `fit`; `.history` holds every completed epoch, and the weights match them (notebook 08)."""

    def __init__(self, message: str, history: list[dict]):
        super().__init__(message)
        self.history = history


def check_hparams(epochs: Any, lr: Any, opt_func: Any = torch.optim.SGD) -> tuple[int, float]:
    """`epochs` (a whole number >= 0) and `lr` (positive, finite) as Python numbers, else ValueError (notebook 05).

    One-number tensors are taken; `opt_func` must be an optimizer class, not an instance (TypeError)."""
    if isinstance(lr, torch.Tensor) and lr.numel() == 1:
        lr = lr.item()
    if not isinstance(epochs, numbers.Integral) or isinstance(epochs, bool) or epochs < 0:
        raise ValueError(f"epochs must be a whole number >= 0, got {epochs!r}")
    if not isinstance(lr, numbers.Real) or isinstance(lr, bool) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr (the learning rate) must be a positive number such as 0.5 or 0.1, got {lr!r}")
    if isinstance(opt_func, torch.optim.Optimizer):
        raise TypeError(
            f"opt_func is the optimizer's class, which fit calls with the model's parameters and lr; got a "
            f"{type(opt_func).__name__} already made: pass torch.optim.{type(opt_func).__name__}, or "
            "functools.partial(torch.optim.SGD, momentum=0.9) for other settings"
        )
    return int(epochs), float(lr)


def _check_loaders(epochs: int, **loaders: Iterable) -> None:
    """Refuse, before the first batch, what is no loader, and an iterator that one epoch would exhaust."""
    for name, loader in loaders.items():
        if not isinstance(loader, Iterable):
            raise TypeError(
                f"{name} is {_short(loader)}, not batches fit can go through: fit trains on train_loader and "
                f"evaluates on val_loader after each epoch; pass a DataLoader (or a list of batches) for each"
            )
        if epochs > 1 and isinstance(loader, Iterator):
            raise TypeError(
                f"{name} is an iterator ({type(loader).__name__}), which can be read only once, and fit reads it in "
                f"each of the {epochs} epochs: pass a DataLoader, or a list of the batches (list(...))"
            )


def _short(value: Any) -> str:
    """`value` as a message names it: None, or its kind."""
    return "None" if value is None else f"a {type(value).__name__}"


def _explained(error: BaseException) -> Exception | None:
    """The series' one-line error for a raw one from a learner's model or step (a tuple, float64, ...), else None."""
    text = str(error).splitlines()[0] if str(error) else ""
    if isinstance(error, AttributeError) and text.endswith("object has no attribute 'backward'"):
        kind = text.split("'")[1]
        return TypeError(
            f"training_step returned a {kind}, not the loss tensor, and fit calls loss.backward() on it: return the "
            "loss itself, such as F.cross_entropy(out, labels), without .item() or float()"
        )
    if isinstance(error, TypeError) and "must be Tensor, not tuple" in text:
        return TypeError(
            "the model's forward returned a tuple where the lesson's steps want one tensor of scores, [N, classes] "
            f"({text}): make forward return the scores alone, or take them out of the tuple in training_step and "
            "validation_step"
        )
    if isinstance(error, RuntimeError) and "must have the same dtype" in text and "Double" in text:
        return TypeError(
            f"the images and the model's weights differ in precision ({text}): PyTorch's models compute in float32; "
            "convert the images with images.float() (in the dataset, or a transform), or the model with "
            "model.double()"
        )
    return None


def check_save_path(path: str | Path) -> Path:
    """Make `path`'s folder and check that a file can be written there, before any training (notebook 05)."""
    path = Path(path).expanduser()
    file = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if file is not None:
        raise ValueError(f"cannot write to {path}: {file} is a file, not a folder; give another path")
    if path.is_dir():
        raise ValueError(f"cannot write to {path}: it is a folder; give a file's path, such as {path / 'lesson.ckpt'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):  # a folder no file can be made in (/proc) fails now
            pass
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, "Permission denied")
    except OSError as err:  # OSError(errno, ...) is the subclass of that errno: PermissionError, FileExistsError, ...
        raise OSError(err.errno, f"cannot write to {path}: {err.strerror}; give a path you can write to") from None
    return path


def fit(
    epochs: int,
    lr: float,
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable,
    opt_func: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
    *,
    checkpoint_path: str | Path | None = None,
    progress: bool | None = None,
    verbose: bool = True,
) -> list[dict]:
    """The lesson's `fit` (notebook 05), which loses nothing (notebook 08): one dict per epoch.

    The history has no entry for the untrained model (the lesson starts its own with `[evaluate(...)]`; a
    checkpoint records which kind it holds). Each dict holds val_loss and val_acc, train_loss (the mean of the
    steps' losses, over images), train_s and epoch_s. With `checkpoint_path`, a checkpoint of this same call is
    resumed and every completed epoch saved there. On an error (a NaN loss: `TrainingDiverged`, or `NonFiniteData`
    when the data holds NaN; Ctrl-C: `TrainingInterrupted`; ...) the model keeps the weights of the last completed
    epoch, and the error the completed epochs, in `.history`.
    """
    epochs, lr = check_hparams(epochs, lr, opt_func)
    _check_loaders(epochs, train_loader=train_loader, val_loader=val_loader)
    optimizer = opt_func(model.parameters(), lr)
    run = {"epochs": epochs, "lr": lr, "opt_func": getattr(opt_func, "__name__", repr(opt_func))}
    checkpoint_path = Path(checkpoint_path).expanduser() if checkpoint_path else None
    history = _resume(checkpoint_path, model, optimizer, train_loader, run) if checkpoint_path else []
    kept = _weights_on_cpu(model)  # the weights of the last completed epoch, put back on an error
    try:
        for epoch in range(len(history), epochs):
            t0 = time.perf_counter()
            loss_sum, images = 0.0, 0  # summed on the device: read once per epoch, not at every step
            for batch in first_checked(model, progress_bar(train_loader, epoch, progress)):
                loss = model.training_step(batch)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                loss_sum += loss.detach() * len(batch[1])
                images += len(batch[1])
            result = {"train_loss": float(loss_sum / images), "train_s": time.perf_counter() - t0}
            result = evaluate(model, val_loader) | result | {"epoch_s": time.perf_counter() - t0}
            if not math.isfinite(result["train_loss"] + result["val_loss"]):
                raise _diverged(epoch, run, result, (train_loader, val_loader), history)
            history.append(result)
            kept = _weights_on_cpu(model)
            if checkpoint_path:
                _save_epoch(checkpoint_path, model, optimizer, history, run, train_loader)
            if verbose:
                model.epoch_end(epoch, result)
    except KeyboardInterrupt as interrupt:
        model.load_state_dict(kept)
        if isinstance(interrupt, TrainingInterrupted):
            raise
        saved = checkpoint_path and helpers_data.display_path(Path(checkpoint_path))  # short: relative where it can
        where = f" (saved in {saved}; call fit again with it to resume)" if checkpoint_path else ""
        print(f"Interrupted: kept {len(history)} completed epochs{where}")
        raise TrainingInterrupted(f"training interrupted after {len(history)} completed epochs", history) from None
    except BaseException as error:
        model.load_state_dict(kept)
        if isinstance(error, NonFiniteData):
            error.history = history
        if explained := _explained(error):
            raise explained from None
        raise
    return history


def _weights_on_cpu(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the model's weights in the CPU's memory, which fit puts back on an error: none on the device."""
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()}


def progress_bar(loader: Iterable, epoch: int, progress: bool | None = None) -> Iterable:
    """The loader in a tqdm progress bar, unless `progress=False` or HELPERS_PROGRESS=0 turns bars off (notebook 05)."""
    if progress is None:
        progress = os.environ.get("HELPERS_PROGRESS", "1") != "0"
    if not progress:
        return loader
    from tqdm.auto import tqdm
    from tqdm.notebook import tqdm as notebook_tqdm

    if not issubclass(tqdm, notebook_tqdm):  # a terminal: tqdm's text bar
        return tqdm(loader, desc=f"Epoch {epoch}", leave=False)
    return _bar_that_leaves_nothing(tqdm(loader, desc=f"Epoch {epoch}", leave=False, display=False))


def _bar_that_leaves_nothing(bar: Any) -> Iterator:
    """A notebook's progress bar, gone once done: a saved notebook's closed widget shows an error (ipywidgets#3821)."""
    from IPython.display import display

    shown = display(bar.container, display_id=True)
    try:
        yield from bar
    finally:
        shown.update({"text/plain": ""}, raw=True)


def _diverged(epoch: int, run: dict, result: dict, loaders: tuple, history: list[dict]) -> Exception:
    """The error for a NaN or infinite loss in `epoch`: NonFiniteData if the data holds NaN, else TrainingDiverged."""
    for loader, name in zip(loaders, ("training", "validation")):
        _blame_the_data(loader, name)
    kept = f"its weights from the end of epoch {epoch - 1}" if epoch > 0 else "the weights it started with"
    lr = run["lr"]
    safer = LESSON.lrs[0] if lr > LESSON.lrs[0] else lr / 10
    return TrainingDiverged(
        f"Training diverged in epoch {epoch}: the loss became {result['train_loss']} at lr={lr:g}. "
        f"The model keeps {kept}. Try a lower learning rate, such as lr={safer:g}"
        + (" (the lesson's, which trains this model)." if safer == LESSON.lrs[0] else "."),
        history,
    )


CHECKPOINT_FORMAT = "helpers-checkpoint-1"


def _rng_state(loader: Any) -> dict:
    gen = getattr(loader, "generator", None)
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": _numpy_state(),
        "loader": gen.get_state() if gen is not None else None,
    }


def _numpy_state() -> dict:
    """NumPy's global random state in types a `weights_only` load reads (its key as a tensor)."""
    _, key, *rest = np.random.get_state()
    return {"key": torch.from_numpy(key.astype(np.int64)), "rest": [int(rest[0]), int(rest[1]), float(rest[2])]}


def _start_persistent_workers(loader: Any) -> None:
    """Make a persistent DataLoader's iterator (its workers' seed draw) now, so the restored RNG feeds the shuffles."""
    dl = getattr(loader, "dl", loader)
    if isinstance(dl, DataLoader) and dl.persistent_workers:
        iter(dl)


def _set_rng_state(state: dict, loader: Any) -> None:
    _start_persistent_workers(loader)
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():  # as many GPUs' states as both machines have
        for index, gpu_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(gpu_state, index)
    random.setstate(state["python"])
    if state.get("numpy") is not None:
        numpy = state["numpy"]
        np.random.set_state(("MT19937", numpy["key"].numpy().astype(np.uint32), *numpy["rest"]))
    gen = getattr(loader, "generator", None)
    if gen is not None and state["loader"] is not None:
        gen.set_state(state["loader"])


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    epoch: int = 0,
    history: Sequence[dict] = (),
    hparams: dict | None = None,
    seed: int | None = None,
    rng: dict | None = None,
    untrained_first: bool = False,
) -> Path:
    """Save model, optimizer, epoch, history, seed and RNG states, atomically (notebook 08).

    `untrained_first`: the history starts with the untrained model's evaluation, as the lesson's does (notebook 05),
    not with the first epoch, as fit's does; the file says which, for whoever reads it (notebook 06)."""
    path = Path(path).expanduser()
    state = {
        "format": CHECKPOINT_FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "optimizer_class": type(optimizer).__name__ if optimizer is not None else None,
        "epoch": int(epoch),
        "history": [dict(h) for h in history],
        "untrained_first": bool(untrained_first),
        "hparams": hparams,
        "seed": seed,
        "rng": rng if rng is not None else _rng_state(None),
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    helpers_data.atomic_write(path, buffer.getvalue())
    return path


def _shape_mismatch(state: dict, model: nn.Module) -> str:
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [
        f"{k}: checkpoint {list(state[k].shape)} vs model {list(own[k].shape)}"
        for k in own
        if k in state and state[k].shape != own[k].shape
    ]
    parts = [f"missing keys {missing}"] * bool(missing) + [f"unexpected keys {unexpected}"] * bool(unexpected)
    if unexpected and {k.removeprefix("module.") for k in unexpected} == set(missing):
        parts = [
            "its keys start with 'module.': it was saved from a model wrapped in DistributedDataParallel (or "
            "nn.DataParallel). Save the wrapped model's .module.state_dict(), or strip the prefix: "
            "{k.removeprefix('module.'): v for k, v in weights.items()}"
        ]
    return "; ".join(parts + shapes)


CHECKPOINT_KEYS = ("model", "optimizer", "epoch", "history")


def _check_checkpoint(path: Path, state: Any) -> None:
    """Raise a ValueError that says why `state` is not a checkpoint this version of helpers can load."""
    found = state.get("format") if isinstance(state, dict) else None
    if isinstance(state, dict) and state and all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(
            f"{path} holds a model's weights alone (a state_dict, as torch.save(model.state_dict()) writes), not "
            "a checkpoint with its history: load the weights with "
            "model.load_state_dict(torch.load(path, weights_only=True)), or save a checkpoint with save_checkpoint"
        )
    if found != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a checkpoint written by save_checkpoint (no {CHECKPOINT_FORMAT!r} marker)")
    if missing := [key for key in CHECKPOINT_KEYS if key not in state]:
        raise ValueError(f"{path} is an incomplete checkpoint: it lacks {', '.join(missing)}. Save it again")


def _load_optimizer(path: Path, state: dict, optimizer: torch.optim.Optimizer) -> None:
    """Load the optimizer state, or leave the optimizer as it was and say why it does not fit."""
    saved, own = state["optimizer"]["param_groups"], optimizer.state_dict()["param_groups"]
    other_class = state.get("optimizer_class") not in (None, type(optimizer).__name__)
    if other_class or [set(g) for g in saved] != [set(g) for g in own]:
        raise ValueError(
            f"{path} holds the state of {state.get('optimizer_class') or 'another optimizer'}, which does not fit "
            f"this {type(optimizer).__name__}: resume with the optimizer that wrote it, or start a new checkpoint"
        )
    optimizer.load_state_dict(state["optimizer"])


def load_checkpoint(
    path: str | Path,
    model: nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    map_location: str | torch.device = "cpu",
) -> dict:
    """Load a checkpoint safely (`weights_only=True`) into `model` and `optimizer`; return it all (notebook 08).

    Tensors load to the CPU first (RNG states must live there); `load_state_dict` then copies the
    weights and optimizer state to wherever the model's parameters are. Every check passes before
    anything is loaded, so a checkpoint that does not fit leaves model and optimizer as they were.
    """
    path = Path(path).expanduser()
    state = _read_checkpoint(path, map_location)
    _load_into(path, state, model, optimizer)
    return state


def _read_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """The checkpoint at `path`, read once and checked; a ValueError that says why when it is none."""
    if path.is_dir():
        raise IsADirectoryError(
            f"{path} is a folder, not a checkpoint: give the file's path, such as {path / 'run.ckpt'}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: check the path, or train first to create it")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        whole = "Weights only load failed" in str(err)  # pickled objects: a whole model saved with torch.save(model)
        why = str(err).splitlines()[0] if whole else str(err)
        fix = (
            "If it holds a whole model saved with torch.save(model, ...), save model.state_dict() instead (or use "
            "helpers.save_checkpoint): loading pickled objects could run code"
            if whole
            else "Delete it and save it again (notebook 05 saves runs/lesson.ckpt; notebooks 06 and 07 train again "
            "without it)"
        )
        raise ValueError(
            f"{path} is not a readable checkpoint (truncated, corrupt, or another kind of file): {why}. {fix}"
        ) from err
    _check_checkpoint(path, state)
    return state


def _load_into(path: Path, state: dict, model: nn.Module | None, optimizer: torch.optim.Optimizer | None) -> None:
    """Load a checked checkpoint into `model` and `optimizer`, after every check that they fit."""
    if model is not None and (problem := _shape_mismatch(state["model"], model)):
        saved = {k: v for k, v in (state.get("hparams") or {}).items() if k.endswith("_size")}
        made = "; it was saved from a model with " + ", ".join(f"{k} = {v}" for k, v in saved.items()) if saved else ""
        raise ValueError(f"checkpoint {path} does not fit this model: {problem}{made}. Make the model the same way")
    if optimizer is not None and state["optimizer"] is not None:
        _load_optimizer(path, state, optimizer)
    if model is not None:
        model.load_state_dict(state["model"])


def _resume(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer, loader: Any, hparams: dict) -> list:
    """Resume `path`'s checkpoint, if any, in a fit of its lr and optimizer and no fewer epochs; return its history."""
    if not Path(path).exists():
        return []
    saved = _read_checkpoint(Path(path))
    done, before = saved["epoch"], saved.get("hparams") or {}
    same_run = {k: before.get(k) for k in ("lr", "opt_func")} == {k: hparams[k] for k in ("lr", "opt_func")}
    if not same_run or done > hparams["epochs"]:
        raise ValueError(
            f"{path} holds {done} epochs of fit({before.get('epochs')}, {before.get('lr')}) with "
            f"{before.get('opt_func')}; this call is fit({hparams['epochs']}, {hparams['lr']}) with "
            f"{hparams['opt_func']}. A checkpoint belongs to one fit call: give each phase its own "
            "checkpoint_path, or delete the file to start again"
        )
    _load_into(Path(path), saved, model, optimizer)
    if saved.get("rng") is not None:
        _set_rng_state(saved["rng"], loader)
    shown = helpers_data.display_path(Path(path))  # short: relative where it can be
    print(f"Resuming from {shown}: {done} of {hparams['epochs']} epochs already done")
    return list(saved["history"])[:done]


def _save_epoch(path, model, optimizer, history, hparams, loader) -> None:
    """Save the checkpoint after an epoch; a failed save keeps the model and says how to go on."""
    try:
        state = {"epoch": len(history), "history": history, "hparams": hparams, "rng": _rng_state(loader)}
        save_checkpoint(path, model, optimizer, **state)
    except OSError as err:
        raise CheckpointNotSaved(
            f"epoch {len(history) - 1} finished, but its checkpoint could not be saved: {err}. The model keeps "
            f"its weights and .history the {len(history)} completed epochs; fix that (or pass another "
            "checkpoint_path) and call fit again to go on",
            history,
        ) from err


def show_source(*objects: Any) -> None:
    """Show the real source of functions or classes: highlighted in a notebook, plain text elsewhere."""
    import inspect
    import textwrap

    code = "\n\n".join(textwrap.dedent(inspect.getsource(obj)).rstrip() for obj in objects)
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Markdown(f"```python\n{code}\n```"))
    else:
        print(code)


def show_batch(loader: Iterable, nrow: int = 16):
    """Show the first batch of `loader` as one grid of images; return the Figure (notebook 02)."""
    import matplotlib.pyplot as plt
    from torchvision.utils import make_grid

    images, _ = next(iter(loader))
    fig, ax = plt.subplots(figsize=(12, 6))
    ax.imshow(make_grid(images.detach().cpu(), nrow=nrow).permute(1, 2, 0).numpy())
    ax.set(xticks=[], yticks=[], title=f"One batch: {len(images)} images, {nrow} a row")
    return fig


def draw_network(sizes: Sequence[int], activation: str = "ReLU", shown: int = 10):
    """Draw a feedforward network, layers of `sizes` units joined by linear layers; return the Figure (notebook 03)."""
    import matplotlib.pyplot as plt

    if len(sizes) < 2 or not all(isinstance(n, int) and n > 0 for n in sizes):
        raise ValueError(f"draw_network wants two or more layer sizes, such as [784, 32, 10]; got {sizes!r}")
    fig, ax = plt.subplots(figsize=(3 * len(sizes), 4.5))
    columns = []
    for x, n in enumerate(sizes):  # at most `shown` circles a layer; a gap with dots stands for the rest
        slots = [i for i in range(min(n, shown)) if n <= shown or i != shown // 2]
        columns.append([(x, 1 - 2 * i / (shown - 1)) for i in slots])
        if n > shown:
            ax.text(x, 1 - 2 * (shown // 2) / (shown - 1), "\u22ee", ha="center", va="center", fontsize=14)
        name = "inputs" if x == 0 else "outputs" if x == len(sizes) - 1 else f"hidden, then {activation}"
        ax.text(x, -1.3, f"{n:,} {name}", ha="center", va="top")
    for x, (left, right) in enumerate(zip(columns, columns[1:])):
        for x0, y0 in left:
            for x1, y1 in right:
                ax.plot([x0, x1], [y0, y1], color="grey", lw=0.4, alpha=0.5, zorder=1)
        n_in, n_out = sizes[x], sizes[x + 1]
        ax.text(x + 0.5, 1.25, f"Linear({n_in}, {n_out})\nW [{n_out}, {n_in}], b [{n_out}]", ha="center", va="bottom")
    for x, column in enumerate(columns):
        colour = "tab:blue" if x == 0 else "tab:green" if x == len(columns) - 1 else "tab:orange"
        ax.scatter(*zip(*column), s=150, color=colour, zorder=2)
    ax.set(xlim=(-0.5, len(sizes) - 0.5), ylim=(-1.6, 1.7))
    ax.axis("off")
    return fig


def _plot_curves(history: Sequence[dict], keys: dict[str, str], ylabel: str, title: str):
    import matplotlib.pyplot as plt

    if not history:
        raise ValueError("history is empty: train first (history = [evaluate(...)] + fit(...))")
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in keys.items():
        points = [(i, h[key]) for i, h in enumerate(history) if key in h]
        if points:
            ax.plot(*zip(*points), "-x" if key.startswith("val") else "-o", label=label)
    ax.set(xlabel="epoch", ylabel=ylabel, title=title)
    ax.legend()
    ax.grid(alpha=0.3)
    return fig


def plot_losses(history: Sequence[dict]):
    """Training and validation loss against epoch; return the Figure (notebook 06)."""
    return _plot_curves(history, {"train_loss": "training", "val_loss": "validation"}, "loss", "Loss vs. No. of epochs")


def plot_accuracies(history: Sequence[dict]):
    """Validation accuracy against epoch, as the lesson plots it; return the Figure (notebook 06)."""
    return _plot_curves(history, {"val_acc": "validation"}, "accuracy", "Accuracy vs. No. of epochs")


def predict_image(img: torch.Tensor, model: nn.Module, device: str | torch.device | None = None) -> int:
    """The class `model` predicts for one image of shape [1, 28, 28] or [28, 28] (notebook 06)."""
    if img.dim() not in (2, 3) or tuple(img.shape[-2:]) != (28, 28) or (img.dim() == 3 and img.size(0) != 1):
        raise ValueError(f"predict_image wants one image of shape [1, 28, 28] or [28, 28]; got {list(img.shape)}")
    device = torch.device(device) if device is not None else model_device(model)
    with eval_mode(model):
        scores = model(to_device(img.reshape(1, 1, 28, 28), device))
    return int(scores.argmax(dim=1).item())


def predict_loader(model: nn.Module, loader: Iterable) -> dict[str, torch.Tensor]:
    """Labels, predicted classes and class probabilities for every sample of `loader` (on the CPU) (notebook 07)."""
    labels, probs = [], []
    with eval_mode(model):
        for images, batch_labels in loader:
            probs.append(F.softmax(model(images), dim=1))
            labels.append(batch_labels)
    if not labels:
        raise ValueError("predict_loader got an empty loader: it yielded no batches")
    probs_all = torch.cat(probs).cpu()
    return {"labels": torch.cat(labels).cpu(), "preds": probs_all.argmax(dim=1), "probs": probs_all}


def confusion_matrix(labels: torch.Tensor, preds: torch.Tensor, num_classes: int = 10) -> torch.Tensor:
    """Counts [true class, predicted class] as an int64 tensor (notebook 07)."""
    if labels.shape != preds.shape or labels.dim() != 1:
        raise ValueError(
            f"labels and preds must be 1-D and of one length; got {list(labels.shape)} and {list(preds.shape)}"
        )
    if len(labels) and (min(labels.min(), preds.min()) < 0 or max(labels.max(), preds.max()) >= num_classes):
        raise ValueError(f"labels and predictions must lie in 0..{num_classes - 1}")
    flat = labels.long() * num_classes + preds.long()
    return torch.bincount(flat, minlength=num_classes**2).reshape(num_classes, num_classes)


def per_class_accuracy(cm: torch.Tensor) -> torch.Tensor:
    """Accuracy for each true class, from a confusion matrix (NaN for a class with no samples) (notebook 07)."""
    totals = cm.sum(dim=1).double()
    return cm.diagonal().double() / totals


def plot_confusion_matrix(cm: torch.Tensor, class_names: Sequence[str] | None = None):
    """Draw a confusion matrix with the counts in its cells; return the Figure (notebook 07)."""
    import matplotlib.pyplot as plt

    names = list(class_names) if class_names is not None else [str(i) for i in range(len(cm))]
    fig, ax = plt.subplots(figsize=(7, 6))
    ax.imshow(cm.numpy(), cmap="Blues")
    threshold = cm.max().item() / 2
    for i in range(len(cm)):
        for j in range(len(cm)):
            count = int(cm[i, j])
            ax.text(
                j, i, str(count), ha="center", va="center", fontsize=8, color="white" if count > threshold else "black"
            )
    ticks = range(len(names))
    ax.set(xticks=ticks, yticks=ticks, xticklabels=names, yticklabels=names)
    ax.set(xlabel="predicted label", ylabel="true label", title="Confusion matrix")
    return fig


def most_confident_mistakes(predictions: dict[str, torch.Tensor], k: int = 16) -> torch.Tensor:
    """Indices of the `k` wrong predictions made with the highest probability, most confident first (notebook 07)."""
    wrong = (predictions["preds"] != predictions["labels"]).nonzero().flatten()
    confidence = predictions["probs"][wrong, predictions["preds"][wrong]]
    return wrong[confidence.argsort(descending=True)[:k]]


def show_mistakes(
    dataset: Dataset,
    predictions: dict[str, torch.Tensor],
    indices: Sequence[int] | None = None,
    ncols: int = 8,
    title: str = "Misclassified",
):
    """A grid of misclassified images, each titled 'true / predicted (confidence)'; return the Figure (notebook 07)."""
    import matplotlib.pyplot as plt

    if indices is None:
        indices = (predictions["preds"] != predictions["labels"]).nonzero().flatten()[:32]
    indices = [int(i) for i in indices]
    if not indices:
        raise ValueError("no mistakes to show")
    nrows = math.ceil(len(indices) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.5 * ncols, 1.7 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, i in zip(axes.flat, indices):
        image, _ = dataset[i]
        ax.imshow(image.squeeze(0).numpy(), cmap="gray")
        p = predictions["probs"][i, predictions["preds"][i]]
        ax.set_title(f"{int(predictions['labels'][i])} / {int(predictions['preds'][i])} ({p:.0%})", fontsize=9)
    fig.suptitle(f"{title}: true / predicted (confidence)")
    fig.tight_layout()
    return fig


def _as_uint8_images(dataset: Dataset) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(uint8 images [N, 1, 28, 28], labels) straight from an MNIST (or a Subset of one) using ToTensor."""
    indices = None
    while isinstance(dataset, Subset):
        idx = torch.as_tensor(dataset.indices)
        indices = idx if indices is None else idx[indices]
        dataset = dataset.dataset
    if not isinstance(dataset, MNIST) or not (dataset.transform is None or isinstance(dataset.transform, ToTensor)):
        return None
    if dataset.target_transform is not None:
        return None
    images, labels = dataset.data.unsqueeze(1), dataset.targets
    if indices is not None:
        images, labels = images[indices], labels[indices]
    return images, labels


class DeviceResidentLoader:
    """A whole split held as tensors on the device, shuffled with `randperm` (notebooks 04-08; 09 measures it).

    No per-sample work: notebook 04's exercise builds the idea (move the data once, slice batches from it), 05-08
    train with it to keep their demos quick, and 09 measures it against the other loaders.

    Yields `(images, labels)` batches like the lesson's loaders (float32 `[B, 1, 28, 28]` in [0, 1],
    int64 labels), so it is a drop-in for `DeviceDataLoader`. MNIST stays uint8 on the device (4x
    less memory) and is scaled per batch exactly as `ToTensor` does (divided by 255).
    """

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int = LESSON.batch_size,
        shuffle: bool = False,
        device: str | torch.device | None = None,
        drop_last: bool = False,
        seed: int = LESSON.seed,
    ):
        if len(images) != len(labels):
            raise ValueError(f"images and labels differ in length: {len(images)} vs {len(labels)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.device = get_default_device(device)
        self.images = images.to(self.device)
        self.labels = labels.to(self.device, torch.int64)
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        # randperm runs on the device where PyTorch has a generator for it (CUDA); else on the CPU.
        gen_device = self.device if self.device.type == "cuda" else torch.device("cpu")
        self.generator = torch.Generator(device=gen_device).manual_seed(seed)

    @classmethod
    def from_dataset(cls, dataset: Dataset, batch_size: int = LESSON.batch_size, **kwargs: Any) -> DeviceResidentLoader:
        """Convert a dataset once: MNIST (or a split of it) directly, anything else sample by sample."""
        fast = _as_uint8_images(dataset)
        if fast is None:
            images, labels = next(iter(DataLoader(dataset, batch_size=len(dataset))))
            labels = torch.as_tensor(labels)
        else:
            images, labels = fast
        return cls(images, labels, batch_size, **kwargs)

    def __len__(self) -> int:
        full, last = divmod(len(self.labels), self.batch_size)
        return full + (last > 0 and not self.drop_last)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.labels)
        if self.shuffle:
            order = torch.randperm(n, generator=self.generator, device=self.generator.device).to(self.device)
        else:
            order = torch.arange(n, device=self.device)
        for idx in order.split(self.batch_size)[: len(self)]:
            images = self.images[idx]
            if images.dtype == torch.uint8:
                images = images.to(torch.float32).div_(255)
            yield images, self.labels[idx]
