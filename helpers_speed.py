"""Speed, for notebooks 09 and 11: input pipelines and speed features measured side by side, mixed
precision, TF32, torch.compile, a speedrun and the profiler.

Everything here composes around the lesson's functions in `helpers`, and wraps the model instead of changing it:
`model, opt_func = mixed_precision(model, torch.bfloat16)` trains under autocast (float16 with a GradScaler) with
`fit(epochs, lr, model, train_loader, val_loader, opt_func)`, and `compile_model(model)` compiles its training step.
The benchmarks and the profiler train with `fit` or with `helpers_common.train_epoch`, the lesson's four lines alone.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib
import json
import logging
import os
import re
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function

from helpers import (
    LESSON,
    Classifier,
    DeviceResidentLoader,
    MnistModel,
    as_device,
    available_devices,
    check_hparams,
    evaluate,
    fit,
    get_default_device,
    load_mnist,
    model_device,
    seed_everything,
    split_dataset,
    synchronize,
    to_device,
)
from helpers_common import Wrapped, epoch_times, markdown_table, take_turns, train_epoch
from helpers_run import input_pipeline, resident_loaders

# ==================================================================================================
# Tables: how each benchmark's rows are written
# ==================================================================================================


def _spread(row: dict) -> str:
    return f"{row['epoch_s_min']:.3f}-{row['epoch_s_max']:.3f}"


PIPELINE_COLUMNS = {
    "pipeline": lambda r: r["pipeline"],
    "device": lambda r: r["device"],
    "threads": lambda r: str(r["threads"] or "-"),
    "s/epoch (median)": lambda r: f"{r['epoch_s']:.3f}",
    "fastest-slowest": _spread,
    "samples/s": lambda r: f"{r['samples_per_s']:,.0f}",
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
    "val_acc": lambda r: f"{r['val_acc']:.4f}",
}
OPERATION_COLUMNS = {
    "operation": lambda r: f"`{r['operation']}`",
    "calls": lambda r: str(r["calls"]),
    "self ms": lambda r: f"{r['self_ms']:.1f}",
    "share": lambda r: f"{r['share']:.0%}",
}
format_pipelines = partial(markdown_table, columns=PIPELINE_COLUMNS)
format_speed = partial(markdown_table, columns=SPEED_COLUMNS)
format_operations = partial(markdown_table, columns=OPERATION_COLUMNS)


# ==================================================================================================
# Input pipelines: the lesson's as taught against tuned and device-resident ones (notebook 09)
# ==================================================================================================


def benchmark_pipelines(
    root: str | Path = "data",
    devices: Sequence[str] | None = None,
    epochs: int = 3,
    pipelines: Sequence[str] = ("as_taught", "tuned", "resident"),
    limit: int | None = None,
    out_dir: str | Path | None = None,
    seed: int = LESSON.seed,
    verbose: bool = True,
) -> list[dict]:
    """Train the lesson's model with each input pipeline on each device, side by side in one run.

    The configurations take turns, one epoch each (A B C A B C ...), so that a busy machine slows
    them all alike. Returns (and draws as `out_dir/bench.png`, if given) one row per pipeline and
    device: the median seconds per epoch with its spread (fastest and slowest epoch), training
    samples per second, validation accuracy after the same schedule (the lesson's first learning
    rate), and the speed-up over the loaders as taught on the same device. On the CPU the
    device-resident pipeline also runs with one thread, to show what the thread count buys.
    `limit` trains on the first `limit` training images, for a quick look.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1 for a timing, got {epochs}")
    for name in pipelines:
        input_pipeline(name)  # an unknown name fails here, before any data is loaded
    devices = [as_device(d) for d in (devices or available_devices())]
    train_set, val_set = split_dataset(load_mnist(root), seed=seed, limit=limit)
    runs = [_pipeline_run(p, d, t, train_set, val_set, seed) for d in devices for p, t in _configs(d, pipelines)]
    take_turns({i: partial(_pipeline_epoch, run) for i, run in enumerate(runs)}, epochs)  # fit times its epochs
    rows = [
        {"pipeline": run["pipeline"], "device": run["device"], "threads": run["threads"]}
        | epoch_times([h["epoch_s"] for h in run["history"]])
        | {"samples_per_s": len(train_set) / statistics.median(h["train_s"] for h in run["history"])}
        | {"val_acc": run["history"][-1]["val_acc"]}
        for run in runs
    ]
    del runs  # stop worker processes
    taught = {r["device"]: r["epoch_s"] for r in rows if r["pipeline"] == "as_taught"}
    for row in rows:
        row["speedup_vs_taught"] = taught[row["device"]] / row["epoch_s"] if row["device"] in taught else None
    if verbose:
        print(format_pipelines(rows))
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        plot_pipelines(rows).savefig(Path(out_dir) / "bench.png", dpi=100, bbox_inches="tight")
    return rows


def _configs(device: torch.device, pipelines: Sequence[str]) -> list[tuple[str, int | None]]:
    """(pipeline, CPU threads) to time on `device`: on the CPU the resident pipeline also with one thread."""
    threads = torch.get_num_threads() if device.type == "cpu" else None
    configs = [(p, threads) for p in pipelines]
    return configs + [("resident", 1)] if device.type == "cpu" and "resident" in pipelines and threads > 1 else configs


def _pipeline_run(pipeline: str, device: torch.device, threads: int | None, train_set, val_set, seed: int) -> dict:
    """A fresh seeded model and its loaders for one configuration of `benchmark_pipelines`."""
    loaders = input_pipeline(pipeline)(train_set, val_set, device=device, seed=seed)
    seed_everything(seed)
    model = to_device(MnistModel(), device)
    run = {"pipeline": pipeline, "device": str(device), "threads": threads}
    return run | {"loaders": loaders, "model": model, "history": []}


def _pipeline_epoch(run: dict) -> None:
    """One epoch of fit for one configuration of `benchmark_pipelines`, with its CPU threads, then as before."""
    default_threads = torch.get_num_threads()
    torch.set_num_threads(run["threads"] or default_threads)
    try:
        run["history"] += fit(1, LESSON.lrs[0], run["model"], *run["loaders"], progress=False, verbose=False)
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


def benchmark_fit(
    root: str | Path = "data",
    device: str | torch.device | None = None,
    rounds: int = 7,
    limit: int | None = None,
    seed: int = LESSON.seed,
    verbose: bool = True,
) -> dict:
    """Seconds per epoch of `helpers.fit` against the lesson's four lines alone, over the same device-resident data.

    "four lines" is the lesson's loop and nothing else: `model.training_step(batch)`, backward, step, zero
    the gradients, then the same `evaluate`. The two take turns, one epoch each (A B, B A, ...), from the
    same seeded weights; the first round is warm-up.
    """
    if rounds < 2:
        raise ValueError(f"rounds must be at least 2: the first is warm-up, timed apart; got {rounds}")
    device = get_default_device(device)
    train_set, val_set = split_dataset(load_mnist(root), seed=seed, limit=limit)
    train, val = resident_loaders(train_set, val_set, device=device, seed=seed)
    seed_everything(seed)
    start = to_device(MnistModel(), device)
    fitted, bare = copy.deepcopy(start), copy.deepcopy(start)
    optimizer = torch.optim.SGD(bare.parameters(), LESSON.lrs[0])
    runs = {
        "fit": lambda: fit(1, LESSON.lrs[0], fitted, train, val, progress=False, verbose=False),
        "four lines": lambda: (train_epoch(bare, train, optimizer), evaluate(bare, val)),
    }
    seconds = take_turns(runs, rounds, alternate=True)  # each ends with evaluate's read of the device: finished
    result = {"device": str(device), "images": len(train_set), "rounds": rounds}
    result["loops"] = {name: epoch_times(times[1:]) for name, times in seconds.items()}
    if verbose:
        print(format_fit_overhead(result))
    return result


def format_fit_overhead(result: dict) -> str:
    """`benchmark_fit`'s result as a Markdown table: each loop's median epoch, its spread, and the ratio."""
    loops = result["loops"]
    columns = {
        "loop": lambda r: r["loop"],
        "s/epoch (fastest-slowest)": lambda r: f"{r['epoch_s']:.3f} ({_spread(r)})",
        "vs four lines": lambda r: f"{r['epoch_s'] / loops['four lines']['epoch_s']:.3f}x",
    }
    rows = [{"loop": name} | times for name, times in loops.items()]
    head = f"{result['images']:,} images an epoch on {result['device']}, medians of {result['rounds'] - 1} epochs\n"
    return head + markdown_table(rows, columns)


# ==================================================================================================
# Speed features: mixed precision, TF32, torch.compile, the profiler, GPU memory (notebooks 09 and 11)
# ==================================================================================================

AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def bf16_native(device: str | torch.device) -> bool:
    """Whether `device` computes in bfloat16 natively: x86 CPUs with AVX-512 BF16 or AMX, GPUs from Ampere on."""
    device = torch.device(device)
    if device.type == "cpu":  # without these instructions every bfloat16 product is converted, many times slower
        return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return device.type == "xpu"


def autocast_dtype(amp: torch.dtype | str | None, device: str | torch.device) -> torch.dtype | None:
    """The dtype to autocast to for `amp` (None, torch.bfloat16 or torch.float16, or their names) on `device`."""
    if amp is None:
        return None
    dtype = AMP_DTYPES.get(amp.removeprefix("torch.")) if isinstance(amp, str) else amp
    if dtype not in AMP_DTYPES.values():
        raise ValueError(f"amp must be torch.bfloat16, torch.float16 or None (full float32), got {amp!r}")
    device = torch.device(device)
    if dtype == torch.float16 and device.type == "cpu":
        raise ValueError(
            "float16 autocast needs a GPU: on the CPU it is emulated and slow, and there is no loss scaling. "
            "Use torch.bfloat16 on the CPU (mixed_precision(torch.bfloat16), or --amp bfloat16), or train on a GPU"
        )
    if dtype == torch.bfloat16 and device.type == "cuda" and not bf16_native(device):
        raise ValueError(
            f"{device} has no native bfloat16 (a T4, a V100 and older GPUs emulate it, slowly): use "
            "torch.float16 there, which mixed_precision pairs with loss scaling"
        )
    return dtype


def scaled_gradients(loss: torch.Tensor, scaler: torch.amp.GradScaler) -> torch.Tensor:
    """The loss's value, with the gradients of scaler.scale(loss): float16's loss scaling (notebook 11)."""
    scaled = scaler.scale(loss)  # nanoGPT's `scaler.scale(loss)`: the loss times the scale (a disabled scaler: 1)
    return loss.detach() + (scaled - scaled.detach())  # the value of the first term, the gradients of the second


class MixedPrecision(Wrapped):
    """`model`, its training step under autocast to `amp`, float16's loss scaled for backward (notebook 11).

    Decided once, as nanoGPT decides its `ctx` and `scaler`, so that the step has no branch: the autocast's dtype,
    and a GradScaler enabled for float16 alone (bfloat16 keeps float32's range; a disabled scaler gives the loss as it
    is). The autocast is made at each step, as in PyTorch's AMP recipe, for the device the model is on then: a
    wrapped model moved afterwards (`to_device(wrapped, "cuda")`) autocasts there. The step returns the loss itself,
    which `fit` adds up, carrying the scaled loss's gradients (`scaled_gradients`): `loss.backward()` computes the
    gradients of loss x scale, so that float16's small ones do not round to zero, and the optimizer that
    `mixed_precision` gives `fit` unscales them before its step (`ScaledOptimizer`).

    Every term of the loss belongs in `training_step` (a subclass's: `super().training_step(batch) + penalty`). A
    term added to the returned loss outside it runs without autocast and is not scaled, so with float16 the
    unscaling divides its gradient by the scale (65,536 at first) and training all but ignores it. With bfloat16
    there is no scaler, and such a term trains as written.
    """

    def __init__(self, model: nn.Module, amp: torch.dtype | str | None):
        super().__init__(model)
        device = model_device(model)
        self.dtype = autocast_dtype(amp, device)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.dtype == torch.float16)

    def training_step(self, batch: Any) -> torch.Tensor:
        device_type = model_device(self.module).type  # where the model is now (fit has checked the batch is there)
        with torch.autocast(device_type, dtype=self.dtype, enabled=self.dtype is not None):  # nanoGPT's `with ctx:`
            loss = self.module.training_step(batch)  # the forward pass and the loss, in 16 bits where that is safe
        return scaled_gradients(loss, self.scaler)


class ScaledOptimizer(torch.optim.Optimizer):
    """`optimizer`, its step through a GradScaler, as nanoGPT's `scaler.step(optimizer); scaler.update()` (notebook 11).

    The step unscales the gradients, is skipped if they hold inf or NaN, and adjusts the scale. To the code around
    it, it is the optimizer inside, as Accelerate's `AcceleratedOptimizer` is: its `param_groups` (so that an
    `lr_scheduler` built on it sets the inner learning rate), and every attribute it does not have itself (`state`,
    `defaults`, ...). `unscale_()` unscales the gradients before the step, for clipping them between backward and
    step as PyTorch's AMP recipe does; the step then does not unscale them again. Its state is the optimizer's, the
    scaler's beside it: a checkpoint records the optimizer inside (`.optimizer`), so that a plain `fit` resumes a
    float16 run (ignoring the scaler's state), and a float16 run resumes a plain one.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler):
        # No super().__init__(): the inner optimizer holds the parameters, their groups and the state.
        self.optimizer, self.scaler = optimizer, scaler

    def __getattr__(self, name: str) -> Any:
        if name == "optimizer":  # not set yet (a copy being made): no optimizer to ask
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    def add_param_group(self, param_group: dict) -> None:
        self.optimizer.add_param_group(param_group)

    def unscale_(self) -> None:
        """Divide the gradients by the scale now (before clipping them); the step that follows leaves them so."""
        self.scaler.unscale_(self.optimizer)

    def step(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none)

    def state_dict(self) -> dict:
        return self.optimizer.state_dict() | {"grad_scaler": self.scaler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)  # an optimizer ignores the scaler's entry
        if state.get("grad_scaler"):  # a run without float16 saved none: the scale starts afresh
            self.scaler.load_state_dict(state["grad_scaler"])


def with_scaler(opt_func: Callable[..., torch.optim.Optimizer], scaler: torch.amp.GradScaler) -> Callable:
    """`opt_func`, its optimizers stepping through `scaler` (`ScaledOptimizer`); named as `opt_func`, which `fit`
    records, so that a checkpoint resumes with mixed precision or without."""

    def scaled(params: Any, lr: float) -> ScaledOptimizer:
        return ScaledOptimizer(opt_func(params, lr), scaler)

    scaled.__name__ = getattr(opt_func, "__name__", "optimizer")
    return scaled


def mixed_precision(
    model: nn.Module, amp: torch.dtype | str | None, opt_func: Callable = torch.optim.SGD
) -> tuple[nn.Module, Callable]:
    """`model` trained under autocast to `amp`, and the `opt_func` to give `fit` with it (notebook 11).

        model, opt_func = mixed_precision(model, torch.float16)
        fit(5, 0.5, model, train_loader, val_loader, opt_func)

    Decided once, as nanoGPT decides: without `amp`, `model` and `opt_func` as they are; with bfloat16, the model
    under autocast (`MixedPrecision`); with float16, also the loss scaled and the optimizer's step through the
    scaler (`ScaledOptimizer`).
    """
    if autocast_dtype(amp, model_device(model)) is None:
        return model, opt_func
    wrapped = MixedPrecision(model, amp)
    return wrapped, (with_scaler(opt_func, wrapped.scaler) if wrapped.scaler.is_enabled() else opt_func)


class Compiled(Wrapped):
    """`model`, its training step compiled with `torch.compile(mode=mode)` (notebook 11); the rest as it was."""

    def __init__(self, model: nn.Module, mode: str = "default"):
        super().__init__(model)
        self.compiled_step = torch.compile(model.training_step, mode=mode)

    def training_step(self, batch: Any) -> torch.Tensor:
        return self.compiled_step(batch)


def compile_mode(mode: bool | str, device: str | torch.device) -> str | None:
    """The torch.compile mode for `mode` (True: "default"; False: None, nothing compiled) on `device` (notebook 11)."""
    if not mode:
        return None
    mode = "default" if mode is True else mode
    if mode not in COMPILE_MODES:
        raise ValueError(f"mode must be True, False or one of {', '.join(COMPILE_MODES)}; got {mode!r}")
    device = torch.device(device)
    if mode == "reduce-overhead" and device.type != "cuda":
        raise ValueError(
            f"mode='reduce-overhead' records CUDA graphs, so it needs a CUDA GPU; the device is {device}. "
            "Use the default mode there: compile_model(model), or --compile"
        )
    return mode


def check_speed_features(amp: torch.dtype | str | None, compile: bool | str, device: str | torch.device) -> None:
    """Refuse, before any work, what `device` cannot run: float16 autocast or CUDA graphs without a GPU, ..."""
    autocast_dtype(amp, device)
    compile_mode(compile, device)


def compile_model(model: nn.Module, mode: bool | str = True) -> nn.Module:
    """`model` with its training step compiled (`Compiled`), or, with `mode=False`, `model` itself.

    The training step is the forward pass and the loss: what `torch.compile` can fuse. The model keeps its
    own methods and weights; train the returned wrapper, save either.
    """
    mode = compile_mode(mode, model_device(model))
    if mode is None:
        return model
    # On a machine without CUDA, a CUDA build of PyTorch logs that it found no CUDA runtime when torch.compile first
    # imports this module: not news here. Imported now, with that logger quiet for the import alone.
    with _logger_level("torch.utils.cpp_extension", logging.ERROR):
        importlib.import_module("torch.utils.cpp_extension")
    return Compiled(model, mode)


@contextlib.contextmanager
def _logger_level(name: str, level: int) -> Iterator[None]:
    """Within the block, logger `name` at `level`; then at the level it had."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def tf32(enabled: bool = True) -> Iterator[None]:
    """Within the block: float32 matrix products on CUDA in TF32 (Ampere and newer GPUs) or not; then as before."""
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    matmul.fp32_precision = "tf32" if enabled else "ieee"
    try:
        yield
    finally:
        matmul.fp32_precision = before


def mlp(*sizes: int) -> Classifier:
    """A feed-forward classifier with ReLU between layers: mlp(784, 4096, 4096, 10) is 784-4096-4096-10."""
    layers: list[nn.Module] = [nn.Flatten()]
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        layers += [nn.Linear(n_in, n_out)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
    return Classifier(nn.Sequential(*layers))


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


def _speed_config(config: str, sizes: Sequence[int], lr: float, train: DeviceResidentLoader, seed: int) -> dict:
    """A fresh seeded model, wrapped for one `benchmark_speed` configuration, its optimizer, data and switches."""
    seed_everything(seed)
    model = to_device(mlp(*sizes), train.device)
    compiled = compile_model(model, {"compile": "default", "compile reduce-overhead": "reduce-overhead"}.get(config))
    wrapped, opt_func = mixed_precision(compiled, AMP_DTYPES.get(config))
    optimizer = opt_func(model.parameters(), lr)
    return {"model": wrapped, "optimizer": optimizer, "tf32": config == "tf32", "train": train}


def _speed_epoch(run: dict) -> None:
    """One epoch of `train_epoch` for one configuration of `benchmark_speed`, ending with a read: the device is done."""
    with tf32(run["tf32"]):
        train_epoch(run["model"], run["train"], run["optimizer"])


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

    For each model of SPEED_MODELS and each device, the configurations (`configs`, by default what the
    device computes natively: `speed_configs`) take turns, one epoch each. The first epoch is reported
    apart (`first_s`: it holds torch.compile's compilation and every warm-up); the steady state is the
    median of the later epochs, with their spread. Each row also has the validation accuracy reached, so a
    trick that costs accuracy shows.
    """
    if epochs < 2:
        raise ValueError(f"epochs must be at least 2: the first is warm-up, timed apart; got {epochs}")
    devices = [as_device(d) for d in devices or available_devices()]
    train_set, val_set = split_dataset(load_mnist(root), seed=seed, limit=limit)
    rows = []
    for device in devices:
        names = configs or speed_configs(device)  # asked for by name, a configuration runs even where it is slow
        for model_name in models:
            sizes, batch_size, lr = SPEED_MODELS[model_name]
            train = DeviceResidentLoader.from_dataset(train_set, batch_size, shuffle=True, device=device, seed=seed)
            val = DeviceResidentLoader.from_dataset(val_set, 1000, device=device)
            runs = {name: _speed_config(name, sizes, lr, _same_order(train), seed) for name in names}
            seconds = take_turns({name: partial(_speed_epoch, run) for name, run in runs.items()}, epochs)
            for name, run in runs.items():
                rows.append(
                    {"model": "-".join(map(str, sizes)), "batch_size": batch_size, "device": str(device)}
                    | {"config": name}
                    | epoch_times(seconds[name][1:])
                    | {"first_s": seconds[name][0], "val_acc": evaluate(run["model"], val)["val_acc"]}
                )
            base = rows[-len(runs)]["epoch_s"]
            for row in rows[-len(runs) :]:
                row["speedup"] = base / row["epoch_s"]
            del runs
    if verbose:
        print(format_speed(rows))
    return rows


def gpu_memory(device: str | torch.device = "cuda") -> dict[str, int]:
    """Bytes that tensors hold on a CUDA device now (`allocated`) and that PyTorch's cache holds (`reserved`)."""
    return {"allocated": torch.cuda.memory_allocated(device), "reserved": torch.cuda.memory_reserved(device)}


def largest_batch(model: nn.Module, input_shape: Sequence[int] = (784,), start: int = 64, stop: int = 2**20) -> int:
    """The largest batch, doubling from `start`, with which a forward and backward pass fit in GPU memory."""
    device, fits = model_device(model), 0
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

    The steps are `train_epoch`'s, the lesson's four lines, their phases labelled by wrapping the loader, the
    model and the optimizer: `data` (waiting for the next batch, on the device), `forward`, `backward` and
    `optimizer`. One batch is drawn before profiling starts, so that starting workers is not counted. On CUDA the
    device is synchronized at the end of every phase, so that each phase's time includes its GPU work. With
    `trace`, the timeline is written there for Perfetto (ui.perfetto.dev) or chrome://tracing.
    """
    device = model_device(model)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    phases = _Phases(device)
    batches = iter(loader)
    next(batches)
    optimizer = _LabelledOptimizer(torch.optim.SGD(model.parameters(), lr), phases)
    with _environ_default("KINETO_LOG_LEVEL", "6"):  # the profiler's own start/stop lines on stderr, silenced
        with profile(activities=activities) as prof:
            train_epoch(_Labelled(model, phases), _labelled(batches, steps, phases), optimizer)
        if trace is not None:
            Path(trace).parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(trace))
    events = prof.key_averages()
    seconds = {e.key: e.cpu_time_total / 1e6 for e in events if e.key in PHASES}
    return {"seconds": {phase: seconds.get(phase, 0.0) for phase in PHASES}, "steps": steps, "profile": prof}


@contextlib.contextmanager
def _environ_default(name: str, value: str) -> Iterator[None]:
    """Within the block, environment variable `name` is `value` unless it was set; then as it was."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


class _Phases:
    """The profile's labels, one open at a time: each phase of a step begins where the one before it ends."""

    def __init__(self, device: torch.device):
        self.device, self.open = device, None

    def begin(self, phase: str | None) -> None:
        synchronize(self.device)  # the phase before ends when its work on the device does
        if self.open is not None:
            self.open.__exit__(None, None, None)
        self.open = record_function(phase).__enter__() if phase else None


def _labelled(batches: Iterator, steps: int, phases: _Phases) -> Iterator:
    """The next `steps` batches, each waited for in the phase `data`."""
    for _ in range(steps):
        phases.begin("data")
        yield next(batches)
    phases.begin(None)


class _Labelled(Wrapped):
    """`model`, its training step in the phase `forward`, and what follows (the backward pass) in `backward`."""

    def __init__(self, model: nn.Module, phases: _Phases):
        super().__init__(model)
        self.phases = phases

    def training_step(self, batch: Any) -> torch.Tensor:
        self.phases.begin("forward")
        loss = self.module.training_step(batch)
        self.phases.begin("backward")
        return loss


class _LabelledOptimizer:
    """`optimizer`, its step and the zeroing of the gradients in the phase `optimizer`."""

    def __init__(self, optimizer: torch.optim.Optimizer, phases: _Phases):
        self.optimizer, self.phases = optimizer, phases

    def step(self) -> None:
        self.phases.begin("optimizer")
        self.optimizer.step()

    def zero_grad(self) -> None:
        self.optimizer.zero_grad()


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


def _stack_depths(spans: list[dict]) -> list[int]:
    """The nesting depth of each span (sorted by start), as a flame chart stacks them."""
    depths, ends = [], []
    for span in spans:
        while ends and ends[-1] <= span["ts"]:
            ends.pop()
        depths.append(len(ends))
        ends.append(span["ts"] + span["dur"])
    return depths


def plot_trace(path: str | Path, step: int = 1, levels: int = 3):
    """One training step of a `profile_training` trace as a timeline, as Perfetto shows it (notebook 09)."""
    import matplotlib.pyplot as plt

    events = json.loads(Path(path).read_text())["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") != "Trace" and e.get("dur", 0) > 0]
    starts = sorted(e["ts"] for e in spans if e["name"] == PHASES[0] and e.get("cat") == "user_annotation")
    if not 0 <= step < len(starts) - 1:
        raise ValueError(f"step must be from 0 to {len(starts) - 2}: the trace holds {len(starts)} steps")
    t0, t1 = starts[step], starts[step + 1]
    spans = sorted((e for e in spans if t0 <= e["ts"] < t1), key=lambda e: (e["ts"], -e["dur"]))
    rows = list(dict.fromkeys((e["pid"], e["tid"]) for e in spans))
    colors = {"data": "tab:orange", "forward": "tab:blue", "backward": "tab:green", "optimizer": "tab:purple"}
    fig, ax = plt.subplots(figsize=(10, 0.5 * levels * len(rows) + 1.4))
    for r, row in enumerate(rows):
        mine = [e for e in spans if (e["pid"], e["tid"]) == row]
        phase = "data"
        for e, depth in zip(mine, _stack_depths(mine)):
            if depth >= levels:
                continue
            phase = e["name"] if e["name"] in colors else phase
            y, x, width = r * levels + depth, (e["ts"] - t0) / 1e3, e["dur"] / 1e3
            ax.barh(y, width, left=x, height=0.9, color=colors[phase], alpha=1 - 0.25 * depth, edgecolor="white")
            label = e["name"].split(": ")[-1].split("#")[0].removeprefix("aten::")[:24]
            if width > (t1 - t0) / 1e3 * (len(label) + 2) / 160:  # a label only where it fits
                ax.text(x + width / 2, y, label, ha="center", va="center", fontsize=7, clip_on=True)
    labels = [re.sub(r"^thread \d+ \((.*)\)$", r"CPU thread (\1)", names.get(row, str(row[1]))) for row in rows]
    ax.set_yticks([r * levels for r in range(len(rows))], labels)
    ax.set_ylim(len(rows) * levels - 0.5, -0.5)
    ax.set(xlim=(0, (t1 - t0) / 1e3), xlabel="milliseconds since the step began")
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for color in colors.values()]
    ax.legend(handles, list(colors), ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
    ax.set_title(f"{Path(path).stem}: training step {step} of the trace, {(t1 - t0) / 1e3:.2f} ms")
    return fig
