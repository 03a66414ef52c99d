"""Many GPUs, for notebook 10 (which writes the training scripts): when more processes pay, and a picture of DDP."""

from __future__ import annotations

import copy
import json
import os
import socket
import statistics
import tempfile
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import helpers_data
from helpers import LESSON, DeviceResidentLoader, MnistModel, load_mnist, seed_everything, split_dataset
from helpers_common import markdown_table, take_turns


def free_port() -> int:
    """A TCP port free on this machine now, for the processes to meet on (MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def benchmark_ddp(
    root: str | Path = "data",
    nprocs: int = 2,
    hidden_sizes: tuple[int, ...] = (32, 4096),
    epochs: int = 3,
    limit: int | None = 10_000,
    device: str = "cpu",
    seed: int = LESSON.seed,
) -> list[dict]:
    """Seconds per epoch of one process against `nprocs` DDP ones, taking turns, and communication's share of a step."""
    if nprocs < 2 or LESSON.batch_size % nprocs:
        raise ValueError(f"nprocs must be at least 2 and divide a batch of {LESSON.batch_size}, got {nprocs}")
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1 for a timing, got {epochs}")
    helpers_data.ensure_mnist(root)  # once, before the processes start
    settings = {"root": str(root), "hidden_sizes": list(hidden_sizes), "epochs": epochs, "limit": limit}
    settings |= {"device": device, "seed": seed, "port": free_port()}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        torch.multiprocessing.spawn(_ddp_bench_worker, args=(nprocs, settings, str(out)), nprocs=nprocs)
        return json.loads(out.read_text())


def _ddp_bench_worker(rank: int, world_size: int, settings: dict, out: str) -> None:
    """One process of `benchmark_ddp` (spawn imports it by name); rank 0 writes the rows to `out`."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(settings["port"]))
    device = torch.device(settings["device"])
    if device.type == "cuda":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    all_threads = torch.get_num_threads()
    shared_threads = max(1, all_threads // world_size) if device.type == "cpu" else all_threads
    dist.init_process_group(dist.get_default_backend_for_device(device), rank=rank, world_size=world_size)
    try:
        train_set, _ = split_dataset(load_mnist(settings["root"]), seed=settings["seed"], limit=settings["limit"])
        data = DeviceResidentLoader.from_dataset(train_set, LESSON.batch_size, shuffle=True, device=device)
        turns = {}
        for hidden in settings["hidden_sizes"]:
            seed_everything(settings["seed"])
            net = MnistModel(784, hidden, 10).to(device)
            ids = [device] if device.type == "cuda" else None
            for config, model, share in [
                ("1 process", copy.deepcopy(net), slice(None)),  # whole batches; the others wait
                ("DDP", DDP(copy.deepcopy(net), device_ids=ids), slice(rank, None, world_size)),
                ("no communication", copy.deepcopy(net), slice(rank, None, world_size)),  # the computation alone
            ]:
                alone = config == "1 process"
                threads = all_threads if alone else shared_threads
                turns[hidden, config] = partial(_epoch, model, data, share, threads, works=rank == 0 or not alone)
        seconds = take_turns(turns, settings["epochs"], before=dist.barrier)  # the barrier untimed, before each
        torch.set_num_threads(all_threads)
        if rank == 0:
            rows = [_row(seconds, h, world_size, device, len(train_set)) for h in settings["hidden_sizes"]]
            Path(out).write_text(json.dumps(rows))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _epoch(model, data, share: slice, threads: int, works: bool) -> None:
    """One epoch of the lesson's four lines on `share` of each batch; nothing for a process left waiting."""
    if not works:
        return
    torch.set_num_threads(threads)
    optimizer = torch.optim.SGD(model.parameters(), LESSON.lrs[0])
    for images, labels in data:
        loss = F.cross_entropy(model(images[share]), labels[share])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    loss.item()  # waits for the device to finish


def _row(seconds: dict, hidden: int, processes: int, device: torch.device, images: int) -> dict:
    one, ddp, alone = (statistics.median(seconds[hidden, c]) for c in ("1 process", "DDP", "no communication"))
    spread = {f"{name}_s_{end}": f(seconds[hidden, config]) for name, config in (("one", "1 process"), ("ddp", "DDP"))
              for end, f in (("min", min), ("max", max))}  # fmt: skip
    return {
        "hidden_size": hidden,
        "parameters": 784 * hidden + hidden + hidden * 10 + 10,
        "device": device.type,
        "processes": processes,
        "images": images,
        "one_s": one,
        "ddp_s": ddp,
        "compute_s": alone,
        "speedup": one / ddp,
        "communication_share": max(0.0, 1 - alone / ddp),
    } | spread


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
