"""helpers_speed.py (notebooks 09 and 11): the comparisons and the speedrun (their outputs, not their speed); and the
training step notebook 11 writes, each of its switches doing what it says."""

import functools

import nbformat
import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, random_images, same_weights
from torch.utils.data import DataLoader

import helpers
import helpers_speed

# -------------------------------------------------------- the input pipelines' benchmark and the speedrun (notebook 09)


def _pipelines(data_root):
    """09's two pipelines over 2,000 images: the lesson's loaders, and the data kept on the device."""
    train_set, val_set = helpers.split_dataset(helpers.load_mnist(data_root), limit=2000)

    def as_taught(device, seed):
        generator = torch.Generator().manual_seed(seed)
        train = DataLoader(train_set, 128, shuffle=True, generator=generator, num_workers=2)
        return helpers.DeviceDataLoader(train, device), helpers.DeviceDataLoader(DataLoader(val_set, 256), device)

    def resident(device, seed):
        train = helpers.DeviceResidentLoader.from_dataset(train_set, 128, shuffle=True, device=device, seed=seed)
        return train, helpers.DeviceResidentLoader.from_dataset(val_set, 256, device=device)

    return {"as_taught": as_taught, "resident": resident}


def test_compare_pipelines_takes_turns_and_draws_its_rows(data_root, monkeypatch):
    order = []
    real_fit = helpers.fit
    monkeypatch.setattr(helpers_speed, "fit", lambda *a, **kw: order.append(a[2]) or real_fit(*a, **kw))
    rows = helpers_speed.compare_pipelines(_pipelines(data_root), ["cpu"], epochs=2)
    fields = {"pipeline", "device", "epoch_s", "epoch_s_min", "epoch_s_max", "train_s", "val_acc"}
    assert all(fields | {"speedup_vs_taught"} <= set(r) for r in rows)
    pipelines = [(r["pipeline"], r["threads"]) for r in rows]
    assert pipelines[:2] == [(p, torch.get_num_threads()) for p in ("as_taught", "resident")]
    if torch.get_num_threads() > 1:
        assert pipelines[2] == ("resident", 1)
    assert [r["default_threads"] for r in rows] == [r["threads"] == torch.get_num_threads() for r in rows]
    models = list(dict.fromkeys(order))
    assert len(models) == len(rows) and order == models * 2, "one epoch each, taking turns: A B C A B C"
    taught = rows[0]
    assert taught["pipeline"] == "as_taught" and taught["speedup_vs_taught"] == 1.0
    for r in rows:
        assert r["speedup_vs_taught"] == pytest.approx(taught["epoch_s"] / r["epoch_s"])
        assert r["epoch_s_min"] <= r["epoch_s"] <= r["epoch_s_max"]
        assert 0 < r["train_s"] <= r["epoch_s_max"] and 0 <= r["val_acc"] <= 1
    table = helpers_speed.format_pipelines(rows)
    assert table.count("\n") == len(rows) + 1 and "| resident | cpu |" in table
    assert len(helpers_speed.plot_pipelines(rows).axes[0].patches) >= len(rows)


def test_compare_pipelines_refuses_no_epochs_before_any_work():
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        helpers_speed.compare_pipelines({"as_taught": lambda device, seed: pytest.fail("work began")}, ["cpu"], 0)


def test_speedrun_runs_its_whole_schedule_and_looks_at_the_test_set_once(data_root, monkeypatch):
    seen = []
    real_evaluate = helpers.evaluate
    counted = lambda model, loader: seen.append(len(loader.labels)) or real_evaluate(model, loader)
    for module in (helpers, helpers_speed):  # fit's validation, and the speedrun's look at the test set
        monkeypatch.setattr(module, "evaluate", counted)
    result = helpers_speed.speedrun(data_root, "cpu", epochs=2, target=0.999)
    assert seen == [10000, 10000, 10000], "validation after each epoch, then the test set once, at the end"
    assert result["epochs"] == 2 and len(result["val_accs"]) == 2 and not result["reached"]
    assert result["train_s"] > 0 and result["data_s"] > 0 and 0.9 < result["test_acc"] < 0.999


def test_a_speedrun_of_no_epochs_is_refused_before_loading_data(tmp_path):
    with pytest.raises(ValueError, match="epochs must be at least 1 for a speedrun"):
        helpers_speed.speedrun(root=tmp_path / "nothing-here", epochs=0)


# ------------------------------------------------------------ the training step and its comparison (notebook 11)


def _batches(n=256, size=64, seed=0):
    images, labels = random_images(n, seed)
    return [(images[i : i + size], labels[i : i + size]) for i in range(0, n, size)]


@functools.cache
def _notebook_11(device="cpu"):
    """The cell of notebook 11 that writes the training step (`train_epoch`) and `accuracy`, executed."""
    nb = nbformat.read(REPO / "notebooks" / "11_gpu_speed.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "def train_epoch(" in c.source]
    namespace = {"torch": torch, "F": F, "DEVICE": torch.device(device)}
    exec(cell.source, namespace)
    return namespace


def train_epoch(*args):
    return _notebook_11()["train_epoch"](*args)


def _recipe(dtype=None, scaler_on=False, seed=0):
    """A seeded lesson model after one epoch of 11's `train_epoch` with these switches, and the loss it returned."""
    torch.manual_seed(seed)
    model = helpers.MnistModel()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, enabled=scaler_on)
    loss = train_epoch(model, torch.optim.SGD(model.parameters(), 0.5), scaler, _batches(), dtype)
    return model, loss


def test_the_recipe_with_its_switches_off_trains_as_the_lessons_fit():
    torch.manual_seed(0)
    lesson = helpers.MnistModel()
    helpers.fit(1, 0.5, lesson, _batches(), _batches(64), progress=False, verbose=False)
    model, loss = _recipe()
    assert same_weights(model, lesson) and isinstance(loss, float)


def test_an_enabled_scaler_scales_the_gradients_and_unscales_them_before_the_step():
    """A power-of-two scale is exact in float32: the same weights as without a scaler, though backward saw 1,024x."""
    plain, _ = _recipe()
    scaled, _ = _recipe(scaler_on=True)
    for key, value in plain.state_dict().items():
        torch.testing.assert_close(scaled.state_dict()[key], value)
    torch.manual_seed(0)
    model = helpers.MnistModel()
    seen = []
    model.linear2.weight.register_hook(lambda grad: seen.append(grad.abs().max().item()))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    train_epoch(model, torch.optim.SGD(model.parameters(), 0.5), scaler, _batches()[:1], None)
    torch.manual_seed(0)
    bare = helpers.MnistModel()
    F.cross_entropy(bare(_batches()[0][0]), _batches()[0][1]).backward()
    assert seen[0] == pytest.approx(2**10 * bare.linear2.weight.grad.abs().max().item(), rel=1e-5)


def test_bfloat16_autocast_runs_the_forward_pass_in_bfloat16_and_float32_does_not():
    for dtype, expected in ((torch.bfloat16, torch.bfloat16), (None, torch.float32)):
        torch.manual_seed(0)
        model, dtypes = helpers.MnistModel(), []
        model.linear2.register_forward_hook(lambda module, args, out, seen=dtypes: seen.append(out.dtype))
        scaler = torch.amp.GradScaler("cpu", enabled=False)
        train_epoch(model, torch.optim.SGD(model.parameters(), 0.5), scaler, _batches(), dtype)
        assert set(dtypes) == {expected} and model.linear2.weight.dtype == torch.float32, "the weights stay float32"


def test_the_tf32_switch_is_set_as_each_epoch_begins():
    model = helpers.MnistModel()
    scaler, optimizer = torch.amp.GradScaler("cpu", enabled=False), torch.optim.SGD(model.parameters(), 0.5)
    before = torch.backends.cuda.matmul.fp32_precision
    try:
        for tf32, precision in ((True, "tf32"), (False, "ieee")):
            train_epoch(model, optimizer, scaler, _batches()[:1], None, tf32)
            assert torch.backends.cuda.matmul.fp32_precision == precision
    finally:
        torch.backends.cuda.matmul.fp32_precision = before


def test_11s_accuracy_is_what_evaluate_says():
    model, _ = _recipe()
    assert _notebook_11()["accuracy"](model, _batches()) == helpers.evaluate(model, _batches())["val_acc"]


def test_side_by_side_takes_turns_and_times_the_first_epoch_apart(monkeypatch):
    order, clock = [], iter(range(100))
    monkeypatch.setattr("helpers_common.time.perf_counter", lambda: float(next(clock)))
    rows = helpers_speed.side_by_side({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 3)
    assert order == ["a", "b"] * 3, "one epoch each, in turn"
    assert [r["config"] for r in rows] == ["a", "b"] and all(r["first_s"] == 1.0 for r in rows)
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] == pytest.approx(rows[0]["epoch_s"] / rows[1]["epoch_s"])
    assert all(r["epoch_s_min"] <= r["epoch_s"] <= r["epoch_s_max"] for r in rows)
    with pytest.raises(ValueError, match="at least 2"):
        helpers_speed.side_by_side({"a": lambda: None}, 1)


def test_the_phases_chart_draws_each_pipelines_steps():
    seconds = {"data": 0.02, "forward": 0.01, "backward": 0.01, "optimizer": 0.005}
    fig = helpers_speed.plot_phases({"as_taught": {"seconds": seconds, "steps": 10}})
    ax = fig.axes[0]
    assert ax.get_xlabel() == "milliseconds per training step" and len(ax.patches) == 4
    assert sum(bar.get_width() for bar in ax.patches) == pytest.approx(4.5), "milliseconds per step, stacked"


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_recipe_trains_in_16_bits_on_cuda(dtype):
    if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported(including_emulation=False):
        pytest.skip("this GPU has no native bfloat16")
    torch.manual_seed(0)
    model = helpers.to_device(helpers.MnistModel(), "cuda")
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
    batches = [helpers.to_device(b, "cuda") for b in _batches()]
    step = _notebook_11("cuda")["train_epoch"]
    losses = [step(model, torch.optim.SGD(model.parameters(), 0.5), scaler, batches, dtype) for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < 2.3
    if dtype == torch.float16:
        assert scaler.get_scale() > 1, "the scale the scaler keeps"
