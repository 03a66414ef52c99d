"""The lesson's run in one call, and the input pipelines that feed it (notebooks 06, 07 and 09).

`train_lesson` is what notebook 05 does, end to end: the seeded split, the loaders of one input pipeline, the
lesson's model trained at each (epochs, lr), then the test set once. Notebooks 06 and 07 call it when notebook 05's
checkpoint is missing.

The input pipelines are one registry, `PIPELINES`, each named for what it is:

    as_taught  the lesson's DataLoader exactly as notebook 02 writes it: PIL to tensor per image, 2 workers
    seeded     helpers.make_loaders: seeded, workers only with cores to spare, pinned memory only with CUDA
    tuned      tensors made once, whole batches indexed at a time (notebook 09)
    resident   helpers.DeviceResidentLoader: the whole split kept on the device (notebooks 05-09)

Each makes (training, *evaluation) loaders whose batches are on the device.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, TensorDataset

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
# The input pipelines: one registry, each named for what it is (notebooks 02, 05 and 09)
# ==================================================================================================


def taught_loaders(
    train_set: Dataset,
    *evaluation: Dataset,
    device: torch.device,
    seed: int = LESSON.seed,
) -> tuple[DeviceDataLoader, ...]:
    """The lesson's loaders exactly as notebook 02 teaches them: PIL to tensor per image, 2 workers every epoch."""
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
) -> tuple[DeviceDataLoader, ...]:
    """`helpers.make_loaders`' batches (notebook 02) on `device`."""
    settings = loader_settings(device)
    generator = torch.Generator().manual_seed(seed)
    loaders = [DataLoader(train_set, LESSON.batch_size, shuffle=True, generator=generator, **settings)]
    loaders += [DataLoader(dataset, LESSON.val_batch_size, **settings) for dataset in evaluation]
    return tuple(DeviceDataLoader(dl, device) for dl in loaders)


def tuned_loaders(
    train_set: Dataset,
    *evaluation: Dataset,
    device: torch.device,
    seed: int = LESSON.seed,
) -> tuple[DeviceDataLoader, ...]:
    """Tensors made once; whole batches indexed at a time; workers only with cores to spare (notebook 09)."""
    loaders = []
    splits = ((train_set, LESSON.batch_size, True), *((d, LESSON.val_batch_size, False) for d in evaluation))
    for dataset, size, shuffle in splits:
        tensors = DeviceResidentLoader.from_dataset(dataset, size, device="cpu")
        data = TensorDataset(tensors.images.float().div_(255), tensors.labels)
        order = RandomSampler(data, generator=torch.Generator().manual_seed(seed)) if shuffle else range(len(data))
        batches = BatchSampler(order, size, drop_last=False)  # one index per batch: tensors[indices]
        loader = DataLoader(data, sampler=batches, batch_size=None, **loader_settings(device))
        loaders.append(DeviceDataLoader(loader, device))
    return tuple(loaders)


def resident_loaders(
    train_set: Dataset,
    *evaluation: Dataset,
    device: torch.device,
    seed: int = LESSON.seed,
) -> tuple[DeviceResidentLoader, ...]:
    """Each split held on `device` (`helpers.DeviceResidentLoader`, notebook 05)."""
    keep = partial(DeviceResidentLoader.from_dataset, device=device)
    train = keep(train_set, LESSON.batch_size, shuffle=True, seed=seed)
    return (train, *(keep(dataset, LESSON.val_batch_size) for dataset in evaluation))


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
    progress: bool | None = None,
) -> dict:
    """The lesson end to end (notebook 05): split, loaders, fit at each (epochs, lr), test accuracy; save if asked.

    Returns the trained model, its history and the test loss and accuracy. Its loaders are `pipeline`'s (seeded by
    default), so its numbers differ a little from notebook 05's run.
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
    train_loader, val_loader, test_loader = loaders_of(train_set, val_set, test_set, device=device, seed=seed)
    model = to_device(MnistModel(784, hidden_size, 10), device)
    history = [evaluate(model, val_loader)]
    for n, lr in zip(epochs, lrs):
        history += fit(n, lr, model, train_loader, val_loader, progress=progress)
    test = evaluate(model, test_loader)
    print(f"test: loss {test['val_loss']:.4f}, accuracy {test['val_acc']:.4f}")
    if save:  # atomically, as save_checkpoint writes: an interrupted save leaves the file as it was, never half
        weights = io.BytesIO()
        torch.save(model.state_dict(), weights)
        helpers_data.atomic_write(save, weights.getvalue())
        print(f"saved the weights to {helpers_data.display_path(save)}")
    return {"model": model, "history": history, "test_loss": test["val_loss"], "test_acc": test["val_acc"]}
