"""The lesson's run in one call, and the input pipelines that feed it (notebooks 06, 07, 09 and 10).

`train_lesson` is what notebook 05 does, end to end: the seeded split, the loaders of one input pipeline, the
lesson's model trained at each (epochs, lr), then the test set once. Notebooks 06 and 07 call it when notebook 05's
checkpoint is missing, notebook 10 to compare one process with many, and the command line to train.

The input pipelines are one registry, `PIPELINES`, each named for what it is:

    as_taught  the lesson's DataLoader exactly as notebook 02 writes it: PIL to tensor per image, 2 workers
    seeded     helpers.make_loaders: seeded, workers only with cores to spare, pinned memory only with CUDA
    tuned      tensors made once, whole batches indexed at a time (notebook 09)
    resident   helpers.DeviceResidentLoader: the whole split kept on the device (notebooks 05-09)

Each makes (training, *evaluation) loaders whose batches are on the device. Data parallelism (notebook 10) is a
second dimension, not a second registry: given `rank` and `world_size`, a pipeline gives each process its share,
`batch[rank::world_size]`, of the batches one process would take, without padding; with one process, the batches
themselves.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, Sampler, TensorDataset

import helpers_data
from helpers import (
    LESSON,
    DeviceDataLoader,
    DeviceResidentLoader,
    MnistModel,
    check_hparams,
    describe_device,
    evaluate,
    fit,
    get_default_device,
    load_mnist,
    loader_settings,
    seed_everything,
    split_dataset,
    to_device,
)

# ==================================================================================================
# Each process's share of every batch (notebook 10); with one process, the whole batch
# ==================================================================================================


def check_processes(world_size: int, batch_size: int = LESSON.batch_size) -> None:
    """Raise a ValueError unless a batch of `batch_size` splits evenly over `world_size` processes (notebook 10)."""
    if batch_size % world_size:
        divisors = ", ".join(str(n) for n in range(1, batch_size + 1) if batch_size % n == 0 and n <= 16)
        raise ValueError(
            f"a batch of {batch_size} does not split evenly over {world_size} processes: run a number of "
            f"processes that divides it ({divisors}, ...), or change the batch size"
        )


def _check_place(batch_size: int, rank: int, world_size: int) -> None:
    """Raise unless `rank` is one of `world_size` processes, each with an equal share of a batch."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be between 0 and world_size - 1 = {world_size - 1}, got {rank}")
    check_processes(world_size, batch_size)


def _check_same_steps(n: int, batch_size: int, world_size: int, drop_last: bool = False) -> None:
    """Raise in every process alike if the processes would take different numbers of steps (DDP would hang)."""
    last = n % batch_size
    if not drop_last and 0 < last < world_size:
        full = n // batch_size
        raise ValueError(
            f"the processes would take {full} to {full + 1} steps: the last batch is smaller than the number of "
            "processes, so some get no share of it. Choose a batch size that leaves a larger last batch, or drop "
            "it (drop_last=True)"
        )


class ShardedSampler(Sampler[int]):
    """Process `rank`'s share of every batch: the batches of one process, each split by rank (notebook 10).

    Of each batch of `batch_size` that `sampler` forms, process `rank` takes `batch[rank::world_size]`;
    a DataLoader with `batch_size=shard_size` yields those shares. Together the processes see exactly
    one process's batches, in the same order. Unlike `DistributedSampler` it never pads: each image
    counts once. For training (the default) every process must take the same number of steps; with
    `uneven=True` (evaluation) a process with no share of a small last batch has one batch fewer.
    """

    def __init__(
        self, sampler: Iterable[int], batch_size: int, rank: int = 0, world_size: int = 1, uneven: bool = False
    ):
        _check_place(batch_size, rank, world_size)
        if not uneven:
            _check_same_steps(len(sampler), batch_size, world_size)
        self.sampler, self.batch_size, self.rank, self.world_size = sampler, batch_size, rank, world_size
        self.shard_size = batch_size // world_size

    def __iter__(self) -> Iterator[int]:
        for batch in BatchSampler(self.sampler, self.batch_size, drop_last=False):
            yield from batch[self.rank :: self.world_size]

    def __len__(self) -> int:
        full, last = divmod(len(self.sampler), self.batch_size)
        return full * self.shard_size + len(range(self.rank, last, self.world_size))


class ShardedResidentLoader(DeviceResidentLoader):
    """`DeviceResidentLoader` giving process `rank` its share, `batch[rank::world_size]`, of every batch (notebook 10).

    For training (the default) every process must take the same number of steps; `uneven=True` lets a
    process with no share of a small last batch have one batch fewer (evaluation).
    """

    def __init__(self, *args: Any, rank: int = 0, world_size: int = 1, uneven: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        _check_place(self.batch_size, rank, world_size)
        if not uneven:
            _check_same_steps(len(self.labels), self.batch_size, world_size, self.drop_last)
        self.rank, self.world_size = rank, world_size

    def __len__(self) -> int:
        full, last = divmod(len(self.labels), self.batch_size)
        return full + (not self.drop_last and self.rank < last)  # the batches that hold an image for this process

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels in super().__iter__():  # the batches one process would take, those with a share here
            yield images[self.rank :: self.world_size], labels[self.rank :: self.world_size]


# ==================================================================================================
# The input pipelines: one registry, each named for what it is (notebooks 02, 05, 09 and 10)
# ==================================================================================================


def _in_one_process(pipeline: str, world_size: int) -> None:
    if world_size > 1:
        raise ValueError(
            f"the {pipeline} pipeline runs in one process; with {world_size} processes choose 'seeded' or 'resident', "
            "which give each process its share of every batch"
        )


def _settings(device: torch.device) -> dict:
    """`helpers.loader_settings` for one of this machine's processes, which share its cores (torchrun's count)."""
    return loader_settings(device, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def taught_loaders(
    train_set: Dataset,
    *evaluation: Dataset,
    device: torch.device,
    seed: int = LESSON.seed,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[DeviceDataLoader, ...]:
    """The lesson's loaders exactly as notebook 02 teaches them: PIL to tensor per image, 2 workers every epoch."""
    _in_one_process("as_taught", world_size)
    kw = {"num_workers": 2, "pin_memory": torch.device(device).type == "cuda"}
    generator = torch.Generator().manual_seed(seed)
    train = DataLoader(train_set, LESSON.batch_size, shuffle=True, generator=generator, **kw)
    evals = [DataLoader(dataset, LESSON.val_batch_size, shuffle=True, **kw) for dataset in evaluation]
    return tuple(DeviceDataLoader(dl, device) for dl in (train, *evals))


def seeded_loaders(
    train_set: Dataset,
    *evaluation: Dataset,
    device: torch.device,
    seed: int = LESSON.seed,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[DeviceDataLoader, ...]:
    """`helpers.make_loaders`' batches (notebook 02) on `device`, process `rank` taking its share of each."""
    settings = _settings(device)
    generator = torch.Generator().manual_seed(seed)
    train = ShardedSampler(RandomSampler(train_set, generator=generator), LESSON.batch_size, rank, world_size)
    loaders = [DataLoader(train_set, train.shard_size, sampler=train, generator=generator, **settings)]
    for dataset in evaluation:
        shard = ShardedSampler(range(len(dataset)), LESSON.val_batch_size, rank, world_size, uneven=True)
        loaders.append(DataLoader(dataset, shard.shard_size, sampler=shard, **settings))
    return tuple(DeviceDataLoader(dl, device) for dl in loaders)


def tuned_loaders(
    train_set: Dataset,
    *evaluation: Dataset,
    device: torch.device,
    seed: int = LESSON.seed,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[DeviceDataLoader, ...]:
    """Tensors made once; whole batches indexed at a time; workers only with cores to spare (notebook 09)."""
    loaders = []
    splits = ((train_set, LESSON.batch_size, True), *((d, LESSON.val_batch_size, False) for d in evaluation))
    for dataset, size, shuffle in splits:
        tensors = DeviceResidentLoader.from_dataset(dataset, size, device="cpu")
        data = TensorDataset(tensors.images.float().div_(255), tensors.labels)
        order = RandomSampler(data, generator=torch.Generator().manual_seed(seed)) if shuffle else range(len(data))
        shard = ShardedSampler(order, size, rank, world_size, uneven=not shuffle)
        batches = BatchSampler(shard, shard.shard_size, drop_last=False)  # one index per batch: tensors[indices]
        loader = DataLoader(data, sampler=batches, batch_size=None, **_settings(device))
        loaders.append(DeviceDataLoader(loader, device))
    return tuple(loaders)


def resident_loaders(
    train_set: Dataset,
    *evaluation: Dataset,
    device: torch.device,
    seed: int = LESSON.seed,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[ShardedResidentLoader, ...]:
    """Each split held on `device` (`helpers.DeviceResidentLoader`, notebook 05), process `rank` taking its share."""
    keep = partial(ShardedResidentLoader.from_dataset, device=device, rank=rank, world_size=world_size)
    train = keep(train_set, LESSON.batch_size, shuffle=True, seed=seed)
    return (train, *(keep(dataset, LESSON.val_batch_size, uneven=True) for dataset in evaluation))


PIPELINES: dict[str, Callable[..., tuple]] = {
    "as_taught": taught_loaders,
    "seeded": seeded_loaders,
    "tuned": tuned_loaders,
    "resident": resident_loaders,
}


def input_pipeline(name: str) -> Callable[..., tuple]:
    """The function of PIPELINES that makes pipeline `name`'s loaders; a ValueError naming those there are."""
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}: choose one of {', '.join(map(repr, PIPELINES))}")
    return PIPELINES[name]


# ==================================================================================================
# The lesson end to end, in one call: what notebook 05 runs
# ==================================================================================================


def check_schedule(epochs: Sequence[int], lrs: Sequence[float]) -> None:
    """The lesson's phases checked before any work: one learning rate per phase, each (epochs, lr) valid."""
    if len(epochs) != len(lrs):
        raise ValueError(f"give one learning rate per phase: {len(epochs)} epoch counts but {len(lrs)} learning rates")
    for n, lr in zip(epochs, lrs):
        check_hparams(n, lr)


def train_lesson(
    root: str | Path = "data",
    device: str | torch.device | None = None,
    epochs: Sequence[int] = LESSON.epochs,
    lrs: Sequence[float] = LESSON.lrs,
    pipeline: str = "seeded",
    limit: int | None = None,
    save: str | Path | None = None,
    seed: int = LESSON.seed,
    hidden_size: int = 32,
    *,
    rank: int = 0,
    world_size: int = 1,
    wrap: Callable[[nn.Module], tuple[nn.Module, Callable]] | None = None,
    progress: bool | None = None,
) -> dict:
    """The lesson end to end (notebook 05): split, loaders, fit at each (epochs, lr), test accuracy; save if asked.

    Returns the trained model, its history and the test loss and accuracy. Its loaders are `pipeline`'s (seeded by
    default), so its numbers differ a little from notebook 05's run. For data parallelism (`helpers_ddp`) this
    process takes share `rank` of `world_size` of every batch, and `wrap(model)` gives the model to train and
    its `opt_func`.
    """
    check_schedule(epochs, lrs)
    loaders_of = input_pipeline(pipeline)
    device = get_default_device(device)
    save = Path(save).expanduser() if save else None
    if save:
        helpers_data.check_writable(save)  # before any training: a path that cannot be written would lose it
    print(describe_device(device))
    seed_everything(seed)
    train_set, val_set = split_dataset(load_mnist(root), seed=seed, limit=limit)
    test_set = load_mnist(root, train=False)
    share = {"device": device, "seed": seed, "rank": rank, "world_size": world_size}
    train_loader, val_loader, test_loader = loaders_of(train_set, val_set, test_set, **share)
    model = to_device(MnistModel(784, hidden_size, 10), device)
    trained, opt_func = wrap(model) if wrap else (model, torch.optim.SGD)
    history = [evaluate(trained, val_loader)]
    for n, lr in zip(epochs, lrs):
        history += fit(n, lr, trained, train_loader, val_loader, opt_func, progress=progress)
    test = evaluate(trained, test_loader)
    print(f"test: loss {test['val_loss']:.4f}, accuracy {test['val_acc']:.4f}")
    if save:  # atomically, as save_checkpoint writes: an interrupted save leaves the file as it was, never half
        weights = io.BytesIO()
        torch.save(model.state_dict(), weights)
        helpers_data.atomic_write(save, weights.getvalue())
        print(f"saved the weights to {helpers_data.display_path(save)}")
    return {"model": model, "history": history, "test_loss": test["val_loss"], "test_acc": test["val_acc"]}
