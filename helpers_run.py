"""The lesson's run in one call (notebook 07, when notebook 05's checkpoint is missing)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import torch

from helpers import (
    LESSON,
    DeviceResidentLoader,
    MnistModel,
    check_hparams,
    describe_device,
    evaluate,
    fit,
    get_default_device,
    load_mnist,
    seed_everything,
    split_dataset,
    to_device,
)


def train_lesson(
    root: str | Path = "data",
    device: str | torch.device | None = None,
    epochs: Sequence[int] = LESSON.epochs,
    lrs: Sequence[float] = LESSON.lrs,
    limit: int | None = None,
    seed: int = LESSON.seed,
    hidden_size: int = 32,
) -> dict:
    """The lesson end to end (notebook 05): split, loaders on the device, fit at each (epochs, lr), test once.

    Returns {"model", "history", "test_loss", "test_acc"}."""
    if len(epochs) != len(lrs):  # checked, like everything given, before any work
        raise ValueError(f"give one learning rate per phase: {len(epochs)} epoch counts but {len(lrs)} learning rates")
    for n, lr in zip(epochs, lrs):
        check_hparams(n, lr)
    device = get_default_device(device)
    print(describe_device(device))
    seed_everything(seed)
    train_set, val_set = split_dataset(load_mnist(root), seed=seed, limit=limit)
    keep = partial(DeviceResidentLoader.from_dataset, device=device)  # each split held on the device
    train_loader = keep(train_set, LESSON.batch_size, shuffle=True, seed=seed)
    val_loader = keep(val_set, LESSON.val_batch_size)
    test_loader = keep(load_mnist(root, train=False), LESSON.val_batch_size)
    model = to_device(MnistModel(784, hidden_size, 10), device)
    history = [evaluate(model, val_loader)]
    for n, lr in zip(epochs, lrs):
        history += fit(n, lr, model, train_loader, val_loader)
    test = evaluate(model, test_loader)
    print(f"test: loss {test['val_loss']:.4f}, accuracy {test['val_acc']:.4f}")
    return {"model": model, "history": history, "test_loss": test["val_loss"], "test_acc": test["val_acc"]}
