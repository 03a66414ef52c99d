"""helpers_speed.py (notebooks 09 and 11): the benchmarks and the speedrun (their outputs, not their speed); mixed
precision, TF32 and torch.compile: each switch changes what it should, is off by default, and refuses what the
device cannot do with a message that says what to use instead."""

import contextlib
import json
import logging
import os

import pytest
import torch
from conftest import same_weights, small_dataloaders

import helpers
import helpers_cli
import helpers_speed

# -------------------------------------------------------- the input pipelines' benchmark and the speedrun (notebook 09)


def test_benchmark_writes_rows_and_chart(data_root, tmp_path, capsys, monkeypatch):
    order = []
    real_fit = helpers.fit
    monkeypatch.setattr(helpers_speed, "fit", lambda *a, **kw: order.append(a[2]) or real_fit(*a, **kw))
    rows = helpers_speed.benchmark_pipelines(data_root, devices=["cpu"], epochs=2, limit=2000, out_dir=tmp_path)
    out = capsys.readouterr().out
    assert "target" not in out and " met" not in out, "the benchmark measures; the acceptance test judges"
    helpers_cli.write_bench(tmp_path / "bench.json", pipelines=rows)  # as `make bench` does, once
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["pipelines"] == json.loads(json.dumps(rows)) and saved["machine"] == helpers.describe_device("cpu")
    assert (tmp_path / "bench.png").stat().st_size > 1000
    fields = {"pipeline", "device", "epoch_s", "epoch_s_min", "epoch_s_max", "samples_per_s", "val_acc"}
    assert all(fields | {"speedup_vs_taught"} <= set(r) for r in rows)
    pipelines = [(r["pipeline"], r["threads"]) for r in rows]
    assert pipelines[:3] == [(p, torch.get_num_threads()) for p in ("as_taught", "tuned", "resident")]
    if torch.get_num_threads() > 1:
        assert pipelines[3] == ("resident", 1)
    models = list(dict.fromkeys(order))
    assert len(models) == len(rows) and order == models * 2, "one epoch each, taking turns: A B C A B C"
    taught = rows[0]
    assert taught["pipeline"] == "as_taught" and taught["speedup_vs_taught"] == 1.0
    for r in rows:
        assert r["speedup_vs_taught"] == pytest.approx(taught["epoch_s"] / r["epoch_s"])
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


def test_a_benchmark_on_a_device_that_is_not_one_fails_before_loading_data(tmp_path):
    argv = ["--data", str(tmp_path / "no-data"), "bench", "--devices", "garbage", "--out", str(tmp_path / "out")]
    with pytest.raises(ValueError, match="'garbage' is not a device name"):
        helpers_cli.main(argv)
    assert not (tmp_path / "no-data").exists()


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


# ---------------------------------------------------------------- mixed precision, TF32 and torch.compile (notebook 11)


def _trained(amp=None, compile=False):
    """(the model, its history) after 2 epochs of fit, wrapped for `amp` and `compile`."""
    torch.manual_seed(0)
    model = helpers.MnistModel()
    wrapped, opt_func = helpers_speed.mixed_precision(helpers_speed.compile_model(model, compile), amp)
    history = helpers.fit(2, 0.5, wrapped, *small_dataloaders(), opt_func, progress=False, verbose=False)
    return model, history


def _forward_dtypes(model):
    dtypes = []
    model.linear2.register_forward_hook(lambda module, args, out: dtypes.append((module.training, out.dtype)))
    return dtypes


def test_switches_off_train_exactly_as_plain_fit_and_never_compile(monkeypatch):
    torch.manual_seed(0)
    plain = helpers.MnistModel()
    plain_history = helpers.fit(2, 0.5, plain, *small_dataloaders(), progress=False, verbose=False)
    monkeypatch.setattr(torch, "compile", lambda *a, **kw: pytest.fail("torch.compile called with compile off"))
    model = helpers.MnistModel()
    assert helpers_speed.mixed_precision(model, None) == (model, torch.optim.SGD), "off: nothing wrapped"
    off, off_history = _trained(amp=None, compile=False)
    for key, value in plain.state_dict().items():
        assert torch.equal(value, off.state_dict()[key])
    assert [h["val_loss"] for h in off_history] == [h["val_loss"] for h in plain_history]
    assert [h["train_loss"] for h in off_history] == [h["train_loss"] for h in plain_history]


def test_the_wrappers_leave_the_model_as_it_was(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, mode: fn)
    model = helpers.MnistModel()
    wrapped, _ = helpers_speed.mixed_precision(helpers_speed.compile_model(model), torch.bfloat16)
    assert not {"forward", "training_step", "validation_step"} & set(vars(model)), "no method of the model replaced"
    assert wrapped.state_dict().keys() == model.state_dict().keys(), "a checkpoint of the wrapper loads into the model"
    assert list(wrapped.parameters()) == list(model.parameters())


def test_bfloat16_autocast_runs_the_training_forward_pass_in_bfloat16():
    torch.manual_seed(0)
    model = helpers.MnistModel()
    dtypes = _forward_dtypes(model)
    wrapped, opt_func = helpers_speed.mixed_precision(model, torch.bfloat16)
    history = helpers.fit(1, 0.5, wrapped, *small_dataloaders(), opt_func, progress=False, verbose=False)
    assert {d for training, d in dtypes if training} == {torch.bfloat16}
    assert {d for training, d in dtypes if not training} == {torch.float32}, "evaluation stays in float32"
    assert all(p.dtype == torch.float32 for p in model.parameters()), "the weights stay float32"
    plain, plain_history = _trained()
    assert history[0]["train_loss"] != plain_history[0]["train_loss"], "bfloat16 rounds differently"
    assert history[0]["val_acc"] == pytest.approx(plain_history[0]["val_acc"], abs=0.05)


def _scaled(model, init_scale=1024.0):
    """`model` as float16 would train it, on any device: its loss scaled by an enabled GradScaler, autocast off."""
    wrapped = helpers_speed.MixedPrecision(model, None)
    wrapped.scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, enabled=True)
    return wrapped, helpers_speed.with_scaler(torch.optim.SGD, wrapped.scaler)


def test_a_scaled_loss_backpropagates_scaled_gradients_and_the_step_unscales_them():
    """float16's loss scaling, shown with an enabled GradScaler on any device: the loss stays unscaled, backward
    gets scaled gradients, the optimizer's step unscales them, and a step with an inf gradient is skipped."""
    torch.manual_seed(0)
    plain = helpers.MnistModel()
    scaled_model = helpers.MnistModel()
    scaled_model.load_state_dict(plain.state_dict())
    wrapped, opt_func = _scaled(scaled_model)
    batch = (torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,)))
    loss, plain_loss = wrapped.training_step(batch), plain.training_step(batch)
    assert loss.item() == plain_loss.item(), "the loss fit reports is not scaled"
    loss.backward()
    plain_loss.backward()
    assert torch.allclose(scaled_model.linear1.weight.grad, 1024.0 * plain.linear1.weight.grad, rtol=1e-5)
    optimizer = opt_func(scaled_model.parameters(), 0.5)
    assert isinstance(optimizer, helpers_speed.ScaledOptimizer) and opt_func.__name__ == "SGD"
    optimizer.step()
    torch.optim.SGD(plain.parameters(), 0.5).step()
    assert torch.allclose(scaled_model.linear1.weight, plain.linear1.weight, atol=1e-6), "unscaled before the step"
    scaled_model.linear1.weight.grad.fill_(float("inf"))
    before = scaled_model.linear1.weight.clone()
    optimizer.step()
    assert torch.equal(scaled_model.linear1.weight, before), "a step with inf gradients is skipped"
    assert optimizer.scaler.get_scale() < 1024.0, "and the scale lowered"


def test_a_loss_term_added_outside_the_training_step_is_not_scaled():
    """What MixedPrecision's docstring says: with a scaler, a term added to the returned loss outside training_step
    gets its gradient divided by the scale at the step; inside a subclass's training_step it trains as written."""
    torch.manual_seed(0)
    model = helpers.MnistModel()
    batch = (torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,)))
    wrapped, _ = _scaled(model)
    penalty = lambda: model.linear1.weight.square().sum()
    (wrapped.training_step(batch) + penalty()).backward()
    outside = model.linear1.weight.grad.clone() / 1024.0  # what the step sees, unscaled
    model.zero_grad()
    (model.training_step(batch) + penalty()).backward()
    written = model.linear1.weight.grad.clone()
    model.zero_grad()
    model.training_step(batch).backward()
    assert torch.allclose(outside, model.linear1.weight.grad + 2 * model.linear1.weight / 1024.0, atol=1e-6)
    assert not torch.allclose(outside, written, atol=1e-4), "the term outside trains 1024 times weaker"


def test_the_scaled_gradients_trick_has_a_name_and_does_what_it_says():
    """scaled_gradients(loss, scaler): the loss's value, the gradients of scaler.scale(loss); with a disabled scaler
    (bfloat16), the loss's gradients."""
    weight = torch.tensor([1.0, 2.0], requires_grad=True)
    for scaler, scale in ((torch.amp.GradScaler("cpu", init_scale=64.0), 64), (torch.amp.GradScaler(enabled=False), 1)):
        weight.grad = None
        loss = (weight * torch.tensor([3.0, 4.0])).sum()
        scaled = helpers_speed.scaled_gradients(loss, scaler)
        scaled.backward()
        assert scaled.item() == loss.item() == 11.0 and weight.grad.tolist() == [3.0 * scale, 4.0 * scale]
    assert helpers_speed.scaled_gradients.__doc__.startswith("The loss's value, with the gradients of scaler.scale")


def test_a_scaled_optimizer_is_an_optimizer_to_a_scheduler_and_to_clipping():
    """A scheduler built on it sets the inner optimizer's learning rate; unscale_() before clipping, as PyTorch's AMP
    recipe does, shows the clipping the true gradients and the step does not unscale them twice."""
    torch.manual_seed(0)
    plain, model = helpers.MnistModel(), helpers.MnistModel()
    model.load_state_dict(plain.state_dict())
    wrapped, opt_func = _scaled(model)
    optimizer = opt_func(model.parameters(), 0.5)
    assert optimizer.param_groups is optimizer.optimizer.param_groups and optimizer.defaults["lr"] == 0.5
    assert optimizer.state is optimizer.optimizer.state, "what it does not hold, the inner optimizer answers"
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
    batch = (torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,)))
    wrapped.training_step(batch).backward()
    plain.training_step(batch).backward()
    optimizer.unscale_()
    assert torch.allclose(model.linear1.weight.grad, plain.linear1.weight.grad, rtol=1e-5), "unscaled for clipping"
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
    assert norm.item() == pytest.approx(torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.01).item(), rel=1e-5)
    optimizer.step()
    torch.optim.SGD(plain.parameters(), 0.5).step()
    assert torch.allclose(model.linear1.weight, plain.linear1.weight, atol=1e-6), "the step did not unscale again"
    schedule.step()
    assert optimizer.optimizer.param_groups[0]["lr"] == pytest.approx(0.05), "the scheduler set the inner lr"


def test_the_autocast_follows_the_model_to_the_device_it_is_on_now(monkeypatch):
    """A model wrapped on the CPU and moved afterwards (to_device(wrapped, "cuda")) autocasts where it is at each step:
    here the "meta" device, which no autocast knows, stands for a GPU."""
    wrapped, _ = helpers_speed.mixed_precision(helpers.MnistModel(), torch.bfloat16)
    seen = []
    monkeypatch.setattr(
        torch, "autocast", lambda device_type, **kw: seen.append(device_type) or contextlib.nullcontext()
    )
    wrapped.to("meta")  # as to_device(wrapped, "cuda") moves it (to_device accepts only this machine's devices)
    batch = (torch.rand(4, 1, 28, 28, device="meta"), torch.zeros(4, dtype=torch.int64, device="meta"))
    assert wrapped.training_step(batch).device.type == "meta"
    assert seen == ["meta"], "the autocast of the device the model is on, not of the one it was wrapped on"


# ------------------------------------------------ checkpoints across mixed precision: each resumes the other's


def _fit(epochs, model, opt_func, path=None, loaders=None):
    loaders = loaders or small_dataloaders()  # the same shuffles every time: a resumed run restores their state
    return helpers.fit(epochs, 0.5, model, *loaders, opt_func, checkpoint_path=path, progress=False, verbose=False)


def _uninterrupted(first, then):
    """The weights of one epoch trained as `first` (mixed precision's amp, or None) and a second as `then`."""
    torch.manual_seed(0)
    model, loaders = helpers.MnistModel(), small_dataloaders()
    for amp in (first, then):
        _fit(1, *helpers_speed.mixed_precision(model, amp), loaders=loaders)
    return model


@pytest.mark.parametrize(("first", "then"), [(torch.bfloat16, None), (None, torch.bfloat16)], ids=["bf16", "plain"])
def test_a_checkpoint_written_with_or_without_bfloat16_resumes_in_the_other(tmp_path, capsys, first, then):
    """fit with mixed_precision(model, torch.bfloat16) and a checkpoint, then a plain fit on the same path; and the
    reverse. The resumed run ends with the weights of a run that changed precision after one epoch, unstopped."""
    path = tmp_path / "run.ckpt"
    torch.manual_seed(0)
    (one,) = _fit(1, *helpers_speed.mixed_precision(helpers.MnistModel(), first), path)
    torch.manual_seed(1)  # a new session: other weights, until the checkpoint loads
    resumed = helpers.MnistModel()
    history = _fit(2, *helpers_speed.mixed_precision(resumed, then), path)
    out = capsys.readouterr().out
    assert "1 of 2 epochs already done" in out and history[0] == one and len(history) == 2
    written, resumed_as = ("MixedPrecision", "MnistModel") if first else ("MnistModel", "MixedPrecision")
    assert f"Resuming a {written} run as {resumed_as}:" in out, "a change of precision is said, in one line"
    assert helpers.load_checkpoint(path)["optimizer_class"] == "SGD"
    assert same_weights(resumed, _uninterrupted(first, then))


def test_a_checkpoint_keeps_the_gradscalers_state_and_resumes_with_or_without_it(tmp_path, capsys):
    """float16's case on any device: a scaled run's checkpoint holds SGD's state and, beside it, the scaler's; a
    plain fit resumes it, and a scaled fit resumes it with the scale it had. Scaling by a power of two is exact, so
    a scaled run trains the plain run's weights."""
    scaled_path, plain_path = tmp_path / "scaled.ckpt", tmp_path / "plain.ckpt"
    torch.manual_seed(0)
    _fit(1, *_scaled(helpers.MnistModel(), init_scale=256.0), scaled_path)
    saved = helpers.load_checkpoint(scaled_path)
    assert saved["optimizer_class"] == "SGD" and saved["optimizer"]["grad_scaler"]["scale"] == 256.0
    plain_path.write_bytes(scaled_path.read_bytes())
    plain = helpers.MnistModel()
    _fit(2, plain, torch.optim.SGD, plain_path)  # the plain fit ignores the scaler's state
    assert same_weights(plain, _uninterrupted(None, None))
    wrapped, opt_func = _scaled(helpers.MnistModel(), init_scale=8.0)
    _fit(2, wrapped, opt_func, scaled_path)
    assert wrapped.scaler.get_scale() == 256.0, "the scale the checkpoint holds, not a fresh one"
    assert same_weights(wrapped, plain)
    again, opt_func = _scaled(helpers.MnistModel(), init_scale=8.0)
    _fit(3, again, opt_func, plain_path)  # a checkpoint without a scaler's state: the scale starts afresh
    assert again.scaler.get_scale() == 8.0 and capsys.readouterr().out.count("Resuming from") == 3


def test_amp_by_name_as_the_command_line_gives_it():
    assert helpers_speed.autocast_dtype("bfloat16", "cpu") is torch.bfloat16
    assert helpers_speed.autocast_dtype("torch.bfloat16", "cpu") is torch.bfloat16
    assert helpers_speed.autocast_dtype(None, "cpu") is None


def test_compile_trains_through_the_compiled_training_step(monkeypatch):
    calls, steps = [], []

    def fake_compile(training_step, mode):
        calls.append(mode)

        def compiled(*args):
            steps.append(training_step.__self__.training)
            return training_step(*args)

        return compiled

    monkeypatch.setattr(torch, "compile", fake_compile)
    model, history = _trained(compile=True)
    assert calls == ["default"] and steps.count(True) == 2 * 8, "every training step through the compiled step"
    assert set(model.state_dict()) == set(helpers.MnistModel().state_dict()) and "training_step" not in vars(model)


def test_clear_errors_for_what_the_device_cannot_do(monkeypatch):
    model = helpers.MnistModel()
    with pytest.raises(ValueError, match=r"float16 autocast needs a GPU.*mixed_precision\(torch.bfloat16\)"):
        helpers_speed.mixed_precision(model, torch.float16)
    with pytest.raises(ValueError, match="amp must be torch.bfloat16, torch.float16 or None"):
        helpers_speed.mixed_precision(model, "float8")
    with pytest.raises(ValueError, match=r"reduce-overhead.*needs a CUDA GPU.*compile_model\(model\)"):
        helpers_speed.compile_model(model, "reduce-overhead")
    with pytest.raises(ValueError, match="mode must be True, False or one of default"):
        helpers_speed.compile_model(model, "fastest")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    with pytest.raises(ValueError, match="no native bfloat16.*torch.float16 there, which mixed_precision pairs"):
        helpers_speed.autocast_dtype(torch.bfloat16, "cuda")


def test_compile_model_leaves_the_loggers_as_they_were(monkeypatch):
    """It silences one logger while it imports what logs a CUDA build's "no CUDA runtime", and only for that."""
    monkeypatch.setattr(torch, "compile", lambda fn, mode: fn)
    logger = logging.getLogger("torch.utils.cpp_extension")
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    helpers_speed.compile_model(helpers.MnistModel())
    assert logger.level == logging.NOTSET


def test_tf32_switch_is_restored_afterwards():
    before = torch.backends.cuda.matmul.fp32_precision
    with helpers_speed.tf32(True):
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        with helpers_speed.tf32(False):
            assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert torch.backends.cuda.matmul.fp32_precision == before


@pytest.mark.cuda
@pytest.mark.parametrize("amp", [torch.float16, torch.bfloat16])
def test_mixed_precision_trains_on_cuda(amp):
    if amp == torch.bfloat16 and not helpers_speed.bf16_native("cuda"):
        pytest.skip("this GPU has no native bfloat16")
    torch.manual_seed(0)
    model = helpers.to_device(helpers.MnistModel(), "cuda")
    dtypes = _forward_dtypes(model)
    train, val = (helpers.DeviceDataLoader(dl, "cuda") for dl in small_dataloaders())
    wrapped, opt_func = helpers_speed.mixed_precision(model, amp)
    history = helpers.fit(2, 0.5, wrapped, train, val, opt_func, progress=False, verbose=False)
    assert {d for training, d in dtypes if training} == {amp}
    assert all(torch.isfinite(torch.tensor(h["train_loss"])) for h in history)


@pytest.mark.cuda
def test_a_float16_checkpoint_resumes_in_a_plain_fit_on_cuda(tmp_path, capsys):
    """The real float16 case: autocast and an enabled GradScaler; the plain fit resumes from SGD's state."""
    path = tmp_path / "run.ckpt"
    train, val = (helpers.DeviceDataLoader(dl, "cuda") for dl in small_dataloaders())
    torch.manual_seed(0)
    wrapped, opt_func = helpers_speed.mixed_precision(helpers.to_device(helpers.MnistModel(), "cuda"), torch.float16)
    (one,) = helpers.fit(1, 0.5, wrapped, train, val, opt_func, checkpoint_path=path, progress=False, verbose=False)
    saved = helpers.load_checkpoint(path)
    assert (
        saved["optimizer_class"] == "SGD" and saved["optimizer"]["grad_scaler"]["scale"] == wrapped.scaler.get_scale()
    )
    plain = helpers.to_device(helpers.MnistModel(), "cuda")
    history = helpers.fit(2, 0.5, plain, train, val, checkpoint_path=path, progress=False, verbose=False)
    assert "1 of 2 epochs already done" in capsys.readouterr().out and history[0] == one and len(history) == 2


def test_speed_configs_follow_what_each_device_can_do(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)  # an AVX2 CPU: bfloat16 is emulated
    assert helpers_speed.speed_configs("cpu") == ["float32", "compile"]
    assert helpers_speed.autocast_dtype("bfloat16", "cpu") is torch.bfloat16, "slow there, but allowed"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)  # a Xeon with AMX
    assert helpers_speed.speed_configs("cpu") == ["float32", "bfloat16", "compile"]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)  # a T4
    assert helpers_speed.speed_configs("cuda") == ["float32", "tf32", "float16", "compile", "compile reduce-overhead"]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # an A100
    assert "bfloat16" in helpers_speed.speed_configs("cuda")


def test_mlp_layers():
    model = helpers_speed.mlp(784, 64, 64, 10)
    assert [m.out_features for m in model.net if isinstance(m, torch.nn.Linear)] == [64, 64, 10]
    assert sum(isinstance(m, torch.nn.ReLU) for m in model.net) == 2 and model(torch.rand(3, 1, 28, 28)).shape == (
        3,
        10,
    )
    assert isinstance(model, helpers.ImageClassificationBase), "fit and evaluate train it as they train MnistModel"


# ------------------------------------------------------------------- the speed benchmark and the profiler (notebook 11)


def test_benchmark_speed_takes_turns_and_times_the_first_epoch_apart(data_root, monkeypatch):
    order = []
    real = helpers_speed.train_epoch
    record = lambda *a: order.append((a[0], getattr(a[0], "dtype", None))) or real(*a)  # float32: the model itself
    monkeypatch.setattr(helpers_speed, "train_epoch", record)
    rows = helpers_speed.benchmark_speed(
        data_root, ["cpu"], models=["small"], configs=["float32", "bfloat16"], epochs=3, limit=512, verbose=False
    )
    assert [r["config"] for r in rows] == ["float32", "bfloat16"]
    assert [amp for _, amp in order] == [None, torch.bfloat16] * 3, "one epoch each, taking turns"
    assert len({id(model) for model, _ in order}) == 2
    for r in rows:
        assert r["model"] == "784-32-10" and r["batch_size"] == 128 and r["first_s"] > 0
        assert r["epoch_s_min"] <= r["epoch_s"] <= r["epoch_s_max"] and 0 < r["val_acc"] <= 1
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] == pytest.approx(rows[0]["epoch_s"] / rows[1]["epoch_s"])
    assert "| 784-32-10 | 128 | cpu | bfloat16 |" in helpers_speed.format_speed(rows)
    with pytest.raises(ValueError, match="at least 2"):
        helpers_speed.benchmark_speed(data_root, ["cpu"], epochs=1)


def test_profile_labels_each_phase_and_lists_the_operations(tmp_path, monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randint(0, 256, (640, 1, 28, 28), dtype=torch.uint8, generator=g), torch.arange(640) % 10
    loader = helpers.DeviceResidentLoader(images, labels, 64, device="cpu")
    profiled = helpers_speed.profile_training(helpers.MnistModel(), loader, steps=5, trace=tmp_path / "trace.json")
    assert profiled["steps"] == 5 and set(profiled["seconds"]) == set(helpers_speed.PHASES)
    assert all(seconds > 0 for seconds in profiled["seconds"].values())
    top = helpers_speed.top_operations(profiled, n=8)
    names = [row["operation"] for row in top]
    assert len(top) == 8 and not set(names) & set(helpers_speed.PHASES)
    assert {"aten::addmm", "aten::mm"} & set(names), "the linear layers' matrix products are among the top"
    assert top[0]["self_ms"] >= top[-1]["self_ms"] and 0 < sum(row["share"] for row in top) <= 1 + 1e-9
    assert '"traceEvents"' in (tmp_path / "trace.json").read_text()[:1000]
    assert helpers_speed.plot_phases({"resident": profiled}).axes[0].get_xlabel() == "milliseconds per training step"
    ax = helpers_speed.plot_trace(tmp_path / "trace.json", step=2).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(helpers_speed.PHASES)
    assert sum(bar.get_y() < 0 for bar in ax.patches) == 4, "the top row: one step's four phases, each once"
    starts = [bar.get_x() for bar in ax.patches]
    assert min(starts) >= 0 and max(bar.get_x() + bar.get_width() for bar in ax.patches) <= ax.get_xlim()[1] + 1e-9
    with pytest.raises(ValueError, match="from 0 to 3"):
        helpers_speed.plot_trace(tmp_path / "trace.json", step=4)
    assert "KINETO_LOG_LEVEL" not in os.environ, "the profiler's quiet setting ends with the call"


def test_every_speed_configuration_sees_the_same_batches(data_root, monkeypatch):
    seen = {}
    real = helpers_speed.train_epoch

    def record(model, loader, *rest):
        seen.setdefault(id(model), []).append(torch.cat([labels for _, labels in loader]))
        return real(model, loader, *rest)

    monkeypatch.setattr(helpers_speed, "train_epoch", record)
    configs = ["float32", "bfloat16"]
    helpers_speed.benchmark_speed(
        data_root, ["cpu"], models=["small"], configs=configs, epochs=2, limit=512, verbose=False
    )
    first, second = seen.values()
    assert all(torch.equal(a, b) for a, b in zip(first, second)), "the same order for every configuration"
    assert not torch.equal(first[0], first[1]), "reshuffled every epoch"


def test_benchmark_fit_takes_turns_with_the_bare_loop_and_reports_each(data_root, monkeypatch):
    calls = []
    real_fit = helpers_speed.fit
    monkeypatch.setattr(helpers_speed, "fit", lambda *a, **kw: calls.append("fit") or real_fit(*a, **kw))
    result = helpers_speed.benchmark_fit(data_root, "cpu", rounds=3, limit=512, verbose=False)
    assert calls == ["fit"] * 3, "one epoch of fit a round"
    assert list(result["loops"]) == ["fit", "four lines"] and result["images"] == 512
    for times in result["loops"].values():
        assert 0 < times["epoch_s_min"] <= times["epoch_s"] <= times["epoch_s_max"]
    table = helpers_speed.format_fit_overhead(result)
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[2:] for line in table.splitlines()[3:]}
    assert rows["four lines"][0].rstrip(" |") == "1.000x", "the baseline, against itself"
    with pytest.raises(ValueError, match="at least 2"):
        helpers_speed.benchmark_fit(data_root, "cpu", rounds=1)
