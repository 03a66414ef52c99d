"""helpers_exercises: every check passes its worked solution and another correct answer, names each typical wrong
answer and the fact it found, never raises whatever the notebook holds, and speaks Chinese from the catalogue."""

import ast
import math
import re
import string
import types
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import helpers
import helpers_exercises

____ = ()  # the blank, as every set-up cell defines it

UNANSWERED = "Your turn: fill in the ____ above with your answer, then run this cell"
MODULE = Path(helpers_exercises.__file__)
SPEAKING = [MODULE, *(MODULE.with_name(f"{name}.py") for name in ("series_setup", "helpers", "helpers_data"))]


def checked(notebook, number, namespace, capsys, lang="en"):
    """(passed, the one line printed) of exercise `number` of `notebook` against `namespace`."""
    exercise = helpers_exercises.exercises(notebook, namespace, lang=lang)[number - 1]
    assert exercise.check() is None, "a check returns nothing, so a notebook cell that ends with it shows no Out[]"
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1, lines
    return exercise.passed, lines[0]


def not_yet(notebook, number, namespace, capsys, *facts):
    """The "Not yet" line exercise `number` prints (or, for blanks left, the one that asks for them); it names each of
    `facts`."""
    passed, line = checked(notebook, number, namespace, capsys)
    assert not passed and (line.startswith("Not yet: ") or line == UNANSWERED), line
    assert all(fact in line for fact in facts), (facts, line)
    return line


def correct(notebook, number, namespace, capsys, *facts):
    passed, line = checked(notebook, number, namespace, capsys)
    assert passed and line.startswith("Correct: ") and all(fact in line for fact in facts), (facts, line)
    return line


def solved(notebook, number, namespace):
    """`namespace` after running the exercise's worked solution, the notebook's folded cell, in it (the same dict)."""
    exec(helpers_exercises.solutions(notebook)[number - 1], namespace)
    return namespace


# ------------------------------------------------------------------------------------------------ stand-ins


class Flat(nn.Module):
    """784 -> ... -> 10 as nn.Sequential, with or without ReLUs between the layers."""

    def __init__(self, *sizes, relu=True):
        super().__init__()
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()] if relu else [nn.Linear(a, b)]
        self.layers = nn.Sequential(nn.Flatten(), *layers[: -1 if relu else None])

    def forward(self, xb):
        return self.layers(xb)


class Layers(nn.Module):
    """784 -> 64 -> 32 -> 10; subclasses write forward as a learner might."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(784, 64), nn.Linear(64, 32), nn.Linear(32, 10)


class OneRelu(Layers):
    def forward(self, xb):
        return self.c(self.b(F.relu(self.a(xb.flatten(1)))))


class ReluOnScores(Layers):
    def forward(self, xb):
        return F.relu(self.c(F.relu(self.b(F.relu(self.a(xb.flatten(1)))))))


class NoFlatten(Layers):
    def forward(self, xb):
        return self.c(F.relu(self.b(F.relu(self.a(xb)))))


class NoReturn(Layers):
    def forward(self, xb):
        self.c(F.relu(self.b(F.relu(self.a(xb.flatten(1))))))


class ReturnsHidden(Layers):
    def forward(self, xb):
        hidden = F.relu(self.b(F.relu(self.a(xb.flatten(1)))))
        return self.c(hidden), hidden


class Typo(Layers):
    def forward(self, xb):
        out = F.reul(self.a(xb.flatten(1)))  # a typo a learner makes
        return self.c(F.relu(self.b(out)))


class Doubles(Layers):
    """Weights in float64, images in float32: a dtype mismatch, not a missing flatten."""

    def __init__(self):
        super().__init__()
        self.double()

    def forward(self, xb):
        return self.c(F.relu(self.b(F.relu(self.a(xb.flatten(1))))))


class NanScores(Layers):
    def forward(self, xb):
        return self.c(F.relu(self.b(F.relu(self.a(xb.flatten(1)))))) * float("nan")


class Explodes:
    """An answer that raises whatever is asked of it."""

    def __getattr__(self, name):
        raise RuntimeError("boom")

    def __eq__(self, other):
        raise RuntimeError("boom")

    __hash__ = None

    def __len__(self):
        raise RuntimeError("boom")

    def __iter__(self):
        raise RuntimeError("boom")

    def __bool__(self):
        raise RuntimeError("boom")

    def __call__(self, *args):
        raise RuntimeError("boom")


class FakeFashion(TensorDataset):
    classes = ["T-shirt/top", "Trouser", "Pullover"]


class FakeDigits(TensorDataset):
    classes = ["0 - zero", "1 - one", "2 - two"]


IMAGES = (torch.zeros(64, 1, 28, 28), torch.zeros(64, dtype=torch.long))
TRAIN_SET = list(range(50_000))
BATCHES = {32: (1563, 16), 128: (391, 80), 512: (98, 336)}
GRID = {(size, lr): 0.5 + size / 10_000 + lr / 10 for size in (32, 128, 512) for lr in (0.05, 0.5)}


def run_of(acc, epochs=2, seconds=0.1):
    """A history as train_on_device returns it: `epochs` epochs, the last at validation accuracy `acc`."""
    return [{"val_loss": 0.3, "val_acc": acc, "epoch_s": seconds} for _ in range(epochs)]


HISTORIES = {key: run_of(acc, seconds=1000 / key[0]) for key, acc in GRID.items()}  # bigger batches, faster epochs


def val_set(n=512):
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g))


def notebook_04(device="cpu"):
    """The names 04's first exercise reads, and the worked solution run in them."""
    namespace = {"DataLoader": DataLoader, "torch": torch, "helpers": helpers, "val_set": val_set()}
    return solved("04_device_transfer", 1, namespace | {"DEVICE": torch.device(device)})


def fake_predictions():
    """Ten test images: confidences 0.4 to 0.999, the first seven predicted right."""
    top = torch.tensor([0.4, 0.6, 0.7, 0.8, 0.95, 0.96, 0.995, 0.5, 0.92, 0.999])
    probs = torch.stack([top, (1 - top) / 2, (1 - top) / 2], dim=1)
    labels = torch.zeros(10, dtype=torch.long)
    return {"probs": probs, "preds": torch.tensor([0, 0, 0, 0, 0, 0, 0, 1, 1, 1]), "labels": labels}


def learnable_loaders():
    """Images whose label is the one bright row among the first ten: a task a model learns in a few epochs."""
    labels = torch.arange(512) % 10
    images = torch.rand(512, 1, 28, 28, generator=torch.Generator().manual_seed(0)) * 0.1
    images[torch.arange(512), 0, labels] = 1.0
    return (
        helpers.DeviceResidentLoader(images, labels, 64, shuffle=True, device="cpu", seed=0),
        helpers.DeviceResidentLoader(images, labels, 128, device="cpu"),
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A folder like 08's demo: run.ckpt after 2 epochs on learnable data, and the validation loader."""
    folder = tmp_path_factory.mktemp("demo")
    train, val = learnable_loaders()
    torch.manual_seed(0)
    model = helpers.MnistModel()
    helpers.fit(2, 0.5, model, train, val, progress=False, verbose=False, checkpoint_path=folder / "run.ckpt")
    return {"demo": folder, "val_fast": val, "DEVICE": torch.device("cpu"), "helpers": helpers, "torch": torch}


def fake_train_on_device(make_model, phases, size=128, data=None):
    """05's train_on_device without the training: a val_acc that grows with the parameters and the rate."""
    ((epochs, lr),) = phases
    network = make_model()
    acc = 0.8 + sum(p.numel() for p in network.parameters()) / 1e7 + lr / 10 - size / 10_000
    return [{"val_acc": acc, "epoch_s": size / 1000} for _ in range(epochs)]


def notebook_05():
    """The names 05's exercises use, with a train_on_device that answers at once."""
    return {
        **{"partial": partial, "helpers": helpers, "nn": nn, "hidden_size": 32, "lr1": 0.5, "exercise_epochs": 2},
        **{"exercise_set": None, "train_on_device": fake_train_on_device},
    }


# What each check reads, a right answer in it: the context the notebook sets up and the learner's answers.
RIGHT = {
    ("02_data_loading", 1): lambda: {"train_set": TRAIN_SET, "batches": BATCHES},
    ("02_data_loading", 2): lambda: {"fashion_loader": DataLoader(FakeFashion(*IMAGES), 16, shuffle=True)},
    ("03_model", 1): lambda: {"parameters": {h: 795 * h + 10 for h in (16, 64, 128, 1024)}},
    ("03_model", 2): lambda: {"deeper": Flat(784, 64, 32, 10)},
    ("04_device_transfer", 1): notebook_04,
    ("04_device_transfer", 2): lambda: solved("04_device_transfer", 2, {"batch": {}, "device": "cpu"}),
    ("05_training", 1): lambda: {"histories": HISTORIES, "exercise_epochs": 2},
    ("05_training", 2): lambda: {"hidden_results": {16: 0.91, 32: 0.92, 64: 0.93, 128: 0.935}},
    ("05_training", 3): lambda: {"make_deeper": lambda: Flat(784, 64, 32, 10), "deeper_history": [{"val_acc": 0.9}]},
    ("06_plots", 1): lambda: {"phases": [(2, 0.5), (1, 0.1)], "exercise_epochs": 3, "fashion_test_acc": 0.8412},
    ("07_error_analysis", 1): lambda: {
        "predictions": fake_predictions(),
        "answered": {0.5: (9, 6), 0.9: (5, 3), 0.99: (2, 1)},
    },
    ("09_cpu_vs_gpu", 1): lambda: {"devices": ["cpu", "cuda"], "histories": HISTORIES_09, "seconds": SECONDS},
    ("10_many_gpus", 1): lambda: {"without": NO_SET_EPOCH, "no_set_epoch_difference": 3e-2},
    ("11_gpu_speed", 1): lambda: {
        "results": {"float32": 0.9699, "bfloat16": 0.9702},
        "scaler": torch.amp.GradScaler("cpu", enabled=False),
        "exercise_dtype": torch.bfloat16,
    },
}
ANSWERS = {  # the names a learner's answer sets, for each exercise
    ("02_data_loading", 1): ["batches"],
    ("02_data_loading", 2): ["fashion_loader"],
    ("03_model", 1): ["parameters"],
    ("03_model", 2): ["deeper"],
    ("04_device_transfer", 1): ["val_on_device", "one_pass_sliced"],
    ("04_device_transfer", 2): ["to_device_with_dicts"],
    ("05_training", 1): ["histories"],
    ("05_training", 2): ["hidden_results"],
    ("05_training", 3): ["make_deeper", "deeper_history"],
    ("06_plots", 1): ["phases", "fashion_test_acc"],
    ("07_error_analysis", 1): ["answered"],
    ("08_checkpoints", 1): ["completed", "restored_score"],
    ("09_cpu_vs_gpu", 1): ["seconds"],
    ("10_many_gpus", 1): ["without", "no_set_epoch_difference"],
    ("11_gpu_speed", 1): ["scaler", "results"],
}
CHECKED = list(ANSWERS)


def right(key, demo, capsys):
    """A right answer to exercise `key`, in what its check reads (what a worked solution printed, put aside)."""
    namespace = solved("08_checkpoints", 1, dict(demo)) if key == ("08_checkpoints", 1) else RIGHT[key]()
    capsys.readouterr()
    return namespace


# ------------------------------------------------------------------------------------------------ every check


def test_every_notebook_with_exercises_has_them_numbered_with_hints_and_solutions():
    """Each exercise has a hint, an idea, and a worked solution read from its notebook's folded cell."""
    assert set(helpers_exercises.REGISTRY) == {f"{n}" for n, _ in CHECKED}
    for notebook, exercises in helpers_exercises.REGISTRY.items():
        codes = helpers_exercises.solutions(notebook)
        assert len(codes) == len(exercises), f"{notebook}: one solution cell per exercise"
        for exercise, code in zip(exercises, codes):
            assert exercise.notebook == notebook and exercise.nudge and exercise.idea and code.strip()
            assert "q1.check()" not in code and not code.startswith("#"), "the cell's own"
            compile(code, f"{notebook} solution {exercise.number}", "exec")


@pytest.mark.parametrize("key", CHECKED, ids=[f"{n}-q{q}" for n, q in CHECKED])
def test_every_check_passes_a_right_answer(key, demo, capsys):
    correct(*key, right(key, demo, capsys), capsys)


@pytest.mark.parametrize("key", CHECKED, ids=[f"{n}-q{q}" for n, q in CHECKED])
def test_with_nothing_defined_a_check_says_to_run_the_cells_above(key, capsys):
    not_yet(*key, {}, capsys, "run the cells above first (`")


@pytest.mark.parametrize("key", CHECKED, ids=[f"{n}-q{q}" for n, q in CHECKED])
def test_an_answer_missing_or_left_blank_is_named(key, demo, capsys):
    for name in ANSWERS[key]:
        namespace = right(key, demo, capsys)
        del namespace[name]
        not_yet(*key, namespace, capsys, f"run the cells above first (`{name}` is not defined)")
        assert checked(*key, right(key, demo, capsys) | {name: ____}, capsys) == (False, UNANSWERED)


TRAIN_DDP = (  # a stand-in for the notebook's train_ddp.py, the lines the check reads
    "sampler = DistributedSampler(train_set)\nmodel = DDP(model)\n"
    "for epoch in range(2):\n    sampler.set_epoch(epoch)\n"
)
NO_SET_EPOCH = TRAIN_DDP.replace("    sampler.set_epoch(epoch)\n", "    pass\n")
WRONG_KINDS = {"None": None, "nan": math.nan, "text": "0.97", "a-list": [1, 2], "raises": Explodes()}


@pytest.mark.parametrize("key", CHECKED, ids=[f"{n}-q{q}" for n, q in CHECKED])
@pytest.mark.parametrize("kind", WRONG_KINDS)
def test_an_answer_of_the_wrong_kind_or_that_raises_gets_one_not_yet_line(key, kind, demo, capsys):
    """None, NaN, text, a list, an object that raises whatever is asked of it: one "Not yet" line, nothing raised."""
    for name in ANSWERS[key]:
        not_yet(*key, right(key, demo, capsys) | {name: WRONG_KINDS[kind]}, capsys)


def test_a_check_that_stops_names_the_exception_and_the_learners_line(capsys):
    line = not_yet("10_many_gpus", 1, {"without": NO_SET_EPOCH, "no_set_epoch_difference": Explodes()}, capsys)
    assert "RuntimeError: boom" in line and "raise RuntimeError" in line


def test_a_language_or_notebook_that_does_not_exist_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="lang='fr': choose one of en, zh"):
        helpers_exercises.exercises("03_model", {}, lang="fr")
    with pytest.raises(ValueError, match="no exercises for '99_x': choose one of 02_data_loading"):
        helpers_exercises.exercises("99_x", {})


# ------------------------------------------------------------------------------------------------ 02


def test_02_solutions_pass(capsys):
    namespace = {"DataLoader": DataLoader, "train_set": TRAIN_SET, "time": __import__("time"), "exercise_limit": 64}
    namespace["DEVICE"] = torch.device("cpu")
    solved("02_data_loading", 1, namespace)
    assert capsys.readouterr().out.splitlines()[0].startswith("batch  32: 1563 batches, the last of  16;")
    correct("02_data_loading", 1, namespace, capsys, "32 → (1563, 16), 128 → (391, 80), 512 → (98, 336)")
    stand_in = types.SimpleNamespace(load_fashion_mnist=lambda root: FakeFashion(*IMAGES), show_batch=len)
    plt = types.SimpleNamespace(show=lambda: None)
    namespace = {"DataLoader": DataLoader, "helpers": stand_in, "plt": plt, "torch": torch, "DATA": "", "seed": 1}
    solved("02_data_loading", 2, namespace)
    assert capsys.readouterr().out == "classes: T-shirt/top, Trouser, Pullover\n"
    correct("02_data_loading", 2, namespace, capsys, "Fashion-MNIST's 64 images, batches of 32")


@pytest.mark.parametrize(
    "batches, facts",
    [
        ({32: (1562, 32), 128: (390, 128), 512: (97, 512)}, ["1,562 leaves out the last, smaller batch"]),
        ({32: (1875, 32), 128: (469, 96), 512: (118, 96)}, ["counted from 60,000 images", "50,000"]),
        ({32: (1563, 32), 128: (391, 128), 512: (98, 512)}, ["the last batch does not hold 32 images"]),
        ({32: (1500, 16), 128: (391, 80), 512: (98, 336)}, ["1,500 is not the number of batches"]),
        ({32: (1563, 16)}, ["batches has no entry for 128"]),
        ({32: (1563.5, 16), 128: (391, 80), 512: (98, 336)}, ["batches[32] holds (1563.5, 16)", "whole numbers"]),
        ({32: 1563, 128: (391, 80), 512: (98, 336)}, ["batches[32] is 1563; it should be a pair"]),
        ([1563, 391, 98], ["batches is a list; it should be a dict"]),
    ],
    ids=["rounded-down", "from-60000", "last-full", "wrong-count", "missing-size", "not-whole", "not-a-pair", "list"],
)
def test_02_batch_counts_wrong_answers(batches, facts, capsys):
    not_yet("02_data_loading", 1, {"train_set": TRAIN_SET, "batches": batches}, capsys, *facts)


def test_02_batch_counts_after_a_kernel_restart(capsys):
    """Checked out of order (the set-up cell, the q1, q2 cell, then the answer): train_set is gone, and said so."""
    not_yet("02_data_loading", 1, {"batches": BATCHES}, capsys, "(`train_set` is not defined)")


class FashionTestSet(FakeFashion):
    train = False


@pytest.mark.parametrize(
    "loader, facts",
    [
        (DataLoader(FakeDigits(*IMAGES), 32, shuffle=True), ["not Fashion-MNIST's", "'0 - zero'"]),
        (DataLoader(FakeFashion(*IMAGES), 32), ["does not shuffle", "shuffle=True"]),
        (DataLoader(FashionTestSet(*IMAGES), 32, shuffle=True), ["Fashion-MNIST's test images"]),
        (FakeFashion(*IMAGES), ["fashion_loader is a FakeFashion; make it a DataLoader"]),
    ],
    ids=["mnist", "not-shuffled", "test-set", "a-dataset"],
)
def test_02_fashion_loader_wrong_answers(loader, facts, capsys):
    not_yet("02_data_loading", 2, {"fashion_loader": loader}, capsys, *facts)


# ------------------------------------------------------------------------------------------------ 03


def test_03_solutions_pass(capsys):
    namespace = solved("03_model", 1, {"helpers": helpers})
    assert capsys.readouterr().out.splitlines()[0] == "hidden   16:  12,730 parameters, 99% of them in the first layer"
    correct("03_model", 1, namespace, capsys, "16 → 12,730, 64 → 50,890, 128 → 101,770, 1024 → 814,090")
    namespace = solved("03_model", 2, {"nn": nn, "F": F, "images": torch.zeros(4, 1, 28, 28)})
    assert capsys.readouterr().out == "outputs: [4, 10] | parameters: 52,650\n"
    correct("03_model", 2, namespace, capsys, "52,650 parameters")


@pytest.mark.parametrize(
    "parameters, facts",
    [
        ({h: 794 * h for h in (16, 64, 128, 1024)}, ["hidden 16: 12,704 counts the weights alone"]),
        ({h: 785 * h for h in (16, 64, 128, 1024)}, ["hidden 16: 12,560 is the first layer alone"]),
        ({h: 25_450 for h in (16, 64, 128, 1024)}, ["25,450 is the lesson's model", "its own size"]),
        ({16: 12_730, 64: 50_890, 128: 101_770}, ["parameters has no entry for 1024"]),
        ({16: 12_731, 64: 50_890, 128: 101_770, 1024: 814_090}, ["hidden 16: 12,731 is not the model's count"]),
        ({16: 12_730.5, 64: 50_890, 128: 101_770, 1024: 814_090}, ["12730.5; it should be a whole number"]),
        ({16: torch.tensor(12_730), 64: 50_890, 128: 101_770, 1024: math.nan}, ["parameters[1024] is nan"]),
    ],
    ids=["no-biases", "first-layer-only", "one-model", "missing-size", "off-by-one", "not-whole", "nan"],
)
def test_03_parameter_counts_wrong_answers(parameters, facts, capsys):
    not_yet("03_model", 1, {"parameters": parameters}, capsys, *facts)


@pytest.mark.parametrize(
    "deeper, facts",
    [
        (NoFlatten, ["deeper is the class NoFlatten itself", "NoFlatten()"]),
        (Flat(784, 64, 10), ["784 → 64 → 10 (hidden layers: 1)"]),
        (Flat(784, 64, 32, 10, relu=False), ["deeper is linear"]),
        (OneRelu(), ["linear layer 3 receives negative values: there is no ReLU after layer 2"]),
        (ReluOnScores(), ["scores are never negative"]),
        (NoFlatten(), ["mat1 and mat2 shapes cannot be multiplied", "works on them flattened", "xb.flatten(1)"]),
        (NoReturn(), ["deeper(images) returns None", "return"]),
        (ReturnsHidden(), ["deeper(images) returns a tuple of 2", "return only the scores"]),
        (Typo(), ["AttributeError", "'reul'", "at the line `out = F.reul(self.a(xb.flatten(1)))"]),
        (Doubles(), ["RuntimeError", "dtype", "at the line `return self.c("]),
        (NanScores(), ["not finite"]),
        (lambda xb: xb, ["deeper is a function, not a model"]),
        (None, ["deeper is None", "must end with return"]),
        (Flat(784, 64, 32, 10).to("meta"), ["deeper is on the meta device", "make it again on a real device"]),
    ],
    ids=[
        *("the-class", "one-hidden-layer", "no-relu", "relu-after-one", "relu-on-scores", "not-flattened"),
        *("no-return", "a-tuple", "a-typo", "float64", "nan", "a-function", "none", "on-meta"),
    ],
)
def test_03_two_hidden_layers_wrong_answers(deeper, facts, capsys):
    line = not_yet("03_model", 2, {"deeper": deeper}, capsys, *facts)
    if not isinstance(deeper, NoFlatten):
        assert "flatten them first" not in line, "advice only for the mistake diagnosed"


# ------------------------------------------------------------------------------------------------ 04


def test_04_moved_once_says_what_it_checked(capsys):
    line = correct("04_device_transfer", 1, notebook_04(), capsys, "512 images in one tensor", "a pass over slices")
    assert "On a CPU .to(DEVICE) copies nothing" in line and "on a GPU the check also finds the images" in line


@pytest.mark.cuda
def test_04_moved_once_on_a_gpu_says_where(capsys):
    line = correct("04_device_transfer", 1, notebook_04("cuda"), capsys, "512 images in one tensor on cuda")
    assert "On a CPU" not in line


def wrong_slices():
    return [torch.tensor(0.0)]


@pytest.mark.parametrize(
    "answers, facts",
    [
        ({"val_on_device": "labels"}, ["has shape [512] and holds torch.int64: those are the labels"]),
        ({"val_on_device": torch.zeros(256, 1, 28, 28)}, ["has shape [256, 1, 28, 28]", "[512, 1, 28, 28]"]),
        ({"val_on_device": [torch.zeros(1)]}, ["val_on_device is a list; make it one tensor"]),
        ({"val_on_device": "shuffled"}, ["val_on_device[0] is not the first validation image"]),
        ({"one_pass_sliced": wrong_slices}, ["one_pass_sliced() gives 1 batches, the DataLoader 2"]),
        ({"one_pass_sliced": "means"}, ["gives 2 numbers, as many as the DataLoader's batches, but not their sums"]),
        ({"one_pass_sliced": "batches"}, ["gives batches, not one number per batch: end each with .sum()"]),
        ({"one_pass_sliced": lambda: [____]}, [UNANSWERED]),
        ({"one_pass_sliced": lambda: 1 / 0}, ["one_pass_sliced() raised ZeroDivisionError", "lambda: 1 / 0"]),
        ({"one_pass_sliced": lambda: helpers.seed_everything(-1)}, ["ValueError", "line `({"]),
    ],
    ids=[
        *("the-labels", "one-batch", "a-list", "shuffled", "wrong-slices", "means", "no-sum", "blank-slice"),
        *("raises", "raises-in-helpers"),
    ],
)
def test_04_moved_once_wrong_answers(answers, facts, capsys):
    namespace = notebook_04()
    if answers.get("one_pass_sliced") in ("means", "batches"):  # a fresh learner's two slips: .mean(), no .sum()
        images, kind = namespace["val_on_device"], answers["one_pass_sliced"]
        slices = [images[i : i + 256] for i in range(0, len(images), 256)]
        answers = {"one_pass_sliced": lambda: [x.mean() for x in slices] if kind == "means" else slices}
    if answers.get("val_on_device") == "labels":  # the labels moved instead of the images
        answers = {"val_on_device": namespace["val_labels"].to(namespace["DEVICE"])}
    if answers.get("val_on_device") == "shuffled":
        answers = {"val_on_device": namespace["val_on_device"].flip(0)}
    not_yet("04_device_transfer", 1, namespace | answers, capsys, *facts)


def test_04_moved_once_to_another_device(capsys):
    """The tensor left on the CPU, the notebook's device a GPU (meta stands in)."""
    namespace = notebook_04() | {"DEVICE": torch.device("meta")}
    not_yet("04_device_transfer", 1, namespace, capsys, "val_on_device is on cpu; the notebook's device is meta")


def any_container(data, device):
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, dict):
        return {key: any_container(value, device) for key, value in data.items()}
    return type(data)(any_container(x, device) for x in data)


def test_04_dicts_another_right_answer(capsys):
    correct("04_device_transfer", 2, {"to_device_with_dicts": any_container}, capsys, "dicts, lists and dicts of lists")


def lesson_to_device(data, device):
    if isinstance(data, (list, tuple)):
        return [lesson_to_device(x, device) for x in data]
    return data.to(device, non_blocking=True)


def dict_as_values(data, device):
    if isinstance(data, dict):
        return [lesson_to_device(v, device) for v in data.values()]
    return lesson_to_device(data, device)


def dict_as_given(data, device):
    if isinstance(data, dict):
        return data
    return lesson_to_device(data, device)


def dict_without_lists(data, device):
    if isinstance(data, dict):
        return {k: v.to(device) for k, v in data.items()}
    return data.to(device)


def dict_without_recursion(data, device):
    if isinstance(data, dict):
        return {key: value.to(device) for key, value in data.items()}
    return lesson_to_device(data, device)


def list_without_return(data, device):
    """An answer whose list branch computes its list and drops it."""
    if isinstance(data, dict):
        return {key: list_without_return(value, device) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        [list_without_return(x, device) for x in data]
    else:
        return data.to(device, non_blocking=True)


def keys_renamed(data, device):
    if isinstance(data, dict):
        return {str(i): lesson_to_device(v, device) for i, v in enumerate(data.values())}
    return lesson_to_device(data, device)


def raises_inside(data, device):
    if isinstance(data, dict):
        return {key: value.too(device) for key, value in data.items()}
    return lesson_to_device(data, device)


def the_outline(data, device):
    """The exercise cell as the notebook gives it: its dict branch still returns ____."""
    if isinstance(data, dict):
        return ____
    return lesson_to_device(data, device)


def dict_of_blanks(data, device):
    if isinstance(data, dict):
        return {key: ____ for key in data}
    return lesson_to_device(data, device)


@pytest.mark.parametrize(
    "function, facts",
    [
        (lesson_to_device, ["does not know dicts yet: it calls .to on the dict itself"]),
        (dict_as_values, ["to_device_with_dicts(a_dict, 'meta') returned a list; it should build a dict"]),
        (dict_as_given, ["the dict came back with its tensors where they were"]),
        (dict_without_lists, ["lists no longer do: keep the lesson's branch for lists"]),
        (dict_without_recursion, ["a dict whose values are lists fails", "so that it recurses"]),
        (list_without_return, ["to_device_with_dicts(a_list, 'meta') returned None", "end with return"]),
        (keys_renamed, ["the dict came back with the keys ['0', '1']"]),
        (raises_inside, ["AttributeError: 'Tensor' object has no attribute 'too'", "value.too(device)"]),
        (the_outline, [UNANSWERED]),
        (dict_of_blanks, [UNANSWERED]),
        (42, ["to_device_with_dicts is a int, not a function"]),
    ],
    ids=[
        *("the-lessons", "values-only", "dict-unmoved", "lists-broken", "no-recursion", "list-without-return"),
        *("keys-renamed", "raises", "the-outline", "blanks-inside", "a-number"),
    ],
)
def test_04_dicts_wrong_answers(function, facts, capsys):
    not_yet("04_device_transfer", 2, {"to_device_with_dicts": function}, capsys, *facts)


# ------------------------------------------------------------------------------------------------ 05


def test_05_solutions_pass(capsys):
    namespace = solved("05_training", 1, notebook_05())
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["batch    lr  val_acc  s/epoch", "   32  0.05   0.8043    0.032"]
    correct(
        "05_training",
        1,
        namespace,
        capsys,
        "batch 32 at lr 0.5 did best (0.8493)",
        "batch 32 was fastest (0.03 s) and batch 512 slowest (0.51 s)",
    )
    namespace = solved("05_training", 2, notebook_05())
    correct("05_training", 2, namespace, capsys, "16 → 0.8385, 32 → 0.8397, 64 → 0.8423, 128 → 0.8474")
    namespace = solved("05_training", 3, notebook_05())
    correct("05_training", 3, namespace, capsys, "trained to 0.8425 validation accuracy in 2 epochs")


def test_05_the_cells_as_a_learner_meets_them_ask_for_the_blanks(capsys):
    """Each exercise cell, run as it stands (its ____ still there), runs to its check, which asks for the answer."""
    import nbformat

    cells = nbformat.read(Path(__file__).parents[1] / "notebooks" / "05_training.ipynb", as_version=4).cells
    for number, cell_id in enumerate(("c05-42", "c05-43", "c05-44"), 1):
        (cell,) = [c for c in cells if c.id == cell_id]
        namespace = notebook_05() | {"____": ____}
        namespace |= dict(zip(("q1", "q2", "q3"), helpers_exercises.exercises("05_training", namespace)))
        exec(cell.source, namespace)
        assert capsys.readouterr().out.strip() == UNANSWERED, number


def test_05_accuracies_as_the_lesson_keeps_them(capsys):
    """0-d tensors, as the lesson's accuracy() returns them, and evaluate's result dicts are read as numbers."""
    as_tensors = {key: [{"val_acc": torch.tensor(h[-1]["val_acc"])}] for key, h in HISTORIES.items()}
    correct("05_training", 1, {"histories": as_tensors}, capsys, "batch 512 at lr 0.5 did best")
    accs = {16: 0.91, 32: 0.925, 64: 0.932, 128: 0.935}
    as_results = {h: {"val_loss": 0.3, "val_acc": acc} for h, acc in accs.items()}
    correct("05_training", 2, {"hidden_results": as_results}, capsys, "each doubling gains less")


@pytest.mark.parametrize(
    "answers, facts",
    [
        (
            {"histories": {k: v for k, v in HISTORIES.items() if k != (512, 0.05)}},
            ["histories has no entry for (512, 0.05)"],
        ),
        ({"histories": {**HISTORIES, (32, 0.05): run_of(93.1)}}, ["(32, 0.05)][-1]['val_acc'] is 93.1, a percentage"]),
        ({"histories": {**HISTORIES, (32, 0.05): run_of(-0.5)}}, ["(32, 0.05)][-1]['val_acc'] is -0.5: it should be"]),
        ({"histories": {**HISTORIES, (32, 0.05): run_of(math.nan)}}, ["(32, 0.05)][-1]['val_acc'] is nan"]),
        (
            {"histories": {**HISTORIES, (32, 0.05): 0.9}},
            ["histories[(32, 0.05)] is 0.9", "the history train_on_device"],
        ),
        ({"histories": {**HISTORIES, (32, 0.05): {"val_acc": 0.9}}}, ["histories[(32, 0.05)] is one epoch's result"]),
        ({"histories": {**HISTORIES, (32, 0.05): run_of(0.9, epochs=5)}}, ["has 5 epochs; each run trains"]),
        ({"histories": {(s, lr): run_of(0.9 - s / 10_000) for s, lr in GRID}}, ["both learning rates scored the same"]),
        ({"histories": {(s, lr): run_of(0.8 + lr / 10) for s, lr in GRID}}, ["three batch sizes scored"]),
    ],
    ids=["missing-pair", "percent", "negative", "nan", "a-number", "a-result", "epochs", "same-rate", "same-size"],
)
def test_05_batch_and_lr_wrong_answers(answers, facts, capsys):
    not_yet("05_training", 1, {"histories": HISTORIES, "exercise_epochs": 2} | answers, capsys, *facts)


@pytest.mark.parametrize(
    "results, facts",
    [
        ({16: 0.91, 32: 0.92, 64: 0.098, 128: 0.93}, ["hidden_results[64] is 0.0980, about what guessing scores"]),
        ({16: 0.91, 64: 0.92, 128: 0.93}, ["hidden_results has no entry for 32"]),
        ({16: 0.9153, 32: 0.9153, 64: 0.9153, 128: 0.9153}, ["every hidden size scored 0.9153", "not hidden_size"]),
        ({16: 0.91, 32: 0.05, 64: 0.93, 128: 0.935}, ["hidden_results[32] is 0.0500"]),
    ],
    ids=["untrained", "missing-size", "one-model", "untrained-lessons"],
)
def test_05_hidden_sizes_wrong_answers(results, facts, capsys):
    not_yet("05_training", 2, {"hidden_results": results}, capsys, *facts)


def test_05_deeper_trained_for_real(capsys):
    train, val = learnable_loaders()
    torch.manual_seed(0)
    deeper = Flat(784, 64, 32, 10)
    classifier = getattr(helpers, "Classifier", lambda net: net)(deeper)  # the refactored fit needs the steps
    history = helpers.fit(3, 0.5, classifier, train, val, progress=False, verbose=False)
    correct("05_training", 3, {"make_deeper": lambda: deeper, "deeper_history": history}, capsys, "in 3 epochs")


@pytest.mark.parametrize(
    "answers, facts",
    [
        ({"deeper_history": [{"val_acc": 0.11}]}, ["deeper_history[-1]['val_acc'] is 0.1100, about what guessing"]),
        ({"make_deeper": lambda: Flat(784, 32, 10)}, ["make_deeper()'s linear layers go 784 → 32 → 10"]),
        ({"deeper_history": []}, ["deeper_history is []", "a list with a dict per epoch"]),
        ({"make_deeper": lambda: ____}, [UNANSWERED]),
        ({"make_deeper": lambda: NoReturn()}, ["make_deeper()(images) returns None"]),
        ({"make_deeper": lambda: nn.Sequential(nn.Linear(784, 64))(1)}, ["make_deeper() raised TypeError"]),
        ({"make_deeper": Flat(784, 64, 32, 10)}, ["make_deeper() raised TypeError"]),
        ({"make_deeper": lambda: OneRelu}, ["make_deeper() is the class OneRelu itself"]),
        ({"make_deeper": lambda: None}, ["make_deeper() is None", "must end with return"]),
    ],
    ids=[
        *("untrained", "the-lessons-model", "no-history", "blank", "no-return", "raises", "a-model", "the-class"),
        "returns-nothing",
    ],
)
def test_05_deeper_trained_wrong_answers(answers, facts, capsys):
    namespace = {"make_deeper": lambda: Flat(784, 64, 32, 10), "deeper_history": [{"val_acc": 0.9}]}
    not_yet("05_training", 3, namespace | answers, capsys, *facts)


# ------------------------------------------------------------------------------------------------ 06-08


def test_06_the_worked_solution_passes(capsys):
    """The solution's code with helpers standing in: the lesson's two phases, then the test set."""
    calls = []
    stand_in = types.SimpleNamespace(
        load_fashion_mnist=lambda root, train=True: f"fashion {'train' if train else 'test'}",
        split_dataset=lambda data, seed: ("part train", "part val"),
        DeviceResidentLoader=types.SimpleNamespace(from_dataset=lambda part, *a, **k: part),
        seed_everything=lambda seed: None,
        to_device=lambda model, device: model,
        MnistModel=lambda *sizes: "model",
        fit=lambda n, lr, model, train, val, **k: calls.append((n, lr, train, val)) or [{"val_acc": 0.8}] * n,
        evaluate=lambda model, loader: {"val_loss": 0.4, "val_acc": 0.8412 if loader == "fashion test" else 0.9},
    )
    namespace = {"helpers": stand_in, "math": math, "DATA": "", "DEVICE": "cpu", "seed": 1, "hidden_size": 32}
    namespace["exercise_epochs"] = 3
    solved("06_plots", 1, namespace)
    assert capsys.readouterr().out == "exercise_epochs = 3: the epochs to train in all\n"
    assert calls == [(2, 0.5, "part train", "part val"), (1, 0.1, "part train", "part val")]
    correct("06_plots", 1, namespace, capsys, "0.8412 on Fashion-MNIST's test set")


@pytest.mark.parametrize(
    "acc, facts",
    [
        (0.9699, ["0.9699, what the model scores on MNIST's digits"]),
        (0.1, ["fashion_test_acc is 0.1000, about what guessing scores (0.1)"]),
        (84.12, ["84.12, a percentage"]),
        ({"val_loss": 0.4}, ["fashion_test_acc is {'val_loss': 0.4}, a dict; it should be one number"]),
        (torch.tensor([0.8, 0.9]), ["a Tensor; it should be one number"]),
        (torch.tensor(0.85, device="meta"), ["fashion_test_acc is on the meta device"]),
    ],
    ids=["mnist", "untrained", "percent", "a-dict", "a-vector", "on-meta"],
)
def test_06_fashion_accuracy_wrong_answers(acc, facts, capsys):
    not_yet("06_plots", 1, RIGHT[("06_plots", 1)]() | {"fashion_test_acc": acc}, capsys, *facts)


@pytest.mark.parametrize(
    "phases, facts",
    [
        ([(3, 0.5)], ["phases has the learning rates [0.5]; the lesson's schedule has two phases"]),
        ([(2, 0.1), (1, 0.5)], ["phases has the learning rates [0.1, 0.5]"]),
        ([(3, 0.5), (3, 0.1)], ["phases trains 6 epochs in all; the exercise asks for exercise_epochs (3)"]),
        ((2, 0.5), ["phases is (2, 0.5); it should be the schedule as a list of (epochs, learning rate) pairs"]),
        ([(1.5, 0.5), (1.5, 0.1)], ["an epoch count in phases is 1.5; it should be a whole number"]),
    ],
    ids=["one-phase", "swapped", "too-many-epochs", "one-pair", "half-epochs"],
)
def test_06_phases_wrong_answers(phases, facts, capsys):
    not_yet("06_plots", 1, RIGHT[("06_plots", 1)]() | {"phases": phases}, capsys, *facts)


def test_06_the_validation_accuracy_is_not_the_test_accuracy(capsys):
    """A fresh learner evaluated on val_fast and was told "Correct ... on Fashion-MNIST's test set"."""
    scores = {"test": {"val_acc": 0.8412}, "val": {"val_acc": 0.8654}}
    stand_in = types.SimpleNamespace(evaluate=lambda model, loader: scores[loader])
    namespace = {"helpers": stand_in, "fashion_model": "model", "test_fast": "test", "val_fast": "val"}
    namespace |= {"phases": [(5, 0.5), (5, 0.1)]}
    not_yet("06_plots", 1, namespace | {"fashion_test_acc": 0.8654}, capsys, "0.8654, the accuracy on the validation")
    correct("06_plots", 1, namespace | {"fashion_test_acc": 0.8412}, capsys, "0.8412 on Fashion-MNIST's test set")


def test_06_an_accuracy_kept_as_evaluate_gives_it(capsys):
    answer = {"fashion_test_acc": {"val_loss": 0.4, "val_acc": torch.tensor(0.84)}}
    correct("06_plots", 1, RIGHT[("06_plots", 1)]() | answer, capsys, "0.8400")


def test_07_the_worked_solution_passes(capsys):
    namespace = solved("07_error_analysis", 1, {"predictions": fake_predictions()})
    assert namespace["answered"] == {0.5: (9, 6), 0.9: (5, 3), 0.99: (2, 1)}
    assert capsys.readouterr().out.splitlines()[0] == "confidence >= 0.5: 90.0% of the images, 66.67% right"
    correct("07_error_analysis", 1, namespace, capsys, "at 0.99 the model answers 20.0%", "50.00% of them right")
    as_tensors = {t: (torch.tensor(n), torch.tensor(r)) for t, (n, r) in namespace["answered"].items()}
    correct("07_error_analysis", 1, namespace | {"answered": as_tensors}, capsys, "20.0%")


@pytest.mark.parametrize(
    "answered, facts",
    [
        ({0.5: (9, 7), 0.9: (5, 7), 0.99: (2, 7)}, ["at 0.5, 7 counts the right answers among all the test images"]),
        ({0.5: (1, 0), 0.9: (5, 3), 0.99: (2, 1)}, ["at 0.5, 1 counts the images below the threshold"]),
        ({0.5: (0.9, 6 / 9), 0.9: (0.5, 0.6), 0.99: (0.2, 0.5)}, ["answered[0.5] holds (0.9, 0.6666", "a share"]),
        ({0.5: (6, 9), 0.9: (3, 5), 0.99: (1, 2)}, ["at 0.5, the two numbers are swapped", "answered (9)"]),
        ({0.5: (9, 6), 0.9: (5, 3), 0.99: (3, 2)}, ["at 0.99, the model answers 2 images, not 3"]),
        ({0.5: (9, 3), 0.9: (5, 3), 0.99: (2, 1)}, ["at 0.5, 3 counts the wrong answers among the sure ones"]),
        ({0.5: (9, 5), 0.9: (5, 3), 0.99: (2, 1)}, ["at 0.5, 5 is not how many of the 9 sure answers are right"]),
        ({0.5: (9, math.nan), 0.9: (5, 3), 0.99: (2, 1)}, ["answered[0.5] is nan"]),
        ({0.5: 9, 0.9: (5, 3), 0.99: (2, 1)}, ["answered[0.5] is 9; it should be a pair of counts"]),
    ],
    ids=[
        *("right-among-all", "below-the-threshold", "shares", "swapped", "wrong-count", "the-wrong-ones"),
        *("wrong-right-count", "nan", "not-a-pair"),
    ],
)
def test_07_sure_answers_wrong_answers(answered, facts, capsys):
    not_yet("07_error_analysis", 1, {"predictions": fake_predictions(), "answered": answered}, capsys, *facts)


def test_07_without_the_predictions(capsys):
    """07's check after a kernel restart, before the cell that makes `predictions`, names that cell."""
    answered = {0.5: (9, 6), 0.9: (5, 3), 0.99: (2, 1)}
    not_yet("07_error_analysis", 1, {"answered": answered}, capsys, "(`predictions` is not defined)")


def test_08_solution_and_another_right_answer(demo, capsys):
    namespace = solved("08_checkpoints", 1, dict(demo))
    assert capsys.readouterr().out.startswith("keys: format, model, optimizer")
    correct("08_checkpoints", 1, namespace, capsys, "2 completed epochs, and the restored model scores ")
    history = torch.load(demo["demo"] / "run.ckpt", weights_only=True)["history"]
    answers = {"completed": len(history), "restored_score": torch.tensor(history[-1]["val_acc"])}
    correct("08_checkpoints", 1, {**demo, **answers}, capsys)


def test_08_before_the_demo_ran(demo, tmp_path, capsys):
    """Checked before the demo's cells ran (no `demo`), or with `demo` set but no run.ckpt yet: each said."""
    answers = {"completed": 2, "restored_score": 0.9}
    not_yet("08_checkpoints", 1, answers, capsys, "run the cells above first (`demo` is not defined)")
    not_yet("08_checkpoints", 1, {**demo, **answers, "demo": tmp_path}, capsys, "run.ckpt is not there yet")


def test_08_inside_a_checkpoint_wrong_answers(demo, capsys):
    state = torch.load(demo["demo"] / "run.ckpt", weights_only=True)
    last = state["history"][-1]["val_acc"]
    keys = {**demo, "completed": len(state), "restored_score": last}
    not_yet("08_checkpoints", 1, keys, capsys, f"{len(state)} is the number of keys in the checkpoint")
    not_yet("08_checkpoints", 1, {**keys, "completed": 3}, capsys, "completed is 3, but the checkpoint holds 2")
    fresh = helpers.evaluate(helpers.MnistModel(), demo["val_fast"])["val_acc"]
    untrained = {**demo, "completed": 2, "restored_score": fresh}
    not_yet("08_checkpoints", 1, untrained, capsys, f"restored_score is {fresh:.4f}, what an untrained model scores")
    other = {**demo, "completed": 2, "restored_score": last - 0.05}
    not_yet("08_checkpoints", 1, other, capsys, f"where the history's last epoch says {last:.4f}")


# ------------------------------------------------------------------------------------------------ 09-11


def test_an_open_ended_exercise_says_it_is_a_question_for_thought(capsys):
    """An exercise with no single right answer (none in the series now): its check says so, and points to ours."""
    thought = helpers_exercises.Exercise(None, "a nudge", "our idea", "09_cpu_vs_gpu", 1)
    thought.check()
    line = capsys.readouterr().out.strip()
    assert not thought.passed and line.startswith("A question for thought: ") and "run q1.solution()" in line


SECONDS = {(32, "cpu"): 0.25, (32, "cuda"): 0.2, (1024, "cpu"): 6.0, (1024, "cuda"): 0.3}
HISTORIES_09 = {key: [{"train_s": s + 1}, {"train_s": s}, {"train_s": s + 0.5}] for key, s in SECONDS.items()}


def test_09_the_worked_solution_passes(capsys):
    """The solution's code with helpers standing in: each model on each device, its fastest epoch kept."""
    trained = []
    stand_in = types.SimpleNamespace(
        split_dataset=lambda data, seed: ("train", "val"),
        load_mnist=lambda root: "mnist",
        DeviceResidentLoader=types.SimpleNamespace(from_dataset=lambda part, *a, device, **k: (part, device)),
        seed_everything=lambda seed: None,
        MnistModel=lambda i, hidden, o: hidden,
        to_device=lambda model, device: (model, device),
        fit=lambda n, lr, model, train, val, **k: (
            trained.append(model) or [{"train_s": SECONDS[model] + e} for e in (1, 0)]
        ),
    )
    namespace = {"helpers": stand_in, "DATA": "", "seed": 42, "exercise_epochs": 2, "devices": ["cpu", "cuda"]}
    solved("09_cpu_vs_gpu", 1, namespace)
    assert trained == list(SECONDS) and namespace["seconds"] == SECONDS
    assert capsys.readouterr().out.splitlines()[-1] == "hidden 1024 on cuda  : 0.30 s per epoch of training"
    correct("09_cpu_vs_gpu", 1, namespace, capsys, "cuda's: 1.2 for the 32-unit model, 20.0 for the 1,024-unit one")
    (q1,) = helpers_exercises.exercises("09_cpu_vs_gpu", {})
    q1.solution()
    shown = capsys.readouterr().out
    assert shown.startswith("Solution: expect the 32-unit model to gain little on a GPU")
    assert shown.rstrip().endswith(helpers_exercises.solutions("09_cpu_vs_gpu")[0])


def test_09_on_a_cpu_alone(capsys):
    cpu = {key: s for key, s in SECONDS.items() if key[1] == "cpu"}
    namespace = {"devices": ["cpu"], "histories": HISTORIES_09, "seconds": cpu}
    correct("09_cpu_vs_gpu", 1, namespace, capsys, "takes 24.0 times as long per epoch")


@pytest.mark.parametrize(
    "answers, facts",
    [
        (
            {(32, "cpu"): [{"train_s": 0.2}] * 3},
            ["seconds[(32, 'cpu')] is a whole history, 3 epochs", "min(h['train_s']"],
        ),
        ({(32, "cpu"): {"train_s": 0.2}}, ["seconds[(32, 'cpu')] is one epoch's result", "['train_s']"]),
        ({(32, "cpu"): -1.0}, ["seconds[(32, 'cpu')] is -1.0; a time is more than 0 seconds"]),
        (
            {(1024, "cpu"): 0.25, (1024, "cuda"): 0.2},
            ["seconds[(1024, 'cpu')] is 0.25, which is no epoch's seconds of training in histories[(1024, 'cpu')]"],
        ),
        (
            {(32, "cpu"): 0.75},
            ["seconds[(32, 'cpu')] is the last epoch's 0.750 s; the fastest took 0.250 s", "min(h['train_s']"],
        ),
        ({(32, "cpu"): 1.25}, ["seconds[(32, 'cpu')] is 1.25, which is no epoch's seconds", "keep its fastest"]),
    ],
    ids=["a-history", "a-result", "negative", "one-model", "the-last-epoch", "the-first-epoch"],
)
def test_09_cpu_against_gpu_wrong_answers(answers, facts, capsys):
    """The last epoch's time, not the fastest, is not marked Correct."""
    seconds = {**SECONDS, **answers}
    context = {"devices": ["cpu", "cuda"], "histories": HISTORIES_09}
    not_yet("09_cpu_vs_gpu", 1, context | {"seconds": seconds}, capsys, *facts)
    missing = {key: s for key, s in SECONDS.items() if key != (1024, "cuda")}
    not_yet("09_cpu_vs_gpu", 1, context | {"seconds": missing}, capsys, "no entry for (1024, 'cuda')")


def test_10_another_right_answer(capsys):
    """The difference left as a one-number tensor."""
    answers = {"without": NO_SET_EPOCH, "no_set_epoch_difference": torch.tensor(0.25)}
    correct("10_many_gpus", 1, answers, capsys, "2.5e-01 from one process's")


def test_10_the_worked_solution_passes(tmp_path, monkeypatch, capsys):
    """The solution's code, in a work folder whose name has a space, with a stand-in for torchrun that saves weights
    apart from one process's when the script it runs has no set_epoch."""
    import shlex
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    Path("train_ddp.py").write_text(TRAIN_DDP)
    torch.save({"w": torch.ones(3)}, "short_one.pt")
    runs = []

    def run(args, capture_output, text):
        script, save = next(a for a in args if a.endswith(".py")), args[args.index("--save") + 1]
        runs.append(script)
        torch.save({"w": torch.ones(3) + 0.1 * ("set_epoch" not in Path(script).read_text())}, save)
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    namespace = {"Path": Path, "torch": torch, "subprocess": types.SimpleNamespace(run=run), "shlex": shlex}
    namespace |= {"torchrun": "python -m torch.distributed.run", "NPROCS": 2, "args": "--seed 42", "short": ""}
    namespace["max_difference"] = lambda a, b: max((a[k] - b[k]).abs().max().item() for k in a)
    solved("10_many_gpus", 1, namespace)
    assert runs == ["no_set_epoch.py"] and "set_epoch" not in Path("no_set_epoch.py").read_text()
    assert namespace["without"] == Path("no_set_epoch.py").read_text()
    correct("10_many_gpus", 1, namespace, capsys, "1.0e-01 from one process's")


@pytest.mark.parametrize(
    "answers, facts",
    [
        ({"without": TRAIN_DDP}, ["without still calls set_epoch"]),
        ({"without": "print('hello')"}, ["without has lost more than the set_epoch line"]),
        ({"without": None}, ["without is None; it should be the new script's text"]),
        ({"no_set_epoch_difference": 6e-8}, ["no_set_epoch_difference is 6.0e-08, rounding only"]),
        ({"no_set_epoch_difference": math.nan}, ["no_set_epoch_difference is nan"]),
        ({"no_set_epoch_difference": -1e-2}, ["never negative"]),
        ({"no_set_epoch_difference": {"w": 1e-2}}, ["no_set_epoch_difference is {'w': 0.01}, a dict"]),
    ],
    ids=["set-epoch-kept", "other-lines-lost", "none", "rounding", "nan", "negative", "not-a-number"],
)
def test_10_set_epoch_wrong_answers(answers, facts, capsys):
    """NaN, among them (`difference <= 1e-5` is False for NaN, so it must not pass)."""
    namespace = {"without": NO_SET_EPOCH, "no_set_epoch_difference": 3e-2} | answers
    not_yet("10_many_gpus", 1, namespace, capsys, *facts)


def test_11_another_right_answer(capsys):
    """float16, as on a T4: its scaler enabled."""
    namespace = {"results": {"float16": 0.97, "float32": 0.9691}, "exercise_dtype": torch.float16}
    namespace["scaler"] = torch.amp.GradScaler("cpu")
    correct("11_gpu_speed", 1, namespace, capsys, "float32 0.9691, float16 0.9700: 0.09 points apart")


def test_11_the_worked_solution_passes(capsys):
    """The solution's code with helpers standing in: the lesson's schedule twice from one seed, each with its scaler."""
    epochs, seeds = [], []
    stand_in = types.SimpleNamespace(
        split_dataset=lambda data, seed: ("train", "val"),
        load_mnist=lambda root: "mnist",
        DeviceResidentLoader=types.SimpleNamespace(from_dataset=lambda part, *a, **k: part),
        seed_everything=seeds.append,
        to_device=lambda model, device: model,
        MnistModel=lambda: torch.nn.Linear(2, 2),
    )

    def train_epoch(model, optimizer, scaler, loader, dtype):
        epochs.append((optimizer.param_groups[0]["lr"], scaler.is_enabled(), loader, dtype))

    accuracy = lambda model, loader: 0.9691 if len(epochs) == 4 else 0.9703
    namespace = {"helpers": stand_in, "torch": torch, "DATA": "", "seed": 42, "DEVICE": torch.device("cpu")}
    namespace |= {"amp_dtype": torch.bfloat16, "exercise_epochs": 2, "train_epoch": train_epoch, "accuracy": accuracy}
    namespace["test"] = "test"
    solved("11_gpu_speed", 1, namespace)
    assert capsys.readouterr().out == " float32: test accuracy 0.9691\nbfloat16: test accuracy 0.9703\n"
    phases = [(0.5, False, "train")] * 2 + [(0.1, False, "train")] * 2
    assert epochs == [p + (None,) for p in phases] + [p + (torch.bfloat16,) for p in phases]
    assert seeds == [42, 42], "each precision from the same seed"
    correct("11_gpu_speed", 1, namespace, capsys, "float32 0.9691, bfloat16 0.9703: 0.12 points apart")
    namespace |= {"amp_dtype": torch.float16}
    epochs.clear()
    solved("11_gpu_speed", 1, namespace)
    assert [enabled for _, enabled, _, dtype in epochs if dtype == torch.float16] == [True] * 4, "float16: scaled"


@pytest.mark.parametrize(
    "scaler, dtype, facts",
    [
        (torch.amp.GradScaler("cpu"), torch.bfloat16, ["the bfloat16 run's scaler is enabled", "enabled=dtype =="]),
        (torch.amp.GradScaler("cpu", enabled=False), torch.float16, ["the float16 run's scaler is disabled"]),
        (1.0, torch.bfloat16, ["scaler is a float; make it with torch.amp.GradScaler("]),
    ],
    ids=["bf16-scaled", "fp16-unscaled", "not-a-scaler"],
)
def test_11_the_scaler_is_decided_for_the_dtype(scaler, dtype, facts, capsys):
    results = {"float32": 0.97, str(dtype).removeprefix("torch."): 0.97}
    not_yet("11_gpu_speed", 1, {"results": results, "scaler": scaler, "exercise_dtype": dtype}, capsys, *facts)


@pytest.mark.parametrize(
    "results, facts",
    [
        ({"bfloat16": 0.97}, ["results has no entry for 'float32'"]),
        ({"float32": 0.97}, ["results has no entry for 'bfloat16'"]),
        ({"float32": {"val_acc": 0.97}, "bfloat16": 0.97}, ["results['float32'] is a whole evaluation", "accuracy("]),
        ({"float32": 96.91, "bfloat16": 97.03}, ["results['float32'] is 96.91, a percentage"]),
        ({"float32": 0.97, "bfloat16": math.nan}, ["results['bfloat16'] is nan"]),
        ({"float32": 0.97, "bfloat16": 0.09}, ["results['bfloat16'] is 0.0900, about what guessing scores"]),
        ((0.97, 0.97), ["results is a tuple; it should be a dict"]),
        ({"float32": 0.97, "bfloat16": 0.25}, ["float32 0.9700 and bfloat16 0.2500 are 72.00 points apart"]),
    ],
    ids=["no-float32", "no-16-bit", "an-evaluation", "percent", "nan", "untrained", "a-tuple", "far-apart"],
)
def test_11_mixed_precision_wrong_answers(results, facts, capsys):
    namespace = {"results": results, "scaler": torch.amp.GradScaler("cpu", enabled=False)}
    not_yet("11_gpu_speed", 1, namespace | {"exercise_dtype": torch.bfloat16}, capsys, *facts)


# ------------------------------------------------------------------------------------------------ languages


def test_in_a_notebook_the_line_is_html_in_colour_and_carries_every_language(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    monkeypatch.setattr("IPython.display.display", lambda data, raw, metadata: shown.append((data, metadata)))
    helpers_exercises.exercises("03_model", {"deeper": Flat(784, 64, 10)})[1].check()
    ((data, metadata),) = shown
    assert data["text/plain"].startswith("Not yet: deeper's linear layers go 784 → 64 → 10")
    assert data["text/html"].startswith('<p><b style="color:#c62828">Not yet</b>: deeper')
    assert metadata["helpers_exercises"]["en"] == data
    assert metadata["helpers_exercises"]["zh"]["text/plain"].startswith("还不对：deeper 的线性层是 784 → 64 → 10")


def test_the_chinese_edition_checks_hints_and_solves_in_chinese(capsys):
    assert checked("03_model", 2, {}, capsys, lang="zh")[1] == "还不对：先运行上面的单元格（`deeper` 还没有定义）"
    assert (
        checked("03_model", 2, {"deeper": ____}, capsys, lang="zh")[1]
        == "轮到你：把上面的 ____ 换成你的答案，再运行本单元格"
    )
    passed, line = checked("07_error_analysis", 1, RIGHT[("07_error_analysis", 1)](), capsys, lang="zh")
    assert passed and line.startswith("正确：阈值 0.99 时，模型对 20.0% 的图像作答")
    (q1,) = helpers_exercises.exercises("08_checkpoints", {}, lang="zh")
    q1.hint()
    assert capsys.readouterr().out.startswith("提示：检查点是一个字典")
    q1.solution()
    assert capsys.readouterr().out.startswith("答案：检查点保存了继续训练所需的一切")


def _templates() -> list[str]:
    """Every English text the modules can say: the templates of their messages, hints, solutions' ideas and labels."""
    texts = []
    nodes = [node for module in SPEAKING for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))]
    for node in nodes:
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            first = node.args[:1] if name in ("NotYet", "Said", "pair") else []
            texts += [t for a in first for t in ((a.body, a.orelse) if isinstance(a, ast.IfExp) else (a,))]
            texts += [node.args[1]] if name == "wrong" and len(node.args) > 1 else []  # wrong(mistake, template)
            texts += [kw.value for kw in node.keywords if kw.arg in ("nudge", "idea")]
            texts += [kw.value for kw in node.keywords if kw.arg == "otherwise"]
            texts += [row.elts[1] for kw in node.keywords if kw.arg == "mistakes" for row in kw.value.elts]
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            texts += [value] if target in ("UNANSWERED", "UNDEFINED", "OPEN_ENDED") else []
            texts += [v.elts[0] for v in value.values] if target == "LABELS" else []
            texts += [row.elts[2] for row in value.elts] if target == "DICT_ERRORS" else []
    assert not [t for t in texts if isinstance(t, ast.JoinedStr)], "a template, not an f-string: the catalogue's key"
    return list(dict.fromkeys(t.value.strip() for t in texts if isinstance(t, ast.Constant)))  # as a row: stripped


def _fields(template: str) -> list[str]:
    """The fields of a template, each with its conversion and format: `{found!r}`, `{n:,}`."""
    parsed = string.Formatter().parse(template)
    return sorted(f"{name}!{conversion}:{spec}" for _, name, spec, conversion in parsed if name)


def _lesson_module_says(monkeypatch) -> list[str]:
    """What the lesson's module says in English (it knows no catalogue) that a Chinese set-up translates by `heard`:
    its run line on a CPU and on a GPU, and its refusals of a device."""
    said = [helpers.describe_run("cpu")]
    for device in ("tpu", "cuda:7"):
        with pytest.raises(ValueError) as refused:
            helpers.as_device(device, " (the setting device)")
        said.append(str(refused.value))
    monkeypatch.setattr(helpers, "_accelerator", lambda: torch.device("cuda"))
    monkeypatch.setattr(helpers, "accelerator_count", lambda: 1)
    props = types.SimpleNamespace(name="Tesla T4", total_memory=15 * 2**30, major=7, minor=5)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return said + [helpers.describe_run("cuda")]


def test_the_chinese_catalogue_translates_every_text_with_the_same_fields(monkeypatch):
    """notebooks/zh/messages.md has one row per English text the modules say, keeping each field as it is; the lesson's
    module's English lines come out in Chinese, every part of them."""
    texts, rows = _templates(), helpers_exercises.catalogue("zh")
    assert len(texts) > 120 and "Not yet" in texts and UNANSWERED.removeprefix("Your turn: ") in texts
    assert [t for t in texts if t not in rows] == [], "add a row to notebooks/zh/messages.md for each"
    lines = _lesson_module_says(monkeypatch)
    heard = [helpers_exercises.heard(line, "zh") for line in lines]
    assert [line for line, zh in zip(lines, heard) if re.search(r"\b(the|is|this|on|with)\b", zh)] == [], "Chinese"
    made = [t for t in rows if t not in texts and any(helpers_exercises._pattern(t).search(line) for line in lines)]
    assert [t for t in rows if t not in texts and t not in made] == [], "no row for a text no module says any more"
    texts += made
    for english in texts:
        assert _fields(rows[english]) == _fields(english), (english, rows[english])
    assert rows["Not yet"] == "还不对" and rows["Correct"] == "正确"


def test_the_chinese_catalogue_follows_the_editions_typography():
    """Each line prints after a label with its own colon (还不对：, 提示：): one "：" to a line, so none inside; no
    half-width colon or comma after a Chinese character."""
    for english, chinese in helpers_exercises.catalogue("zh").items():
        assert "：" not in chinese and re.search(r"[\u4e00-\u9fff]", chinese), (english, chinese)
        assert not re.search(r"[\u4e00-\u9fff][:,] ", chinese), chinese


def test_a_language_from_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("SERIES_LANG", "fr")
    with pytest.raises(ValueError, match=r"the environment variable SERIES_LANG is 'fr': choose one of en, zh, or"):
        helpers_exercises.exercises("03_model", {})
    with pytest.raises(ValueError, match=r"^lang='fr': choose one of en, zh$"):
        helpers_exercises.exercises("03_model", {}, lang="fr")


# ------------------------------------------------------------------------------------------------ any value


def test_a_message_shows_any_value_and_never_raises():
    said = helpers_exercises.Said("{name} is {found!r}, {found:.4f}, {found[0]:,}", name="x", found=object())
    assert said().startswith("x is a object")
    assert helpers_exercises.Said("{n:,}", n=2**53)() == "9,007,199,254,740,992"


def test_a_solution_shows_its_editions_code_comments(capsys):
    """q1.solution() in the Chinese edition shows the code of the Chinese notebook, whose comments comments.md
    translated as the exercise cell's; the English shows the English."""
    english, chinese = (helpers_exercises.solutions("07_error_analysis", lang)[0] for lang in ("en", "zh"))
    assert "# each image's largest probability" in english and "# each image's" not in chinese
    assert english.replace("# each image's largest probability", "") == re.sub(
        r"# [^\n]*[\u4e00-\u9fff][^\n]*", "", chinese
    )
    (q1,) = helpers_exercises.exercises("07_error_analysis", {}, lang="zh")
    q1.solution()
    assert capsys.readouterr().out.rstrip().endswith(chinese)


@pytest.mark.parametrize("reused", [torch.zeros(5, 3), {"preds": 1}, [1, 2]])
def test_07_a_scratch_cell_that_reuses_predictions_is_named_with_the_cell_to_run_again(reused, capsys):
    """The check names the mistake, not "the check raised IndexError: too many indices"."""
    answered = {0.5: (1, 1), 0.9: (1, 1), 0.99: (1, 1)}
    says = ("predictions is no longer what helpers.predict_loader returned", "predictions = helpers.predict_loader")
    not_yet("07_error_analysis", 1, {"predictions": reused, "answered": answered}, capsys, *says)


def test_a_listed_field_is_joined_as_each_language_writes_a_list():
    said = helpers_exercises.Said("{listed}. Bigger batches: fewer, larger steps per epoch",
                                  listed=helpers_exercises.Joined(["32 → (1563, 32)", "128 → (391, 32)"]))  # fmt: skip
    assert said().startswith("32 → (1563, 32), 128 → (391, 32). Bigger")
    assert said("zh").startswith("32 → (1563, 32)，128 → (391, 32)。")
