"""helpers_ddp.py: data-parallel training (notebook 10), proven on the CPU with gloo: the same weights as one process,
the same evaluation, and clear refusals.

Notebook 10 itself launches torchrun with two processes (the lesson's loader), two nodes on one machine,
four processes, and a job whose rank 1 fails; `make test` executes it once, and
tests/test_notebooks.py::test_series_results_are_the_lessons[10_many_gpus] checks that each gave one process's
weights and that the failed job ended within a minute. The launches here are the ones the notebook does not make."""

import builtins
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Subset

import helpers
import helpers_ddp
import helpers_run

REPO = helpers.Path(helpers.__file__).resolve().parent


TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]  # the `torchrun` command, from this interpreter


ENV = os.environ | {"HELPERS_PROGRESS": "0", "OMP_NUM_THREADS": "1"}


def _run(command: list[str], cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def _train(data_root, save, *extra) -> list[str]:
    return [str(REPO / "helpers_cli.py"), "--data", str(data_root), "--device", "cpu", "--seed", "7", "--dry-run"] + [
        "train",
        "--save",
        str(save),
        *extra,
    ]


def _max_difference(a_path, b_path) -> float:
    a, b = torch.load(a_path), torch.load(b_path)
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.fixture(scope="module")
def one_process(data_root, tmp_path_factory):
    """The single-process dry run with the resident loader (--fast): the weights two processes must match."""
    saved = tmp_path_factory.mktemp("one") / "fast.pt"
    result = _run([sys.executable, *_train(data_root, saved, "--fast")], saved.parent)
    assert result.returncode == 0, result.stderr
    return saved


def test_torchrun_with_two_processes_and_the_resident_loader_trains_the_same_weights_as_one(
    one_process, data_root, tmp_path
):
    saved = tmp_path / "two.pt"
    result = _run([*TORCHRUN, "--standalone", "--nproc_per_node", "2", *_train(data_root, saved, "--fast")], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _max_difference(saved, one_process) <= 1e-5
    assert result.stdout.count("test: loss") == 1, "only rank 0 prints"
    assert "2 processes" in result.stdout
    model = helpers.MnistModel()
    model.load_state_dict(torch.load(saved, weights_only=True))  # a plain state_dict: no "module." prefix


# --- In one spawned group: evaluation and training across 2 processes against one process ------------------


def _group_checks(rank: int, world_size: int, port: int, data_root: str, out: str) -> None:
    """Run in each of 2 spawned processes; rank 0 writes what the tests compare."""
    helpers_ddp._join_as_spawned(rank, world_size, port)
    helpers_ddp.init_distributed("cpu")
    try:
        images, labels = helpers._as_uint8_images(helpers.load_mnist(data_root, train=False))
        images, labels = images[:1001], labels[:1001]  # 1001 images: no batch size below splits them evenly
        found, share = {}, {"rank": rank, "world_size": world_size}
        helpers.seed_everything(0)
        model = helpers_ddp.to_ddp(helpers.MnistModel(), "cpu")  # its evaluation sums over the processes
        for batch_size in (256, 8):  # last batches of 233 (117 + 116) and of 1 (rank 1 gets no share)
            resident = helpers_run.ShardedResidentLoader(images, labels, batch_size, device="cpu", uneven=True, **share)
            dataset = Subset(helpers.load_mnist(data_root, train=False), range(1001))
            sampler = helpers_run.ShardedSampler(range(1001), batch_size, uneven=True, **share)
            loader = DataLoader(dataset, sampler.shard_size, sampler=sampler)
            found[f"resident_{batch_size}"] = helpers.evaluate(model, resident)
            found[f"loader_{batch_size}"] = helpers.evaluate(model, loader)
        # Training on 1001 images in batches of 128: a last batch of 105 splits 53 + 52.
        helpers.seed_everything(1)
        plain = helpers.MnistModel()
        ddp = helpers_ddp.to_ddp(plain, "cpu")
        train = helpers_run.ShardedResidentLoader(images, labels, 128, shuffle=True, device="cpu", seed=3, **share)
        val = helpers_run.ShardedResidentLoader(images, labels, 256, device="cpu", uneven=True, **share)
        (epoch,) = helpers.fit(1, 0.5, ddp, train, val, progress=False, verbose=False)
        seen = sum(len(y) for _, y in helpers_run.ShardedResidentLoader(images, labels, 128, device="cpu", **share))
        loss_sum, count = helpers_ddp.all_reduce_sum(torch.tensor([epoch["train_loss"] * seen, seen])).tolist()
        found["train"] = epoch | {"train_loss": loss_sum / count, "share": seen}  # each process's loss, its share's
        found["plain_unchanged"] = not {"training_step", "forward", "validation_epoch_end"} & set(vars(plain))
        weights = ddp.state_dict()  # the model's own: one process's weights, no "module." prefix
        try:  # batches of 8 leave rank 1 without a share of the last one: it would take one step fewer
            helpers_run.ShardedResidentLoader(images, labels, 8, device="cpu", **share)
            found["steps_error"] = None
        except ValueError as error:
            found["steps_error"] = str(error)
        if rank == 0:
            torch.save({"found": found, "weights": weights, "init": model.state_dict()}, out)
    finally:
        helpers_ddp.close_distributed()


@pytest.fixture(scope="module")
def group(data_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("group") / "found.pt"
    mp.spawn(_group_checks, args=(2, helpers_ddp.free_port(), str(data_root), str(out)), nprocs=2)
    return torch.load(out)


@pytest.fixture(scope="module")
def first_1001(mnist_test):
    """(uint8 images, labels): the first 1,001 images of MNIST's test set, as each process of `group` holds them."""
    images, labels = helpers._as_uint8_images(mnist_test)
    return images[:1001], labels[:1001]


@pytest.mark.parametrize("batch_size", [256, 8])
@pytest.mark.parametrize("kind", ["resident", "loader"])
def test_evaluation_across_two_processes_equals_one_process(group, first_1001, kind, batch_size):
    model = helpers.MnistModel()
    model.load_state_dict(group["init"])
    one = helpers.evaluate(model, helpers.DeviceResidentLoader(*first_1001, batch_size, device="cpu"))
    two = group["found"][f"{kind}_{batch_size}"]
    assert two["val_loss"] == pytest.approx(one["val_loss"], abs=1e-6)
    assert two["val_acc"] == pytest.approx(one["val_acc"], abs=1e-6)


def test_an_uneven_last_batch_trains_as_in_one_process(group, first_1001):
    """53 + 52 images: DDP's plain average of the two means would weigh them wrongly. Each process reports the
    training loss of its own share; weighed by the shares, the two give one process's."""
    helpers.seed_everything(1)
    model = helpers.MnistModel()
    train = helpers.DeviceResidentLoader(*first_1001, 128, shuffle=True, device="cpu", seed=3)
    val = helpers.DeviceResidentLoader(*first_1001, 256, device="cpu")
    (one,) = helpers.fit(1, 0.5, model, train, val, progress=False, verbose=False)
    two = group["found"]["train"]
    assert two["share"] == 501, "rank 0: 7 shares of 64, then 53 of the last 105"
    assert {k: two[k] for k in ("train_loss", "val_loss", "val_acc")} == pytest.approx(
        {k: one[k] for k in ("train_loss", "val_loss", "val_acc")}, abs=1e-6
    )
    weights = group["weights"]
    assert max((weights[k] - v).abs().max().item() for k, v in model.state_dict().items()) <= 1e-6
    assert group["found"]["plain_unchanged"], "DDP wraps the model: none of its methods replaced"


def test_processes_that_would_take_different_numbers_of_steps_stop_with_a_clear_error(group):
    assert "the last batch is smaller than the number of processes" in group["found"]["steps_error"]


# --- Sharding and bad launches, in one process ---------------------------------------------------------------


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_the_shards_of_every_batch_make_up_the_batches_of_one_process(world_size):
    order = torch.randperm(1001, generator=torch.Generator().manual_seed(0)).tolist()

    def batches(rank, world_size):
        sampler = helpers_run.ShardedSampler(order, 128, rank=rank, world_size=world_size)
        loader = DataLoader(range(1001), sampler.shard_size, sampler=sampler)
        assert len(loader) == len(list(loader)) and len(sampler) == len(list(sampler))
        return [b.tolist() for b in loader]

    one = batches(0, 1)
    assert one == [order[i : i + 128] for i in range(0, 1001, 128)]
    shards = [batches(r, world_size) for r in range(world_size)]
    for step, batch in enumerate(one):
        assert sorted(i for shard in shards for i in shard[step]) == sorted(batch)
    images, labels = torch.zeros(1001, 1, 28, 28, dtype=torch.uint8), torch.arange(1001)
    loaders = [
        helpers_run.ShardedResidentLoader(
            images, labels, 128, shuffle=True, device="cpu", rank=r, world_size=world_size
        )
        for r in range(world_size)
    ]
    whole = helpers.DeviceResidentLoader(images, labels, 128, shuffle=True, device="cpu")
    for full, *parts in zip(whole, *loaders):
        assert sorted(torch.cat([p[1] for p in parts]).tolist()) == sorted(full[1].tolist())


def test_a_batch_that_does_not_split_evenly_is_refused():
    with pytest.raises(ValueError, match="a batch of 128 does not split evenly over 3 processes.*1, 2, 4, 8, 16"):
        helpers_run.ShardedSampler(range(10), 128, rank=0, world_size=3)
    with pytest.raises(ValueError, match="does not split evenly over 3"):
        helpers_run.ShardedResidentLoader(
            torch.zeros(10, 1, 28, 28), torch.zeros(10), 128, device="cpu", rank=0, world_size=3
        )


def test_a_backend_that_does_not_suit_the_device_is_refused(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="the nccl backend cannot run on cpu: use 'gloo'"):
        helpers_ddp.init_distributed("cpu", backend="nccl")
    with pytest.raises(ValueError, match="unknown backend 'glue': use 'gloo' for cpu"):
        helpers_ddp.init_distributed("cpu", backend="glue")


def test_more_processes_than_gpus_is_refused(monkeypatch):
    monkeypatch.setattr(helpers, "_accelerator", lambda: torch.device("cuda"))
    monkeypatch.setattr(helpers_ddp, "accelerator_count", lambda: 2)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with pytest.raises(ValueError, match="4 processes on this machine but only 2 cuda device.*--nproc_per_node=2"):
        helpers_ddp.init_distributed("cuda")


def test_init_distributed_joins_with_the_backend_that_suits_the_device_and_one_process_joins_nothing(monkeypatch):
    joined = []
    monkeypatch.setattr(helpers_ddp.dist, "init_process_group", lambda backend, **kwargs: joined.append(backend))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert helpers_ddp.init_distributed() == helpers.get_default_device() and joined == [], "one process: no group"
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert helpers_ddp.init_distributed("cpu") == torch.device("cpu") and joined == []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # leaves this process's thread count alone
    assert helpers_ddp.init_distributed("cpu") == torch.device("cpu") and joined == ["gloo"]
    monkeypatch.setattr(helpers, "_accelerator", lambda: torch.device("cuda"))  # a machine with 2 GPUs
    monkeypatch.setattr(helpers_ddp, "accelerator_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: joined.append(str(device)))
    assert helpers_ddp.init_distributed("cuda") == torch.device("cuda", 1), "process LOCAL_RANK takes GPU LOCAL_RANK"
    assert joined == ["gloo", "cuda:1", "nccl"]
    assert helpers_ddp.init_distributed("cuda", backend="gloo") == torch.device("cuda", 1) and joined[-1] == "gloo"


def test_ranks_above_0_print_nothing_within_the_block_and_nothing_outlives_it(monkeypatch, capsys):
    """Rank 1 was silenced by replacing builtins.print and setting HELPERS_PROGRESS for the rest of the process."""
    before = (builtins.print, sys.stdout, os.environ.get("HELPERS_PROGRESS"))
    for rank in (1, 0):
        monkeypatch.setattr(helpers_ddp, "rank_and_world", lambda rank=rank: (rank, 2))
        with helpers_ddp.quiet_unless_main():
            print(f"rank {rank} speaks")
        print(f"after rank {rank}'s block")
    assert capsys.readouterr().out == "after rank 1's block\nrank 0 speaks\nafter rank 0's block\n"
    assert (builtins.print, sys.stdout, os.environ.get("HELPERS_PROGRESS")) == before


def test_no_name_here_is_one_of_pytorchs_parallel_functions_with_another_meaning():
    """torch.nn.parallel.data_parallel is single-process multi-GPU training: a function of that name here would be
    taken for it. The communication hook is named as PyTorch names its own (allreduce_hook)."""
    ours = {name for name, value in vars(helpers_ddp).items() if getattr(value, "__module__", "") == "helpers_ddp"}
    assert {"DDPModel", "train_distributed"} <= ours
    assert not ours & (set(vars(torch.nn.parallel)) | set(vars(torch.nn))), ours & set(vars(torch.nn.parallel))
    assert helpers_ddp.weighted_allreduce_hook.__name__.endswith("_hook")


def test_init_distributed_shares_the_cores_until_close_puts_them_back(monkeypatch):
    """On the CPU each of N processes takes its share of the cores while in the group, and its own count again after."""
    up = {"group": False}
    monkeypatch.setattr(helpers_ddp.dist, "init_process_group", lambda backend, **kwargs: up.update(group=True))
    monkeypatch.setattr(helpers_ddp.dist, "is_initialized", lambda: up["group"])
    monkeypatch.setattr(helpers_ddp.dist, "destroy_process_group", lambda: up.update(group=False))
    monkeypatch.setattr(helpers_ddp.os, "cpu_count", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "4")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        helpers_ddp.init_distributed("cpu")
        assert up["group"] and torch.get_num_threads() == 2, "8 cores over 4 processes"
        helpers_ddp.close_distributed()
        assert not up["group"] and torch.get_num_threads() == 3, "the count it had before"
    finally:
        torch.set_num_threads(before)


def test_train_distributed_leaves_a_group_it_did_not_create(monkeypatch):
    """Called inside a caller's process group, it trains in it and leaves it up; one it joined itself, it leaves."""
    up = {"group": True}
    monkeypatch.setattr(helpers_ddp.dist, "init_process_group", lambda backend, **kwargs: up.update(group=True))
    monkeypatch.setattr(helpers_ddp.dist, "is_initialized", lambda: up["group"])
    monkeypatch.setattr(helpers_ddp.dist, "destroy_process_group", lambda: up.update(group=False))
    monkeypatch.setattr(helpers_ddp, "rank_and_world", lambda: (0, 2))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for world, created in (("1", False), ("2", True)):
        monkeypatch.setenv("WORLD_SIZE", world)
        up["group"] = not created
        with pytest.raises(ValueError, match="give one learning rate per phase"):  # fails at once, in the group
            helpers_ddp.train_distributed(device="cpu", epochs=(1, 1), lrs=(0.5,))
        assert up["group"] is not created, "the caller's group stays up; its own is left"


def test_a_speed_feature_the_device_cannot_run_is_refused_before_any_data(monkeypatch, tmp_path):
    monkeypatch.setattr(helpers_ddp.helpers_data, "ensure_mnist", lambda root: pytest.fail("data fetched first"))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ValueError, match="float16 autocast needs a GPU"):
        helpers_ddp.train_distributed(tmp_path, device="cpu", amp="float16")
    with pytest.raises(ValueError, match="reduce-overhead.*needs a CUDA GPU"):
        helpers_ddp.train_distributed(tmp_path, device="cpu", compile="reduce-overhead")


def test_one_process_needs_no_group():
    assert helpers_ddp.rank_and_world() == (0, 1) and helpers_ddp.is_main_process()
    model = helpers.MnistModel()
    assert helpers_ddp.to_ddp(model, "cpu") is model and "training_step" not in vars(model)


def test_benchmark_ddp_reports_both_models(data_root, tmp_path):
    rows = helpers_ddp.benchmark_ddp(
        data_root, hidden_sizes=(32, 256), epochs=1, limit=1024, out_dir=tmp_path, verbose=False
    )
    assert [r["hidden_size"] for r in rows] == [32, 256] and all(r["processes"] == 2 for r in rows)
    for r in rows:
        assert r["one_s"] > 0 and r["ddp_s"] > 0 and 0 <= r["communication_share"] < 1
        assert r["speedup"] == pytest.approx(r["one_s"] / r["ddp_s"])
    assert json.loads((tmp_path / "ddp.json").read_text()) == rows
    assert "784-256-10" in helpers_ddp.format_ddp(rows)


def test_the_picture_of_data_parallelism_splits_the_batch_and_all_reduces():
    texts = [t.get_text() for t in helpers_ddp.draw_data_parallel(processes=4).axes[0].texts]
    assert "one batch of 128 images" in texts and any(t.startswith("all-reduce") for t in texts)
    assert [t.split("\n")[:2] for t in texts if t.startswith("process")] == [
        [f"process {rank} (rank {rank})", "32 images"] for rank in range(4)
    ]
