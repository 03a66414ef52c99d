"""The benchmark, the speedrun and the command line: their outputs, not their speed."""

import json

import pytest
import torch

import helpers
import helpers_cli
import helpers_speed


def test_time_matmul_rows():
    rows = helpers.time_matmul([16, 64], "cpu", repeats=3)
    assert [r["size"] for r in rows] == [16, 64]
    assert all(r["device"] == "cpu" and r["seconds"] > 0 and r["gflops"] > 0 for r in rows)
    with pytest.raises(ValueError, match="not available"):
        helpers.time_matmul([16], "cuda:9")


def test_benchmark_writes_rows_and_chart(data_root, tmp_path, capsys, monkeypatch):
    order = []
    real_fit = helpers.fit
    monkeypatch.setattr(helpers_speed, "fit", lambda *a, **kw: order.append(a[2]) or real_fit(*a, **kw))
    rows = helpers_speed.benchmark_pipelines(data_root, devices=["cpu"], epochs=2, limit=2000, out_dir=tmp_path)
    out = capsys.readouterr().out
    assert "target" not in out and " met" not in out, "the benchmark measures; the acceptance test judges"
    helpers_speed.write_bench(tmp_path / "bench.json", pipelines=rows)  # as `make bench` does, once
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["pipelines"] == json.loads(json.dumps(rows)) and saved["machine"] == helpers.describe_device("cpu")
    assert (tmp_path / "bench.png").stat().st_size > 1000
    fields = {"pipeline", "device", "epoch_s", "epoch_s_min", "epoch_s_max", "samples_per_s", "val_acc"}
    assert all(fields | {"speedup_vs_lesson"} <= set(r) for r in rows)
    pipelines = [(r["pipeline"], r["threads"]) for r in rows]
    assert pipelines[:3] == [(p, torch.get_num_threads()) for p in helpers_speed.BENCH_PIPELINES]
    if torch.get_num_threads() > 1:
        assert pipelines[3] == ("resident", 1)
    models = list(dict.fromkeys(order))
    assert len(models) == len(rows) and order == models * 2, "one epoch each, taking turns: A B C A B C"
    lesson = rows[0]
    assert lesson["speedup_vs_lesson"] == 1.0
    for r in rows:
        assert r["speedup_vs_lesson"] == pytest.approx(lesson["epoch_s"] / r["epoch_s"])
        assert r["epoch_s_min"] <= r["epoch_s"] <= r["epoch_s_max"]
        assert r["samples_per_s"] > 0 and 0 <= r["val_acc"] <= 1
    table = helpers_speed.format_pipelines(rows)
    assert table.count("\n") == len(rows) + 1 and "| resident | cpu |" in table


def test_benchmark_rejects_bad_input(data_root):
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        helpers_speed.benchmark_pipelines(data_root, epochs=0, out_dir=None)
    with pytest.raises(ValueError, match="unknown pipeline 'magic'"):
        helpers_speed.benchmark_pipelines(
            data_root, devices=["cpu"], epochs=1, pipelines=["magic"], limit=100, out_dir=None
        )


def test_speedrun_runs_its_whole_schedule_and_looks_at_the_test_set_once(data_root, monkeypatch):
    seen = []
    real_evaluate = helpers.evaluate
    monkeypatch.setattr(
        helpers_speed, "evaluate", lambda model, loader: seen.append(len(loader.labels)) or real_evaluate(model, loader)
    )
    result = helpers_speed.speedrun(data_root, "cpu", epochs=2, target=0.999)
    assert seen == [10000, 10000, 10000], "validation after each epoch, then the test set once, at the end"
    assert result["epochs"] == 2 and len(result["val_accs"]) == 2 and not result["reached"]
    assert result["train_s"] > 0 and result["data_s"] > 0 and 0.9 < result["test_acc"] < 0.999


def test_command_line_dry_runs(data_root, tmp_path, capsys):
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "train", "--save", str(tmp_path / "w.pth")]) == 0
    out = capsys.readouterr().out
    assert "test: loss" in out and (tmp_path / "w.pth").exists()
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "train", "--fast"]) == 0
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "bench", "--out", str(tmp_path / "b")]) == 0
    saved = json.loads((tmp_path / "b" / "bench.json").read_text())
    assert [r["pipeline"] for r in saved["pipelines"]][:3] == list(helpers_speed.BENCH_PIPELINES)
    assert [r["config"] for r in saved["speed"]] == ["float32"], "a dry run compiles nothing, converts nothing"
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# Title\n\n{helpers_speed.README_BENCH[0]}\nold figures\n{helpers_speed.README_BENCH[1]}\n\nMore.\n"
    )
    assert (
        helpers_cli.main(["bench-report", "--file", str(tmp_path / "b" / "bench.json"), "--readme", str(readme)]) == 0
    )
    text = readme.read_text()
    assert "old figures" not in text and text.startswith("# Title") and text.endswith("\n\nMore.\n")
    assert (
        helpers_speed.format_speed(saved["speed"]) in text
        and helpers_speed.format_pipelines(saved["pipelines"]) in text
    )
    with pytest.raises(ValueError, match="no block to replace"):
        helpers_speed.write_bench_report(tmp_path / "b" / "bench.json", tmp_path / "b" / "bench.json")
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "speedrun"]) == 0
    assert helpers_cli.main(["--data", str(data_root), "--dry-run", "speedrun", "--target", "0.999"]) == 0
    with pytest.raises(ValueError, match="one learning rate per phase"):
        helpers_cli.main(["--data", str(data_root), "--dry-run", "train", "--epochs", "1", "--lr", "0.1", "0.2", "0.3"])
