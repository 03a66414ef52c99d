"""Many GPUs, for notebook 10: data-parallel training with DistributedDataParallel, under torchrun or spawn.

It composes around the lesson's functions and wraps the model, as nanoGPT does (`model = DDP(model)`):
`to_ddp(model, device)` returns a `DDPModel`, whose training step runs through DDP and whose validation
averages sum over the processes, the model itself unchanged; the input pipelines of `helpers_run` give each
process its share of the batches one process would form. `train_distributed` is `helpers_run.train_lesson` in
each process. With one process every function here is the plain run, so the single-process run is the
world-size-1 case of the same code.

    torchrun --standalone --nproc_per_node=2 helpers_cli.py train
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import io
import json
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import helpers_data
from helpers import (
    LESSON,
    MnistModel,
    accelerator_count,
    get_default_device,
    load_mnist,
    seed_everything,
    split_dataset,
    to_device,
)
from helpers_common import Wrapped, epoch_times, markdown_table, take_turns, train_epoch
from helpers_run import ShardedResidentLoader, check_processes, check_schedule, train_lesson
from helpers_speed import check_speed_features, compile_model, mixed_precision

# ==================================================================================================
# The process group: who am I, how many are we
# ==================================================================================================


def rank_and_world() -> tuple[int, int]:
    """(this process's rank, the number of processes) in the process group; (0, 1) outside one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """True in rank 0, the process that prints and saves (and in a plain single-process run)."""
    return rank_and_world()[0] == 0


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum `tensor` in place over every process of the group (every one must call it); return it."""
    if rank_and_world()[1] > 1:
        dist.all_reduce(tensor)
    return tensor


def barrier() -> None:
    """Wait until every process of the group gets here; nothing to wait for in one process."""
    if rank_and_world()[1] > 1:
        dist.barrier()


def quiet_unless_main() -> contextlib.AbstractContextManager:
    """A block in which ranks other than 0 print nothing: N processes run the same code, and rank 0 speaks for all.

    Standard output is set aside until the block ends; errors, on stderr, still show. Nothing outlives the block.
    """
    return contextlib.nullcontext() if is_main_process() else contextlib.redirect_stdout(io.StringIO())


# ==================================================================================================
# The model, trained by every process: DDP around its training step
# ==================================================================================================


class _TrainingStep(nn.Module):
    """What DDP wraps: a module whose forward is the model's training step, so DDP averages its gradients."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: Any) -> torch.Tensor:
        return self.model.training_step(batch)


def weighted_allreduce_hook(share, bucket):  # no annotations: DDP compares them with its own types
    """A DDP communication hook: the gradient all-reduce, each process's gradients weighed by its share of the batch.

    Each process's gradient is the mean over its share; weighing it by (its images / the batch's)
    before summing gives the mean over the whole batch, as in one process, also when the last batch
    does not split evenly (53 + 52). DDP's own hook (`allreduce_hook`) weighs every process 1 / world_size.
    """
    gradients = bucket.buffer().mul_(share["weight"])
    return dist.all_reduce(gradients, async_op=True).get_future().then(lambda done: done.value()[0])


class DDPModel(Wrapped):
    """`model`, trained by every process of the group: its training step through DistributedDataParallel (notebook 10).

    Named for DDP, which it runs; not `torch.nn.DataParallel` (threads in one process), which it is not. DDP averages
    the gradients over the processes, each weighed by its share of the batch; the validation means are the model's
    own, over each process's images, summed over the processes before they divide. The model stays the same plain
    module, unchanged: its weights, `state_dict` and checkpoints are one process's. The training loss `fit` reports
    is this process's share's; validation covers every process's images.
    """

    def __init__(self, model: nn.Module, device: str | torch.device):
        super().__init__(model)
        self.device = torch.device(device)
        device_ids = [self.device] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(_TrainingStep(model), device_ids=device_ids)
        self.share = {"weight": torch.ones((), device=self.device)}
        self.ddp.register_comm_hook(self.share, weighted_allreduce_hook)

    def training_step(self, batch: Any) -> torch.Tensor:
        images = torch.full((), float(len(batch[1])), device=self.device)
        self.share["weight"] = images / all_reduce_sum(images.clone())  # one all-reduce of a number per step
        return self.ddp(batch)

    def validation_epoch_end(self, outputs: Sequence[dict]) -> dict[str, float]:
        """The means over every process's images: this process's means times its images, summed, divided once."""
        mine, images = self.module.validation_epoch_end(outputs), sum(x["n"] for x in outputs)
        sums = [mine["val_loss"] * images, mine["val_acc"] * images, images]
        loss, acc, count = all_reduce_sum(torch.tensor(sums, dtype=torch.float64, device=self.device)).tolist()
        return {"val_loss": loss / count, "val_acc": acc / count}


def to_ddp(model: nn.Module, device: str | torch.device) -> nn.Module:
    """`model` wrapped in `DDPModel` for the processes of the group; in one process, `model` itself.

    Named as `to_device` is, for what it gives: not `torch.nn.parallel.data_parallel`, which is one process
    driving many GPUs.
    """
    return DDPModel(model, device) if rank_and_world()[1] > 1 else model


# ==================================================================================================
# Launching: torchrun, or torch.multiprocessing.spawn from a notebook
# ==================================================================================================


def default_backend(device: str | torch.device) -> str:
    """The communication backend PyTorch uses for a device type: nccl for CUDA, gloo for the CPU."""
    return dist.get_default_backend_for_device(torch.device(device))


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
    if device.type != "cpu":
        count = accelerator_count()
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
        if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:  # share the cores, not each take them all
            _BEFORE_THE_GROUP["threads"] = torch.get_num_threads()
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return device


_BEFORE_THE_GROUP: dict[str, int] = {}  # what init_distributed changed in this process, put back on leaving the group


def close_distributed() -> None:
    """Leave the process group, if there is one (every process, at the end); the CPU threads as they were before it."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    if "threads" in _BEFORE_THE_GROUP:
        torch.set_num_threads(_BEFORE_THE_GROUP.pop("threads"))


def train_distributed(
    root: str | Path = "data",
    device: str | None = None,
    backend: str | None = None,
    epochs: Sequence[int] = LESSON.epochs,
    lrs: Sequence[float] = LESSON.lrs,
    pipeline: str = "seeded",
    limit: int | None = None,
    save: str | Path | None = None,
    seed: int = LESSON.seed,
    hidden_size: int = 32,
    amp: str | None = None,
    compile: bool | str = False,
) -> dict:
    """`helpers_run.train_lesson` in each process of the group torchrun (or `ddp_worker`) set up; alone, the plain run.

    Each process joins the group, takes its share of every batch and trains the model in `to_ddp`; rank 0
    fetches the data first, prints and saves. `amp` and `compile` wrap the model for notebook 11's speed features.
    A process group that was there before the call is left as it was; one the call joined, it leaves.
    """
    joined = not (dist.is_available() and dist.is_initialized())  # a caller's own group outlives the call
    device = init_distributed(device, backend)
    rank, world = rank_and_world()
    try:
        check_processes(world)  # before any work, in every process alike
        check_schedule(epochs, lrs)
        check_speed_features(amp, compile, device)  # float16 and CUDA graphs on this process's device
        if rank == 0:
            helpers_data.ensure_mnist(root)
        barrier()  # the others read the data once rank 0 has verified it
        with quiet_unless_main():
            if world > 1:
                print(f"{world} processes, each with its share of every batch")
            result = train_lesson(
                root, device, epochs=epochs, lrs=lrs, pipeline=pipeline, limit=limit,
                save=save if rank == 0 else None, seed=seed, hidden_size=hidden_size,
                rank=rank, world_size=world, progress=None if rank == 0 else False,
                wrap=partial(_for_training, device=device, amp=amp, compile=compile),
            )  # fmt: skip
        barrier()  # the saved file is complete before any process returns
        return result
    finally:
        if joined:
            close_distributed()


def _for_training(
    model: nn.Module, device: torch.device, amp: str | None, compile: bool | str
) -> tuple[nn.Module, Callable]:
    """`model` wrapped to train in this process: compiled, under autocast, through DDP, as asked; and its opt_func."""
    trained, opt_func = mixed_precision(compile_model(model, compile), amp)
    return to_ddp(trained, device), opt_func


def free_port() -> int:
    """A TCP port free on this machine now, for the processes to meet on (MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def child_errors() -> Iterator[list[str]]:
    """Collect what child processes write to stderr, in a list, instead of letting it reach the notebook.

    Spawned processes inherit file descriptor 2, not Python's `sys.stderr`, so that is what is
    redirected; `torch.multiprocessing`'s own notice that it stopped the others is silenced too.
    """
    lines: list[str] = []
    spawn_log = logging.getLogger("torch.multiprocessing.spawn")
    level, saved = spawn_log.level, os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as file:
        os.dup2(file.fileno(), 2)
        spawn_log.setLevel(logging.ERROR)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            spawn_log.setLevel(level)
            file.seek(0)
            lines.extend(file.read().splitlines())


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


# ==================================================================================================
# One process against N, side by side (make bench ARGS=--ddp)
# ==================================================================================================


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
    check_processes(nprocs)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1 for a timing, got {epochs}")
    helpers_data.ensure_mnist(root)  # once, before the processes start
    settings = {"root": str(root), "hidden_sizes": list(hidden_sizes), "epochs": epochs, "limit": limit}
    settings |= {"device": device, "seed": seed}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        torch.multiprocessing.spawn(_ddp_bench_worker, args=(nprocs, free_port(), settings, str(out)), nprocs=nprocs)
        rows = json.loads(out.read_text())
    if verbose:
        print(format_ddp(rows))
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
        train_set, _ = split_dataset(load_mnist(settings["root"]), seed=settings["seed"], limit=settings["limit"])
        resident = partial(
            ShardedResidentLoader.from_dataset, train_set, shuffle=True, device=device, seed=settings["seed"]
        )
        whole, share = resident(), resident(rank=rank, world_size=world_size)
        shared_threads, all_threads = torch.get_num_threads(), os.cpu_count() or 1
        runs = []
        for hidden in settings["hidden_sizes"]:
            seed_everything(settings["seed"])
            net = to_device(MnistModel(784, hidden, 10), device)
            for config, model, data in (
                ("1 process", copy.deepcopy(net), whole),
                ("DDP", to_ddp(copy.deepcopy(net), device), share),
                ("no communication", copy.deepcopy(net), share),
            ):
                optimizer = torch.optim.SGD(model.parameters(), LESSON.lrs[0])
                runs.append({"hidden": hidden, "config": config, "run": (model, data, optimizer)})

        def one_epoch(run: dict) -> None:
            alone = run["config"] == "1 process"
            if alone and rank > 0:
                return  # wait at the next barrier while rank 0 trains alone
            torch.set_num_threads(all_threads if alone and device.type == "cpu" else shared_threads)
            train_epoch(*run["run"])  # ends by reading its mean loss, so the device has finished

        turns = {i: partial(one_epoch, run) for i, run in enumerate(runs)}
        seconds = take_turns(turns, settings["epochs"], before=barrier)  # the barrier untimed, before each
        torch.set_num_threads(shared_threads)
        barrier()
        if rank == 0:
            rows = []
            for hidden in settings["hidden_sizes"]:
                s = {r["config"]: epoch_times(seconds[i]) for i, r in enumerate(runs) if r["hidden"] == hidden}
                one, ddp, alone = (s[c]["epoch_s"] for c in ("1 process", "DDP", "no communication"))
                rows.append(
                    {"hidden_size": hidden, "parameters": 784 * hidden + hidden + hidden * 10 + 10}
                    | {"device": device.type, "processes": world_size, "images": len(train_set)}
                    | {f"one_{k[6:]}" if k != "epoch_s" else "one_s": v for k, v in s["1 process"].items()}
                    | {f"ddp_{k[6:]}" if k != "epoch_s" else "ddp_s": v for k, v in s["DDP"].items()}
                    | {"compute_s": alone, "speedup": one / ddp, "communication_share": max(0.0, 1 - alone / ddp)}
                )
            Path(out).write_text(json.dumps(rows))
    finally:
        close_distributed()


DDP_COLUMNS = {
    "model": lambda r: f"784-{r['hidden_size']}-10",
    "parameters": lambda r: f"{r['parameters']:,}",
    "1 process s/epoch": lambda r: f"{r['one_s']:.3f} ({r['one_s_min']:.3f}-{r['one_s_max']:.3f})",
    "N processes s/epoch": lambda r: (
        f"{r['processes']} on {r['device']}: {r['ddp_s']:.3f} ({r['ddp_s_min']:.3f}-{r['ddp_s_max']:.3f})"
    ),
    "speed-up": lambda r: f"{r['speedup']:.2f}x",
    "communication share": lambda r: f"{r['communication_share']:.0%}",
}
format_ddp = partial(markdown_table, columns=DDP_COLUMNS)


def draw_data_parallel(processes: int = 2, batch_size: int = LESSON.batch_size):
    """Data parallelism as a picture: a batch split over processes, each with a model copy; all-reduce (notebook 10)."""
    import matplotlib.pyplot as plt

    share = batch_size // processes
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ax.set(xlim=(0, 10), ylim=(0, 10))
    ax.axis("off")

    def box(x, y, w, h, text, color):
        ax.add_patch(plt.Rectangle((x, y), w, h, facecolor=color, edgecolor="black"))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=9)

    def arrow(x0, y0, x1, y1):
        ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "->"})

    box(2, 8.6, 6, 1, f"one batch of {batch_size} images", "#eeeeee")
    width = 8 / processes
    for rank in range(processes):
        x = 1 + rank * width + 0.15
        w = width - 0.3
        arrow(5, 8.6, x + w / 2, 7.6)
        box(x, 5.2, w, 2.4, f"process {rank} (rank {rank})\n{share} images\nmodel copy: forward, backward", "#cfe2f3")
        box(x, 4.0, w, 0.9, f"its gradients (from {share} images)", "#fce5cd")
        arrow(x + w / 2, 4.0, x + w / 2, 3.1)
        box(x, 0.2, w, 0.9, "the same step: equal weights", "#d9ead3")
        arrow(x + w / 2, 2.1, x + w / 2, 1.1)
    box(1, 2.1, 8, 1, "all-reduce: every process receives the average of all gradients", "#f4cccc")
    ax.set_title(f"Data parallelism with {processes} processes")
    return fig
