"""What the later modules share (notebooks 09-11): the model wrapper, one epoch of the lesson's four lines, epoch
timing (configurations taking turns) and tables.

Nothing here is about speed or about many processes: `helpers_speed` and `helpers_ddp` both build on it, and it
builds on the lesson's module alone. A wrapper changes how one of the model's steps runs, as
`DistributedDataParallel` and `torch.compile` do, and `fit` trains it as it trains the model:

    model = helpers_speed.compile_model(model)  # a Compiled; helpers_ddp.to_ddp(model, device): a DDPModel
    fit(5, 0.5, model, train_loader, val_loader)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import torch
import torch.nn as nn


class Wrapped(nn.Module):
    """A model in a wrapper that changes how one of its steps runs; the weights and checkpoints stay the model's.

    Every lesson method passes to the model's own, so `fit` and `evaluate` train the wrapper as they would the
    model, and a subclass changes one step. The model itself is left as it was: wrap it, never patch it (as
    `DistributedDataParallel` and `torch.compile` do). `state_dict` is the model's, so a checkpoint loads into it.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.module = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def training_step(self, batch: Any) -> torch.Tensor:
        return self.module.training_step(batch)

    def validation_step(self, batch: Any) -> dict:
        return self.module.validation_step(batch)

    def validation_epoch_end(self, outputs: Sequence[dict]) -> dict[str, float]:
        return self.module.validation_epoch_end(outputs)

    def epoch_end(self, epoch: int, result: dict) -> None:
        self.module.epoch_end(epoch, result)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict:
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False) -> Any:
        return self.module.load_state_dict(state_dict, strict, assign)


def train_epoch(model: nn.Module, loader: Iterable, optimizer: Any) -> float:
    """One pass of the lesson's four lines over `loader`, nothing else; the mean loss over images, as `fit` reports.

    The benchmarks' and the profiler's epoch (notebooks 09-11). The loss is summed on the device and read once, at
    the end: that read waits for the device, so a timer around the call measures the work, not its queuing.
    """
    loss_sum, images = 0.0, 0
    for batch in loader:
        loss = model.training_step(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_sum += loss.detach() * len(batch[1])
        images += len(batch[1])
    return float(loss_sum / images)


def take_turns(
    turns: Mapping[Hashable, Callable[[], Any]], rounds: int, alternate: bool = False, before: Callable | None = None
) -> dict[Hashable, list[float]]:
    """Call each of `turns` once a round, for `rounds` rounds, so that a busy machine slows them all alike; return the
    seconds of each call, by turn.

    A B C, A B C, ...; with `alternate`, C B A, A B C, ... (no turn always first). `before` runs ahead of each call,
    untimed (a barrier between processes). A call that ends by reading from its device is timed with its work.
    """
    seconds: dict[Hashable, list[float]] = {name: [] for name in turns}
    for i in range(rounds):
        for name in list(turns)[::-1] if alternate and i % 2 == 0 else turns:
            if before:
                before()
            t0 = time.perf_counter()
            turns[name]()
            seconds[name].append(time.perf_counter() - t0)
    return seconds


def epoch_times(seconds: Sequence[float]) -> dict[str, float]:
    """The median of epochs that took turns with other configurations, and their spread (the fastest and slowest)."""
    return {"epoch_s": statistics.median(seconds), "epoch_s_min": min(seconds), "epoch_s_max": max(seconds)}


def markdown_table(rows: Sequence[dict], columns: dict[str, Callable[[dict], str]]) -> str:
    """`rows` as a Markdown table: one column per header, its cell written by the function beside it."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for cell in columns.values()) + " |" for row in rows]
    return "\n".join(lines)
