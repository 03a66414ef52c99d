"""helpers_ddp.py: the benchmark of one process against DDP ones (notebook 10), and the picture.

Notebook 10 writes the training scripts and launches them with torchrun (two processes on the CPU with gloo, two
nodes on one machine, the exercise's run without set_epoch); `make test` executes it, and
tests/test_notebooks.py::test_series_results_are_the_lessons[10_many_gpus] checks that DDP trained one process's
weights, to rounding."""

import pytest

import helpers_ddp


def test_benchmark_ddp_reports_both_models(data_root):
    rows = helpers_ddp.benchmark_ddp(data_root, hidden_sizes=(32, 256), epochs=1, limit=1024)
    assert [r["hidden_size"] for r in rows] == [32, 256] and all(r["processes"] == 2 for r in rows)
    for r in rows:
        assert r["one_s"] > 0 and r["ddp_s"] > 0 and 0 <= r["communication_share"] < 1
        assert r["one_s_min"] <= r["one_s"] <= r["one_s_max"] and r["ddp_s_min"] <= r["ddp_s"] <= r["ddp_s_max"]
        assert r["speedup"] == pytest.approx(r["one_s"] / r["ddp_s"])
    assert "784-256-10" in helpers_ddp.format_ddp(rows)


@pytest.mark.parametrize("nprocs", [1, 3])
def test_benchmark_ddp_refuses_processes_that_cannot_share_a_batch_before_starting_any(nprocs, tmp_path):
    with pytest.raises(ValueError, match=f"nprocs must be at least 2 and divide a batch of 128, got {nprocs}"):
        helpers_ddp.benchmark_ddp(tmp_path / "no data here", nprocs=nprocs)


def test_the_picture_of_data_parallelism_splits_the_batch_and_all_reduces():
    texts = [t.get_text() for t in helpers_ddp.draw_data_parallel(processes=4).axes[0].texts]
    assert "one batch of 128 images" in texts and any(t.startswith("all-reduce") for t in texts)
    assert [t.split("\n")[:2] for t in texts if t.startswith("process")] == [
        [f"process {rank} (rank {rank})", "32 images"] for rank in range(4)
    ]
