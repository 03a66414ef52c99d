"""Mixed precision, TF32 and torch.compile (notebook 11): each switch changes what it should, is off by
default, and refuses what the device cannot do with a message that says what to use instead."""

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import helpers


def _loaders(n=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    data = TensorDataset(torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g))
    return DataLoader(data, 64, shuffle=True, generator=torch.Generator().manual_seed(1)), DataLoader(data, 128)


def _trained(**switches):
    torch.manual_seed(0)
    model = helpers.MnistModel()
    history = helpers.fit(2, 0.5, model, *_loaders(), progress=False, verbose=False, **switches)
    return model, history


def _forward_dtypes(model):
    dtypes = []
    model.linear2.register_forward_hook(lambda module, args, out: dtypes.append((module.training, out.dtype)))
    return dtypes


def test_switches_are_off_by_default_and_then_never_touch_autocast_or_compile(monkeypatch):
    plain, plain_history = _trained()
    monkeypatch.setattr(torch, "autocast", lambda *a, **kw: pytest.fail("autocast entered with amp off"))
    monkeypatch.setattr(torch, "compile", lambda *a, **kw: pytest.fail("torch.compile called with compile off"))
    off, off_history = _trained(amp=None, compile=False)
    for key, value in plain.state_dict().items():
        assert torch.equal(value, off.state_dict()[key])
    assert [h["val_loss"] for h in off_history] == [h["val_loss"] for h in plain_history]


def test_bfloat16_autocast_runs_the_training_forward_pass_in_bfloat16():
    torch.manual_seed(0)
    model = helpers.MnistModel()
    dtypes = _forward_dtypes(model)
    history = helpers.fit(1, 0.5, model, *_loaders(), progress=False, verbose=False, amp=torch.bfloat16)
    assert {d for training, d in dtypes if training} == {torch.bfloat16}
    assert {d for training, d in dtypes if not training} == {torch.float32}, "evaluation stays in float32"
    assert all(p.dtype == torch.float32 for p in model.parameters()), "the weights stay float32"
    plain, plain_history = _trained()
    assert history[0]["train_loss"] != plain_history[0]["train_loss"], "bfloat16 rounds differently"
    assert history[0]["val_acc"] == pytest.approx(plain_history[0]["val_acc"], abs=0.05)


def test_amp_by_name_as_the_command_line_gives_it():
    assert helpers.check_amp("bfloat16", "cpu") is torch.bfloat16
    assert helpers.check_amp("torch.bfloat16", "cpu") is torch.bfloat16
    assert helpers.check_amp(None, "cpu") is None


def test_compile_trains_through_the_compiled_module(monkeypatch):
    calls = []

    def fake_compile(model, mode):
        calls.append(mode)

        class Compiled(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self._orig_mod = model
                self.steps = 0

            def forward(self, x):
                self.steps += 1
                return self._orig_mod(x)

        compiled_model = Compiled()
        calls.append(compiled_model)
        return compiled_model

    monkeypatch.setattr(torch, "compile", fake_compile)
    model, history = _trained(compile=True)
    mode, compiled_model = calls
    assert mode == "default" and compiled_model.steps == 2 * 8, "every training step through the compiled module"
    assert helpers.unwrap(compiled_model) is model


def test_clear_errors_for_what_the_device_cannot_do(monkeypatch):
    model = helpers.MnistModel()
    loaders = _loaders(64)
    with pytest.raises(ValueError, match="float16 autocast needs a GPU.*amp=torch.bfloat16"):
        helpers.fit(1, 0.5, model, *loaders, amp=torch.float16)
    with pytest.raises(ValueError, match="amp must be torch.bfloat16, torch.float16 or None"):
        helpers.fit(1, 0.5, model, *loaders, amp="float8")
    with pytest.raises(ValueError, match="reduce-overhead.*needs a CUDA GPU.*compile=True"):
        helpers.fit(1, 0.5, model, *loaders, compile="reduce-overhead")
    with pytest.raises(ValueError, match="compile must be True, False or a mode"):
        helpers.fit(1, 0.5, model, *loaders, compile="fastest")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    with pytest.raises(ValueError, match="no native bfloat16.*amp=torch.float16"):
        helpers.check_amp(torch.bfloat16, "cuda")


def test_tf32_switch_is_restored_afterwards():
    before = torch.backends.cuda.matmul.fp32_precision
    with helpers.tf32(True):
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        with helpers.tf32(False):
            assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert torch.backends.cuda.matmul.fp32_precision == before


def test_command_line_passes_the_switches(monkeypatch):
    seen = {}
    monkeypatch.setattr(helpers, "train_distributed", lambda **kw: seen.update(kw))
    helpers.main(["--device", "cpu", "train", "--amp", "bfloat16", "--compile"])
    assert seen["amp"] == "bfloat16" and seen["compile"] == "default"
    helpers.main(["train"])
    assert seen["amp"] is None and seen["compile"] is False


@pytest.mark.cuda
@pytest.mark.parametrize("amp", [torch.float16, torch.bfloat16])
def test_mixed_precision_trains_on_cuda(amp):
    if amp == torch.bfloat16 and not helpers.bf16_native("cuda"):
        pytest.skip("this GPU has no native bfloat16")
    torch.manual_seed(0)
    model = helpers.to_device(helpers.MnistModel(), "cuda")
    dtypes = _forward_dtypes(model)
    train, val = (helpers.DeviceDataLoader(dl, "cuda") for dl in _loaders())
    history = helpers.fit(2, 0.5, model, train, val, progress=False, verbose=False, amp=amp)
    assert {d for training, d in dtypes if training} == {amp}
    assert all(torch.isfinite(torch.tensor(h["train_loss"])) for h in history)


def test_speed_configs_follow_what_each_device_can_do(monkeypatch):
    assert helpers.speed_configs("cpu") == ["float32", "bfloat16", "compile"]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)  # a T4
    assert helpers.speed_configs("cuda") == ["float32", "tf32", "float16", "compile", "compile reduce-overhead"]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # an A100
    assert "bfloat16" in helpers.speed_configs("cuda")


def test_mlp_layers():
    model = helpers.mlp(784, 64, 64, 10)
    assert [m.out_features for m in model if isinstance(m, torch.nn.Linear)] == [64, 64, 10]
    assert sum(isinstance(m, torch.nn.ReLU) for m in model) == 2 and model(torch.rand(3, 1, 28, 28)).shape == (3, 10)


def test_benchmark_speed_takes_turns_and_times_the_first_epoch_apart(data_root, monkeypatch):
    order = []
    real = helpers.train_epoch
    monkeypatch.setattr(helpers, "train_epoch", lambda *a: order.append((a[0], a[3])) or real(*a))
    rows = helpers.benchmark_speed(
        data_root, ["cpu"], models=["small"], configs=["float32", "bfloat16"], epochs=3, limit=512, verbose=False
    )
    assert [r["config"] for r in rows] == ["float32", "bfloat16"]
    assert [amp for _, amp in order] == [None, torch.bfloat16] * 3, "one epoch each, taking turns"
    assert len({id(model) for model, _ in order}) == 2
    for r in rows:
        assert r["model"] == "784-32-10" and r["batch_size"] == 128 and r["first_s"] > 0
        assert r["epoch_s_min"] <= r["epoch_s"] <= r["epoch_s_max"] and 0 < r["val_acc"] <= 1
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] == pytest.approx(rows[0]["epoch_s"] / rows[1]["epoch_s"])
    assert "| 784-32-10 | 128 | cpu | bfloat16 |" in helpers.format_speed(rows)
    with pytest.raises(ValueError, match="at least 2"):
        helpers.benchmark_speed(data_root, ["cpu"], epochs=1)


def test_profile_labels_each_phase_and_lists_the_operations(tmp_path):
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randint(0, 256, (640, 1, 28, 28), dtype=torch.uint8, generator=g), torch.arange(640) % 10
    loader = helpers.DeviceResidentLoader(images, labels, 64, device="cpu")
    profiled = helpers.profile_training(helpers.MnistModel(), loader, steps=5, trace=tmp_path / "trace.json")
    assert profiled["steps"] == 5 and set(profiled["seconds"]) == set(helpers.PHASES)
    assert all(seconds > 0 for seconds in profiled["seconds"].values())
    top = helpers.top_operations(profiled, n=8)
    names = [row["operation"] for row in top]
    assert len(top) == 8 and not set(names) & set(helpers.PHASES)
    assert {"aten::addmm", "aten::mm"} & set(names), "the linear layers' matrix products are among the top"
    assert top[0]["self_ms"] >= top[-1]["self_ms"] and 0 < sum(row["share"] for row in top) <= 1 + 1e-9
    assert '"traceEvents"' in (tmp_path / "trace.json").read_text()[:1000]
    assert helpers.plot_phases({"resident": profiled}).axes[0].get_xlabel() == "milliseconds per training step"


def test_every_speed_configuration_sees_the_same_batches(data_root, monkeypatch):
    seen = {}
    real = helpers.train_epoch

    def record(model, loader, *rest):
        seen.setdefault(id(model), []).append(torch.cat([labels for _, labels in loader]))
        return real(model, loader, *rest)

    monkeypatch.setattr(helpers, "train_epoch", record)
    configs = ["float32", "bfloat16"]
    helpers.benchmark_speed(data_root, ["cpu"], models=["small"], configs=configs, epochs=2, limit=512, verbose=False)
    first, second = seen.values()
    assert all(torch.equal(a, b) for a, b in zip(first, second)), "the same order for every configuration"
    assert not torch.equal(first[0], first[1]), "reshuffled every epoch"
