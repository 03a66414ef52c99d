"""helpers_common.py, what the later modules share: a wrapper trains as its model does, one epoch of the four lines
reports the loss as fit does (over images), and the tables and timings say what their rows hold."""

import inspect
import time

import pytest
import torch
from conftest import random_images, same_weights

import helpers
import helpers_common
import helpers_ddp
import helpers_speed


def test_a_wrapped_model_trains_as_the_model_itself():
    images, labels = random_images(100)
    batches = [(images[:64], labels[:64]), (images[64:], labels[64:])]
    torch.manual_seed(0)
    model, twin = helpers.MnistModel(), helpers.MnistModel()
    twin.load_state_dict(model.state_dict())
    wrapped = helpers_common.Wrapped(twin)
    for trained in (model, wrapped):
        helpers.fit(2, 0.5, trained, batches, batches, progress=False, verbose=False)
    assert same_weights(model, twin) and wrapped.state_dict().keys() == model.state_dict().keys()
    assert helpers.evaluate(wrapped, batches) == helpers.evaluate(model, batches)


def test_one_epoch_of_the_four_lines_reports_the_mean_over_images_as_fit_does():
    """64 + 36 images: the mean over images, not the mean of the two batch means; and the weights fit trains."""
    images, labels = random_images(100)
    batches = [(images[:64], labels[:64]), (images[64:], labels[64:])]
    torch.manual_seed(0)
    model, bare = helpers.MnistModel(), helpers.MnistModel()
    bare.load_state_dict(model.state_dict())
    (fitted,) = helpers.fit(1, 0.5, model, batches, batches, progress=False, verbose=False)
    losses = []

    class Recorded(helpers_common.Wrapped):
        def training_step(self, batch):
            loss = super().training_step(batch)
            losses.append((loss.item(), len(batch[1])))
            return loss

    mean = helpers_common.train_epoch(Recorded(bare), batches, torch.optim.SGD(bare.parameters(), 0.5))
    assert mean == pytest.approx(sum(loss * n for loss, n in losses) / 100, rel=1e-6)
    assert mean != pytest.approx(sum(loss for loss, _ in losses) / 2, rel=1e-6), "not the mean of batch means"
    assert mean == pytest.approx(fitted["train_loss"], rel=1e-6) and same_weights(model, bare), "as fit trains"


def test_epoch_times_and_a_table_say_what_their_rows_hold():
    assert helpers_common.epoch_times([3.0, 1.0, 2.0, 10.0]) == {
        "epoch_s": 2.5,
        "epoch_s_min": 1.0,
        "epoch_s_max": 10.0,
    }
    table = helpers_common.markdown_table(
        [{"n": 1, "x": 0.5}, {"n": 2, "x": 0.25}], {"n": lambda r: str(r["n"]), "half": lambda r: f"{r['x']:.2f}"}
    )
    assert table.splitlines() == ["| n | half |", "|---|---|", "| 1 | 0.50 |", "| 2 | 0.25 |"]


def test_configurations_take_turns_one_epoch_each_and_each_call_is_timed():
    calls = []
    turns = {name: (lambda name=name: calls.append(name)) for name in "ABC"}
    seconds = helpers_common.take_turns(turns, 2)
    assert "".join(calls) == "ABCABC", "A B C A B C: a busy machine slows them all alike"
    assert list(seconds) == list("ABC") and all(len(s) == 2 and min(s) >= 0 for s in seconds.values())
    calls.clear()
    helpers_common.take_turns(turns, 3, alternate=True, before=lambda: calls.append("|"))
    assert "".join(calls) == "|C|B|A|A|B|C|C|B|A", "no fixed order; `before` ahead of each, untimed"
    assert helpers_common.take_turns({"nap": lambda: time.sleep(0.02)}, 1)["nap"][0] >= 0.02
    benchmarks = (
        helpers_speed.benchmark_pipelines,
        helpers_speed.benchmark_fit,
        helpers_speed.benchmark_speed,
        helpers_ddp._ddp_bench_worker,
    )
    assert all("take_turns(" in inspect.getsource(benchmark) for benchmark in benchmarks), "written once, here"
