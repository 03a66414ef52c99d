"""Measurement for notebooks 09 and 11, which a learner need not read to follow them: configurations side by side
(one epoch each in turn; medians, spread and ratios), tables and charts, the speedrun, GPU memory."""

from __future__ import annotations

import importlib
import logging
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from helpers import (
    LESSON,
    DeviceResidentLoader,
    MnistModel,
    as_device,
    check_hparams,
    evaluate,
    fit,
    get_default_device,
    load_mnist,
    seed_everything,
    split_dataset,
    synchronize,
    to_device,
)
from helpers_common import epoch_times, markdown_table, take_turns

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # the profiler's own start and stop lines on stderr (09), silenced
# A CUDA build without CUDA logs "no CUDA runtime" when torch.compile first imports this (11): import it now, quietly.
_quiet, _level = logging.getLogger("torch.utils.cpp_extension"), logging.getLogger("torch.utils.cpp_extension").level
_quiet.setLevel(logging.ERROR)
importlib.import_module("torch.utils.cpp_extension")
_quiet.setLevel(_level)


def _spread(row: dict) -> str:
    return f"{row['epoch_s_min']:.3f}-{row['epoch_s_max']:.3f}"


PIPELINE_COLUMNS = {
    "pipeline": lambda r: r["pipeline"],
    "device": lambda r: r["device"],
    "threads": lambda r: str(r["threads"] or "-"),
    "s/epoch (median)": lambda r: f"{r['epoch_s']:.3f}",
    "fastest-slowest": _spread,
    "training s (median)": lambda r: f"{r['train_s']:.3f}",
    "val_acc": lambda r: f"{r['val_acc']:.4f}",
    "speed-up": lambda r: f"{r['speedup_vs_taught']:.1f}x" if r["speedup_vs_taught"] else "-",
}
SPEED_COLUMNS = {
    "model": lambda r: r["model"],
    "batch": lambda r: str(r["batch_size"]),
    "device": lambda r: r["device"],
    "configuration": lambda r: r["config"],
    "s/epoch (median)": lambda r: f"{r['epoch_s']:.3f}",
    "fastest-slowest": _spread,
    "first epoch s": lambda r: f"{r['first_s']:.2f}",
    "speed-up": lambda r: f"{r['speedup']:.2f}x",
    "accuracy": lambda r: f"{r['acc']:.4f}",
}
format_pipelines = partial(markdown_table, columns=PIPELINE_COLUMNS)
format_speed = partial(markdown_table, columns=SPEED_COLUMNS)


def side_by_side(epochs: Mapping[str, Callable[[], Any]], rounds: int) -> list[dict]:
    """A row per configuration, its epochs taken in turn `rounds` times; each callable must end in a device read.

    Row: `first_s` the warm-up epoch, `epoch_s` the median of the rest (with its spread), `speedup` the first
    configuration's `epoch_s` over this one's."""
    if rounds < 2:
        raise ValueError(f"rounds must be at least 2: the first is warm-up, timed apart; got {rounds}")
    seconds = take_turns(epochs, rounds)
    rows = [{"config": name, "first_s": s[0]} | epoch_times(s[1:]) for name, s in seconds.items()]
    return [row | {"speedup": rows[0]["epoch_s"] / row["epoch_s"]} for row in rows]


# ================================================================================ input pipelines (notebook 09)


def compare_pipelines(
    pipelines: Mapping[str, Callable[[torch.device, int], tuple]],
    devices: Sequence[str | torch.device],
    epochs: int = 3,
    seed: int = LESSON.seed,
    lr: float = LESSON.lrs[0],
    one_thread: bool = True,  # on a CPU, "resident" also with one thread (its row's `default_threads` False)
) -> list[dict]:
    """The lesson's `fit` on each pipeline's (train, val) and device, an epoch each in turn; speed-up vs "as_taught"."""
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1 for a timing, got {epochs}")
    runs = []
    for device in map(as_device, devices):
        threads = torch.get_num_threads() if device.type == "cpu" else None
        configs = [(name, threads) for name in pipelines]
        if one_thread and threads and threads > 1 and "resident" in pipelines:
            configs.append(("resident", 1))
        for name, n in configs:
            seed_everything(seed)
            loaders, model = pipelines[name](device, seed), to_device(MnistModel(), device)
            row = {"pipeline": name, "device": str(device), "threads": n, "default_threads": n == threads}
            runs.append(row | {"fit": (model, *loaders), "h": []})
    take_turns({i: partial(_fit_epoch, run, lr) for i, run in enumerate(runs)}, epochs)
    rows = [
        {k: run[k] for k in ("pipeline", "device", "threads", "default_threads")}
        | epoch_times([h["epoch_s"] for h in run["h"]])
        | {"train_s": statistics.median(h["train_s"] for h in run["h"]), "val_acc": run["h"][-1]["val_acc"]}
        for run in runs
    ]
    del runs  # the workers stop
    taught = {r["device"]: r["epoch_s"] for r in rows if r["pipeline"] == "as_taught"}
    return [
        r | {"speedup_vs_taught": taught[r["device"]] / r["epoch_s"] if r["device"] in taught else None} for r in rows
    ]


def _fit_epoch(run: dict, lr: float) -> None:
    """One epoch of `fit` for one configuration of `compare_pipelines`, with its CPU threads, then as before."""
    default_threads = torch.get_num_threads()
    torch.set_num_threads(run["threads"] or default_threads)
    try:
        run["h"] += fit(1, lr, *run["fit"], progress=False, verbose=False)
    finally:
        torch.set_num_threads(default_threads)


def plot_pipelines(rows: Sequence[dict]):
    """Seconds per epoch for each pipeline and device, as horizontal bars; return the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, ScalarFormatter

    labels = [f"{r['pipeline']} on {r['device']}" + (f", {r['threads']} thr" if r["threads"] else "") for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(rows) + 1))
    ax.barh(labels, [r["epoch_s"] for r in rows], color="tab:blue")
    for y, r in enumerate(rows):
        ax.text(r["epoch_s"], y, f" {r['epoch_s']:.2f}s", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set(xscale="log", xlabel="seconds per epoch (log scale, lower is faster)")
    ax.set_title("One epoch of the lesson's model")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 0.1, 0.2, 0.5, 1, 2, 5: ticks within a decade
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(LogLocator(subs="all"))
    ax.xaxis.set_minor_formatter("")
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

    SGD with Nesterov momentum, the learning rate decayed linearly to zero over `epochs`: chosen by
    validation accuracy on the lesson's split. `reached` says whether the one look at the test set
    scores at least `target`. Data preparation and validation are timed apart from training.
    """
    check_hparams(epochs, lr)
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

    def sgd_decaying(params: Any, lr: float) -> torch.optim.Optimizer:
        """SGD with Nesterov momentum, its learning rate falling linearly to zero over the run, a little every step."""
        optimizer = torch.optim.SGD(params, lr, momentum=momentum, nesterov=momentum > 0)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / (epochs * len(train)))
        optimizer.register_step_post_hook(lambda *_: schedule.step())  # the scheduler steps after each step
        return optimizer

    seed_everything(seed)
    model = to_device(MnistModel(), device)
    history = fit(epochs, lr, model, train, val, sgd_decaying, progress=False, verbose=False)
    train_s, val_accs = sum(h["train_s"] for h in history), [h["val_acc"] for h in history]
    test_acc = evaluate(model, test)["val_acc"]  # the one and only look at the test set
    print(
        f"speedrun on {device}: {epochs} epochs in {train_s:.2f} s of training (+{data_s:.2f} s preparing data); "
        f"validation accuracy {val_accs[-1]:.4f}, then test accuracy {test_acc:.4f}"
    )
    run = {"device": str(device), "batch_size": batch_size, "lr": lr, "momentum": momentum, "epochs": epochs}
    scores = {"val_accs": val_accs, "test_acc": test_acc, "reached": test_acc >= target, "target": target}
    return run | scores | {"train_s": train_s, "data_s": data_s}


def gpu_memory(device: str | torch.device = "cuda") -> dict[str, int]:
    """Bytes that tensors hold on a CUDA device now (`allocated`) and that PyTorch's cache holds (`reserved`)."""
    return {"allocated": torch.cuda.memory_allocated(device), "reserved": torch.cuda.memory_reserved(device)}


# ======================================================================== the profile, drawn (notebook 09)

PHASES = ("data", "forward", "backward", "optimizer")


def plot_phases(profiles: dict[str, dict]):
    """Per-step seconds of each phase, one bar per profiled pipeline; return the Figure."""
    import matplotlib.pyplot as plt

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
