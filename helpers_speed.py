"""Speed, for notebooks 09 and 11: input pipelines and speed features measured side by side, mixed
precision, TF32, torch.compile, a speedrun and the profiler.

Everything here composes around the lesson's functions in `helpers`, and wraps the model instead of changing it:
`model, opt_func = mixed_precision(model, torch.bfloat16)` trains under autocast (float16 with a GradScaler) with
`fit(epochs, lr, model, train_loader, val_loader, opt_func)`, and `compile_model(model)` compiles its training step.
"""

from __future__ import annotations

import contextlib
import copy
import gc
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
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, TensorDataset

from helpers import (
    LESSON,
    PIPELINES,
    Classifier,
    DeviceDataLoader,
    DeviceResidentLoader,
    MnistModel,
    as_device,
    available_devices,
    check_hparams,
    evaluate,
    fit,
    get_default_device,
    load_mnist,
    loader_settings,
    model_device,
    seed_everything,
    split_dataset,
    synchronize,
    to_device,
)

# ==================================================================================================
# Tables and timings: one way to write a table, one way to summarise epochs that took turns
# ==================================================================================================


def markdown_table(rows: Sequence[dict], columns: dict[str, Callable[[dict], str]]) -> str:
    """`rows` as a Markdown table: one column per header, its cell written by the function beside it."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for cell in columns.values()) + " |" for row in rows]
    return "\n".join(lines)


def epoch_times(seconds: Sequence[float]) -> dict[str, float]:
    """The median of epochs that took turns with other configurations, and their spread."""
    return {"epoch_s": statistics.median(seconds), "epoch_s_min": min(seconds), "epoch_s_max": max(seconds)}


def train_epoch(model: nn.Module, loader: Iterable, optimizer: Any) -> float:
    """One pass of the lesson's four lines over `loader`, nothing else; the mean loss, read once (a benchmark's epoch).

    The read at the end waits for the device, so a timer around the call measures the work, not its queuing.
    """
    loss_sum = 0.0
    for batch in loader:
        loss = model.training_step(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_sum += loss.detach()
    return float(loss_sum / len(loader))


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


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


# ==================================================================================================
# Input pipelines: the lesson's against tuned and device-resident ones (notebook 09)
# ==================================================================================================


def taught_loaders(
    train_set: Dataset, *evaluation: Dataset, device: torch.device, seed: int = LESSON.seed
) -> tuple[DeviceDataLoader, ...]:
    """The loaders exactly as notebook 02 teaches them: PIL to tensor per image, 2 workers restarted every epoch."""
    kw = {"num_workers": 2, "pin_memory": device.type == "cuda"}
    generator = torch.Generator().manual_seed(seed)
    train = DataLoader(train_set, LESSON.batch_size, shuffle=True, generator=generator, **kw)
    evals = [DataLoader(dataset, LESSON.val_batch_size, shuffle=True, **kw) for dataset in evaluation]
    return tuple(DeviceDataLoader(dl, device) for dl in (train, *evals))


def tuned_loaders(
    train_set: Dataset, *evaluation: Dataset, device: torch.device, seed: int = LESSON.seed
) -> tuple[DeviceDataLoader, ...]:
    """Tensors made once; whole batches indexed at a time; workers only with cores to spare (notebook 09)."""
    loaders = []
    for dataset, size, shuffle in (
        (train_set, LESSON.batch_size, True),
        *((d, LESSON.val_batch_size, False) for d in evaluation),
    ):
        tensors = DeviceResidentLoader.from_dataset(dataset, size, device="cpu")
        tds = TensorDataset(tensors.images.float().div_(255), tensors.labels)
        base = RandomSampler(tds, generator=torch.Generator().manual_seed(seed)) if shuffle else range(len(tds))
        dl = DataLoader(
            tds, sampler=BatchSampler(base, size, drop_last=False), batch_size=None, **loader_settings(device)
        )
        loaders.append(DeviceDataLoader(dl, device))
    return tuple(loaders)


# The benchmark's pipelines: the loaders exactly as taught (not helpers' seeded "lesson" ones), tuned, resident.
BENCH_PIPELINES = {"as_taught": taught_loaders, "tuned": tuned_loaders, "resident": PIPELINES["resident"]}


def benchmark_pipelines(
    root: str | Path = "data",
    devices: Sequence[str] | None = None,
    epochs: int = 3,
    pipelines: Sequence[str] = tuple(BENCH_PIPELINES),
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
    unknown = [p for p in pipelines if p not in BENCH_PIPELINES]
    if unknown:
        raise ValueError(f"unknown pipeline {unknown[0]!r}; choose from {', '.join(BENCH_PIPELINES)}")
    devices = [as_device(d) for d in (devices or available_devices())]
    train_set, val_set = split_dataset(load_mnist(root), seed=seed, limit=limit)
    default_threads = torch.get_num_threads()
    runs = [_pipeline_run(p, d, t, train_set, val_set, seed) for d in devices for p, t in _configs(d, pipelines)]
    for _ in range(epochs):
        for run in runs:
            torch.set_num_threads(run["threads"] or default_threads)
            try:
                run["history"] += fit(1, LESSON.lrs[0], run["model"], *run["loaders"], progress=False, verbose=False)
            finally:
                torch.set_num_threads(default_threads)
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
    loaders = BENCH_PIPELINES[pipeline](train_set, val_set, device=device, seed=seed)
    seed_everything(seed)
    model = to_device(MnistModel(), device)
    run = {"pipeline": pipeline, "device": str(device), "threads": threads}
    return run | {"loaders": loaders, "model": model, "history": []}


def plot_pipelines(rows: Sequence[dict]):
    """Seconds per epoch for each pipeline and device, as horizontal bars; return the Figure."""
    from matplotlib.ticker import LogLocator, ScalarFormatter

    plt = _pyplot()
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
    seed_everything(seed)
    model = to_device(MnistModel(), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, nesterov=momentum > 0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1 - i / (epochs * len(train)))
    train_s, val_accs = 0.0, []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for batch in train:
            loss = model.training_step(batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            schedule.step()  # the learning rate falls a little after every step
        synchronize(device)
        train_s += time.perf_counter() - t0
        val_accs.append(evaluate(model, val)["val_acc"])
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
    train, val = PIPELINES["resident"](train_set, val_set, device=device, seed=seed)
    seed_everything(seed)
    start = to_device(MnistModel(), device)
    fitted, bare = copy.deepcopy(start), copy.deepcopy(start)
    optimizer = torch.optim.SGD(bare.parameters(), LESSON.lrs[0])
    runs = {
        "fit": lambda: fit(1, LESSON.lrs[0], fitted, train, val, progress=False, verbose=False),
        "four lines": lambda: (train_epoch(bare, train, optimizer), evaluate(bare, val)),
    }
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(rounds):
        for name, run in list(runs.items())[:: 1 if i % 2 else -1]:  # A B, then B A: no fixed order
            t0 = time.perf_counter()
            run()  # each ends with evaluate's read of the device: the work has finished
            seconds[name].append(time.perf_counter() - t0)
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


class MixedPrecision(Wrapped):
    """`model`, its training step under autocast to `amp` (notebook 11); float16's loss scaled for backward.

    Decided once, nanoGPT's way, so the step has no branch: without `amp` the autocast is disabled, and so is
    the GradScaler, which then passes everything through. With float16 the scaler's `scale` hooks the loss, so
    `loss.backward()` computes scaled gradients (small ones would round to zero in float16) while the loss
    itself stays unscaled; the optimizer from `mixed_precision`'s `opt_func` unscales them before its step.
    """

    def __init__(self, model: nn.Module, amp: torch.dtype | str | None):
        super().__init__(model)
        device = model_device(model)
        self.dtype = autocast_dtype(amp, device)
        self.autocast = torch.autocast(device.type, dtype=self.dtype, enabled=self.dtype is not None)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.dtype == torch.float16)

    def training_step(self, batch: Any) -> torch.Tensor:
        with self.autocast:
            loss = self.module.training_step(batch)
        loss.register_hook(self.scaler.scale)  # backward() starts from loss x scale, as scaler.scale(loss) would
        return loss


class GradScaled:
    """An optimizer whose step goes through a GradScaler: gradients unscaled, a step with inf or NaN skipped."""

    def __init__(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler):
        self.optimizer, self.scaler = optimizer, scaler

    def step(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none)

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)


def mixed_precision(
    model: nn.Module, amp: torch.dtype | str | None, opt_func: Callable = torch.optim.SGD
) -> tuple[MixedPrecision, Callable]:
    """`model` trained under autocast to `amp`, and the `opt_func` to give `fit` with it (notebook 11).

    model, opt_func = mixed_precision(model, torch.float16)
    fit(5, 0.5, model, train_loader, val_loader, opt_func)
    """
    wrapped = MixedPrecision(model, amp)

    def scaled(params: Any, lr: float) -> GradScaled:
        return GradScaled(opt_func(params, lr), wrapped.scaler)

    scaled.__name__ = getattr(opt_func, "__name__", "optimizer")  # what a checkpoint records as the optimizer
    return wrapped, scaled


class Compiled(Wrapped):
    """`model`, its training step compiled with `torch.compile(mode=mode)` (notebook 11); the rest as it was."""

    def __init__(self, model: nn.Module, mode: str = "default"):
        super().__init__(model)
        self.compiled_step = torch.compile(model.training_step, mode=mode)

    def training_step(self, batch: Any) -> torch.Tensor:
        return self.compiled_step(batch)


def compile_model(model: nn.Module, mode: bool | str = True) -> nn.Module:
    """`model` with its training step compiled (`Compiled`), or, with `mode=False`, `model` itself.

    The training step is the forward pass and the loss: what `torch.compile` can fuse. The model keeps its
    own methods and weights; train the returned wrapper, save either.
    """
    if not mode:
        return model
    mode = "default" if mode is True else mode
    if mode not in COMPILE_MODES:
        raise ValueError(f"mode must be True, False or one of {', '.join(COMPILE_MODES)}; got {mode!r}")
    device = model_device(model)
    if mode == "reduce-overhead" and device.type != "cuda":
        raise ValueError(
            f"mode='reduce-overhead' records CUDA graphs, so it needs a CUDA GPU; the model is on {device}. "
            "Use compile_model(model) there"
        )
    # On a machine without CUDA, a CUDA build of PyTorch logs that it found no CUDA runtime: not news here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    return Compiled(model, mode)


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
            runs = {name: _speed_config(name, sizes, lr, _same_order(train), seed) | {"epoch_s": []} for name in names}
            for _ in range(epochs):
                for run in runs.values():
                    with tf32(run["tf32"]):
                        t0 = time.perf_counter()
                        train_epoch(run["model"], run["train"], run["optimizer"])
                        run["epoch_s"].append(time.perf_counter() - t0)  # train_epoch ends with a read: synced
            for name, run in runs.items():
                rows.append(
                    {"model": "-".join(map(str, sizes)), "batch_size": batch_size, "device": str(device)}
                    | {"config": name}
                    | epoch_times(run["epoch_s"][1:])
                    | {"first_s": run["epoch_s"][0], "val_acc": evaluate(run["model"], val)["val_acc"]}
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

    The phases are `data` (waiting for the next batch, on the device), `forward`, `backward` and
    `optimizer`. One batch is drawn before profiling starts, so that starting workers is not counted.
    On CUDA the device is synchronized in every phase, so that each phase's time includes its GPU work.
    With `trace`, the timeline is written there for Perfetto (ui.perfetto.dev) or chrome://tracing.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # silence the profiler's own start/stop lines on stderr
    device = model_device(model)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    optimizer = torch.optim.SGD(model.parameters(), lr)
    batches = iter(loader)
    next(batches)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            with record_function("data"):
                batch = next(batches)
                synchronize(device)
            with record_function("forward"):
                loss = model.training_step(batch)
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
    plt = _pyplot()
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
