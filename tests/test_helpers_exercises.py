"""helpers_exercises: every check passes a correct answer other than the solution, and tells each typical wrong
answer exactly what to look at, in English and in Chinese."""

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import helpers
import helpers_exercises
from helpers_exercises import ____


def checked(notebook, number, namespace, capsys, lang="en"):
    """(passed, the printed line) of exercise `number` of `notebook` against `namespace`."""
    exercise = helpers_exercises.exercises(notebook, namespace, lang=lang)[number - 1]
    assert exercise.check() is None, "a check returns nothing, so a notebook cell that ends with it shows no Out[]"
    return exercise.passed, capsys.readouterr().out.strip()


def solved(notebook, number, namespace):
    """`namespace` after running the exercise's worked solution in it."""
    exec(helpers_exercises.REGISTRY[notebook][number - 1].code, namespace)
    return namespace


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


class OneRelu(nn.Module):
    """Two hidden layers, a ReLU after the first only."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(784, 64), nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, xb):
        return self.c(self.b(F.relu(self.a(xb.flatten(1)))))


class ReluOnScores(OneRelu):
    """A ReLU after every layer, the scores' too."""

    def forward(self, xb):
        return F.relu(self.c(F.relu(self.b(F.relu(self.a(xb.flatten(1)))))))


class NoFlatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(784, 64), nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, xb):
        return self.c(F.relu(self.b(F.relu(self.a(xb)))))


UNANSWERED = "Not yet: write your answer in place of ____ in the cell above, run it, then check again"


def test_every_notebook_with_exercises_has_them_numbered_with_hints_and_solutions_in_both_languages():
    assert set(helpers_exercises.REGISTRY) >= {"02_data_loading", "03_model", "05_training", "10_many_gpus"}
    for exercises in helpers_exercises.REGISTRY.values():
        for exercise in exercises:
            assert set(exercise.hints) == set(exercise.solutions) == set(helpers_exercises.LANGUAGES)


def test_the_chinese_hints_and_solutions_follow_the_editions_typography():
    """Each line prints after a label with its own colon (提示：, 答案：): one "：" to a sentence, so none inside;
    and no half-width colon or comma between Chinese words."""
    for exercises in helpers_exercises.REGISTRY.values():
        for exercise in exercises:
            for text in (exercise.hints["zh"], exercise.solutions["zh"]):
                assert "：" not in text, text
                assert not re.search(r"[\u4e00-\u9fff][:,] ", text), text


def test_a_language_or_notebook_that_does_not_exist_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="lang='fr': choose one of en, zh"):
        helpers_exercises.exercises("03_model", {}, lang="fr")
    with pytest.raises(ValueError, match="no exercises for '99_x': choose one of 02_data_loading"):
        helpers_exercises.exercises("99_x", {})


# ------------------------------------------------------------------------------------------------ 02


TRAIN_SET = list(range(50_000))


def test_02_batch_counts(capsys):
    namespace = solved("02_data_loading", 1, {"DataLoader": DataLoader, "train_set": TRAIN_SET})
    assert checked("02_data_loading", 1, namespace, capsys) == (
        True,
        "Correct: 32: 1,563 batches, the last of 16; 128: 391 batches, the last of 80; 512: 98 batches, the last "
        "of 336. Bigger batches: fewer, larger steps per epoch",
    )
    by_hand = {32: [1563, 16], 128: (391, 80), 512: (98, 336)}
    assert checked("02_data_loading", 1, {"train_set": TRAIN_SET, "batches": by_hand}, capsys)[0]


@pytest.mark.parametrize(
    "batches, line",
    [
        (____, UNANSWERED),
        ({32: (____, ____), 128: (____, ____), 512: (____, ____)}, UNANSWERED),
        (
            {32: (1562, 32), 128: (390, 128), 512: (97, 512)},
            "Not yet: at batch size 32, 1,562 leaves out the last, smaller batch: an epoch uses every image, so round "
            "the division up (len(DataLoader(train_set, size)) counts it for you)",
        ),
        (
            {32: (1875, 32), 128: (469, 96), 512: (118, 96)},
            "Not yet: at batch size 32 you counted from 60,000 images; the training set is the 50,000 left after the "
            "validation split: len(train_set)",
        ),
        (
            {32: (1563, 32), 128: (391, 128), 512: (98, 512)},
            "Not yet: at batch size 32, the last batch does not hold 32 images: it holds what the 1,562 full batches "
            "leave of the 50,000",
        ),
        ({32: (1563, 16)}, "Not yet: batches has no entry for 128; it needs one for each of [32, 128, 512]"),
    ],
    ids=["unanswered", "placeholders-inside", "rounded-down", "from-60000", "last-full", "missing-size"],
)
def test_02_batch_counts_wrong_answers(batches, line, capsys):
    assert checked("02_data_loading", 1, {"train_set": TRAIN_SET, "batches": batches}, capsys) == (False, line)


class FakeFashion(TensorDataset):
    classes = ["T-shirt/top", "Trouser", "Pullover"]


class FakeDigits(TensorDataset):
    classes = ["0 - zero", "1 - one", "2 - two"]


IMAGES = (torch.zeros(64, 1, 28, 28), torch.zeros(64, dtype=torch.long))


def test_02_fashion_loader(capsys):
    loader = DataLoader(torch.utils.data.Subset(FakeFashion(*IMAGES), range(32)), 16, shuffle=True)
    assert checked("02_data_loading", 2, {"fashion_loader": loader}, capsys) == (
        True,
        "Correct: a shuffled DataLoader over Fashion-MNIST's 32 images, batches of 16",
    )


@pytest.mark.parametrize(
    "loader, line",
    [
        (
            DataLoader(FakeDigits(*IMAGES), 32, shuffle=True),
            "Not yet: fashion_loader's images are not Fashion-MNIST's (its classes are ['0 - zero', '1 - one', "
            "'2 - two']...); load them with helpers.load_fashion_mnist(DATA)",
        ),
        (
            DataLoader(FakeFashion(*IMAGES), 32),
            "Not yet: fashion_loader does not shuffle: pass shuffle=True, so that each batch mixes the ten kinds of "
            "clothing",
        ),
        (
            FakeFashion(*IMAGES),
            "Not yet: fashion_loader is a FakeFashion; make it a DataLoader over Fashion-MNIST, as the lesson makes "
            "train_loader",
        ),
    ],
    ids=["mnist", "not-shuffled", "a-dataset"],
)
def test_02_fashion_loader_wrong_answers(loader, line, capsys):
    assert checked("02_data_loading", 2, {"fashion_loader": loader}, capsys) == (False, line)


# ------------------------------------------------------------------------------------------------ 03


def test_03_parameter_counts(capsys):
    namespace = solved("03_model", 1, {"helpers": helpers})
    assert checked("03_model", 1, namespace, capsys) == (
        True,
        "Correct: 16: 12,730, 64: 50,890, 128: 101,770, 1024: 814,090; at every size about 99% of them are in the "
        "first layer, 784 × hidden weights",
    )
    by_formula = {h: 795 * h + 10 for h in (16, 64, 128, 1024)}
    assert checked("03_model", 1, {"parameters": by_formula}, capsys)[0]


@pytest.mark.parametrize(
    "parameters, line",
    [
        (
            {h: 794 * h for h in (16, 64, 128, 1024)},
            "Not yet: hidden 16: 12,704 counts the weights alone; each nn.Linear(a, b) also has b biases",
        ),
        (
            {h: 785 * h for h in (16, 64, 128, 1024)},
            "Not yet: hidden 16: 12,560 is the first layer alone; add the second, nn.Linear(16, 10)",
        ),
        (
            {16: 12_730, 64: 50_890, 128: 101_770},
            "Not yet: parameters has no entry for 1024; it needs one for each of [16, 64, 128, 1024]",
        ),
    ],
    ids=["no-biases", "first-layer-only", "missing-size"],
)
def test_03_parameter_counts_wrong_answers(parameters, line, capsys):
    assert checked("03_model", 1, {"parameters": parameters}, capsys) == (False, line)


def test_03_two_hidden_layers(capsys):
    namespace = solved("03_model", 2, {"nn": nn, "F": F})
    assert checked("03_model", 2, namespace, capsys) == (
        True,
        "Correct: 784 → 64 → 32 → 10 with a ReLU after each hidden layer, 52,650 parameters",
    )
    assert checked("03_model", 2, {"deeper": Flat(784, 64, 32, 10)}, capsys)[0]


@pytest.mark.parametrize(
    "deeper, line",
    [
        (____, UNANSWERED),
        (
            NoFlatten,
            "Not yet: deeper is the class NoFlatten itself; set it to a model made from the class: deeper = "
            "NoFlatten()",
        ),
        (
            Flat(784, 64, 10),
            "Not yet: your model's linear layers go 784 → 64 → 10 (1 hidden layer); the exercise asks for "
            "784 → 64 → 32 → 10: three nn.Linear layers, each one's output size the next one's input size",
        ),
        (
            Flat(784, 64, 32, 10, relu=False),
            "Not yet: your model is linear: without a ReLU between them, three linear layers add up to one; "
            "apply F.relu (or nn.ReLU) to the output of each hidden layer",
        ),
        (
            OneRelu(),
            "Not yet: linear layer 3 receives negative values: there is no ReLU after layer 2; apply F.relu (or "
            "nn.ReLU) to the output of every hidden layer",
        ),
        (
            ReluOnScores(),
            "Not yet: your model's scores are never negative: a ReLU after the last layer clips them; return the last "
            "layer's output as it is",
        ),
        (
            NoFlatten(),
            "Not yet: your model fails on a batch of images of shape [8, 1, 28, 28] (RuntimeError: mat1 and mat2 "
            "shapes cannot be multiplied (224x28 and 784x64)); flatten the images first, with xb.flatten(1) or "
            "xb.view(xb.size(0), -1)",
        ),
    ],
    ids=["unanswered", "the-class", "one-hidden-layer", "no-relu", "relu-after-one", "relu-on-scores", "not-flattened"],
)
def test_03_two_hidden_layers_wrong_answers(deeper, line, capsys):
    assert checked("03_model", 2, {"deeper": deeper}, capsys) == (False, line)


def test_the_chinese_edition_checks_in_chinese(capsys):
    passed, line = checked("03_model", 2, {"deeper": Flat(784, 64, 10)}, capsys, lang="zh")
    assert not passed and line.startswith("还没有：你的模型的线性层是 784 → 64 → 10（1 个隐藏层）")
    assert checked("03_model", 2, {}, capsys, lang="zh")[1] == (
        "还没有：把上面单元格中的 ____ 换成你的答案，运行它，再检查一次"
    )


# ------------------------------------------------------------------------------------------------ 04


VAL_SET = list(range(10_000))


def test_04_moved_once(capsys):
    namespace = {"DataLoader": DataLoader, "val_set": TensorDataset(torch.zeros(10_000, 1, 28, 28)), "DEVICE": "cpu"}
    code = helpers_exercises.REGISTRY["04_device_transfer"][0].code
    exec(code.replace("val_images, val_labels", "(val_images,)"), namespace)  # a set of images alone
    assert checked("04_device_transfer", 1, namespace, capsys) == (
        True,
        "Correct: 10,000 images in one tensor on cpu; each batch is now a slice, val_on_device[i : i + 256]",
    )


@pytest.mark.parametrize(
    "images, line",
    [
        (
            torch.zeros(10_000, 1, 28, 28),
            "Not yet: val_on_device is on cpu; the notebook's device is meta: move it there once, with .to(DEVICE)",
        ),
        (
            torch.zeros(256, 1, 28, 28, device="meta"),
            "Not yet: val_on_device holds 256 images; the validation set has 10,000: take them as one batch, "
            "next(iter(DataLoader(val_set, len(val_set))))",
        ),
        ([torch.zeros(1)], "Not yet: val_on_device is a list; make it one tensor holding every validation image"),
    ],
    ids=["left-on-the-cpu", "one-batch", "a-list"],
)
def test_04_moved_once_wrong_answers(images, line, capsys):
    namespace = {"val_on_device": images, "val_set": VAL_SET, "DEVICE": torch.device("meta")}
    assert checked("04_device_transfer", 1, namespace, capsys) == (False, line)


def test_04_dicts(capsys):
    namespace = solved("04_device_transfer", 2, {})
    assert checked("04_device_transfer", 2, namespace, capsys) == (
        True,
        "Correct: dicts, lists and dicts of lists all move, key by key",
    )
    assert checked("04_device_transfer", 2, {"to_device_with_dicts": any_container}, capsys)[0]


def any_container(data, device):
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, dict):
        return {key: any_container(value, device) for key, value in data.items()}
    return type(data)(any_container(x, device) for x in data)


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
    "function, line",
    [
        (
            lesson_to_device,
            "Not yet: your function does not know dicts yet: it calls .to on the dict itself; add a branch for dicts "
            "before the last line",
        ),
        (
            dict_as_values,
            "Not yet: for a dict your function returned a list: build a dict, {key: ... for key, value in "
            "data.items()}",
        ),
        (
            dict_as_given,
            "Not yet: the dict came back with its tensors where they were: move each value, by calling your function "
            "on it",
        ),
        (
            dict_without_lists,
            "Not yet: your function raised AttributeError ('list' object has no attribute 'to') on a list; try it "
            "on one",
        ),
        (
            dict_without_recursion,
            "Not yet: dicts and lists move, but a dict whose values are lists fails (AttributeError: 'list' object "
            "has no attribute 'to'): move each value by calling your function on it, not .to, so that it recurses",
        ),
        (the_outline, UNANSWERED),
        (dict_of_blanks, UNANSWERED),
    ],
    ids=[
        "the-lessons",
        "values-only",
        "dict-unmoved",
        "lists-broken",
        "no-recursion",
        "the-outline",
        "blanks-inside",
    ],
)
def test_04_dicts_wrong_answers(function, line, capsys):
    assert checked("04_device_transfer", 2, {"to_device_with_dicts": function}, capsys) == (False, line)


# ------------------------------------------------------------------------------------------------ 05


GRID = {(size, lr): 0.5 + size / 10_000 + lr / 10 for size in (32, 128, 512) for lr in (0.05, 0.5)}


def test_05_batch_and_lr(capsys):
    assert checked("05_training", 1, {"results": GRID, "best": (512, 0.5)}, capsys) == (
        True,
        "Correct: batch 512 at lr 0.5 did best (0.6012), batch 32 at lr 0.05 worst (0.5082): smaller batches take "
        "more steps per epoch, a larger rate bigger ones",
    )
    assert checked("05_training", 1, {"results": GRID, "best": [512, 0.5]}, capsys)[0]


@pytest.mark.parametrize(
    "answers, line",
    [
        (
            {"results": GRID, "best": (32, 0.5)},
            "Not yet: best is (32, 0.5), but your results say (512, 0.5) did best (0.6012): best = max(results, "
            "key=results.get)",
        ),
        (
            {"results": {k: v for k, v in GRID.items() if k != (512, 0.05)}, "best": (512, 0.5)},
            "Not yet: results has no entry for (512, 0.05); it needs one for each of [(32, 0.05), (32, 0.5), "
            "(128, 0.05), (128, 0.5), (512, 0.05), (512, 0.5)]",
        ),
        (
            {"results": {**GRID, (32, 0.05): 93.1}, "best": (512, 0.5)},
            "Not yet: results[(32, 0.05)] is 93.1: it should be an accuracy, a number between 0 and 1 "
            "(history[-1]['val_acc'])",
        ),
    ],
    ids=["best-not-the-best", "missing-pair", "percent"],
)
def test_05_batch_and_lr_wrong_answers(answers, line, capsys):
    assert checked("05_training", 1, answers, capsys) == (False, line)


def test_05_hidden_sizes(capsys):
    assert checked("05_training", 2, {"hidden_results": {16: 0.91, 64: 0.93, 128: 0.935}}, capsys) == (
        True,
        "Correct: 16: 0.9100, 64: 0.9300, 128: 0.9350; each doubling gains less than the one before",
    )


@pytest.mark.parametrize(
    "results, line",
    [
        (
            {16: 0.91, 64: 0.098, 128: 0.93},
            "Not yet: hidden_results[64] is 0.0980, about what guessing scores (0.1): did the model train (fit) "
            "before it was evaluated?",
        ),
        ({16: 0.91, 128: 0.93}, "Not yet: hidden_results has no entry for 64; it needs one for each of [16, 64, 128]"),
    ],
    ids=["untrained", "missing-size"],
)
def test_05_hidden_sizes_wrong_answers(results, line, capsys):
    assert checked("05_training", 2, {"hidden_results": results}, capsys) == (False, line)


def learnable_loaders():
    """Images whose label is the one bright row among the first ten: a task a model learns in a few epochs."""
    labels = torch.arange(512) % 10
    images = torch.rand(512, 1, 28, 28, generator=torch.Generator().manual_seed(0)) * 0.1
    images[torch.arange(512), 0, labels] = 1.0
    return (
        helpers.DeviceResidentLoader(images, labels, 64, shuffle=True, device="cpu", seed=0),
        helpers.DeviceResidentLoader(images, labels, 128, device="cpu"),
    )


def test_05_deeper_trained(capsys):
    train, val = learnable_loaders()
    torch.manual_seed(0)
    deeper = Flat(784, 64, 32, 10)
    history = helpers.fit(3, 0.5, deeper, train, val, progress=False, verbose=False)
    passed, line = checked("05_training", 3, {"deeper": deeper, "deeper_history": history}, capsys)
    assert passed and line.startswith("Correct: 784 → 64 → 32 → 10 trained to ") and line.endswith("in 3 epochs")


@pytest.mark.parametrize(
    "answers, line",
    [
        (
            {"deeper": Flat(784, 64, 32, 10), "deeper_history": [{"val_acc": 0.11}]},
            "Not yet: deeper_history[-1]['val_acc'] is 0.1100, about what guessing scores (0.1): did the model train "
            "(fit) before it was evaluated?",
        ),
        (
            {"deeper": Flat(784, 32, 10), "deeper_history": [{"val_acc": 0.9}]},
            "Not yet: your model's linear layers go 784 → 32 → 10 (1 hidden layer); the exercise asks for "
            "784 → 64 → 32 → 10: three nn.Linear layers, each one's output size the next one's input size",
        ),
        (
            {"deeper": Flat(784, 64, 32, 10), "deeper_history": []},
            "Not yet: deeper_history should be the list that fit returns, one dict per epoch",
        ),
    ],
    ids=["untrained", "the-lessons-model", "no-history"],
)
def test_05_deeper_trained_wrong_answers(answers, line, capsys):
    assert checked("05_training", 3, answers, capsys) == (False, line)


def fake_train_on_device(make_model, phases, size=128, data=None):
    """05's train_on_device without the training: a val_acc that grows with the parameters and the rate."""
    ((epochs, lr),) = phases
    acc = 0.8 + sum(p.numel() for p in make_model().parameters()) / 1e7 + lr / 10 - size / 10_000
    return [{"val_acc": acc, "epoch_s": size / 1000} for _ in range(epochs)]


def notebook_05():
    """The names 05's exercises use, with a train_on_device that answers at once."""
    from functools import partial

    return {
        **{"partial": partial, "helpers": helpers, "nn": nn, "hidden_size": 32, "lr1": 0.5, "exercise_epochs": 2},
        **{"exercise_set": None, "train_on_device": fake_train_on_device},
    }


def test_05_solutions_pass_their_checks(capsys):
    namespace = solved("05_training", 1, notebook_05())
    assert capsys.readouterr().out.splitlines()[:2] == [
        "batch    lr  val_acc  s/epoch",
        "   32  0.05   0.8043    0.032",
    ]
    assert checked("05_training", 1, namespace, capsys) == (
        True,
        "Correct: batch 32 at lr 0.5 did best (0.8493), batch 512 at lr 0.05 worst (0.7563): smaller batches take "
        "more steps per epoch, a larger rate bigger ones",
    )
    namespace = solved("05_training", 2, notebook_05())
    assert checked("05_training", 2, namespace, capsys) == (
        True,
        "Correct: 16: 0.8385, 32: 0.8397, 64: 0.8423, 128: 0.8474; per doubling +0.13, +0.25, +0.51 points: not "
        "steady, and a change of a few tenths of a point is within what another seed changes (notebook 06)",
    )
    namespace = solved("05_training", 3, notebook_05())
    assert checked("05_training", 3, namespace, capsys) == (
        True,
        "Correct: 784 → 64 → 32 → 10 trained to 0.8425 validation accuracy in 2 epochs",
    )


def test_05_a_rate_or_a_size_left_unchanged_is_named(capsys):
    same_rate = {(size, lr): 0.9 - size / 10_000 for size, lr in GRID}
    assert checked("05_training", 1, {"results": same_rate, "best": (32, 0.05)}, capsys) == (
        False,
        "Not yet: at each batch size both learning rates scored the same: give each run its own rate, "
        "[(exercise_epochs, lr)]",
    )
    same_size = {(size, lr): 0.8 + lr / 10 for size, lr in GRID}
    assert checked("05_training", 1, {"results": same_size, "best": (32, 0.5)}, capsys) == (
        False,
        "Not yet: at each learning rate the three batch sizes scored the same: give each run its own batch size, "
        "train_on_device(model_fn, [(exercise_epochs, lr)], size, exercise_set)",
    )
    assert checked("05_training", 2, {"hidden_results": {16: 0.9153, 64: 0.9153, 128: 0.9153}}, capsys) == (
        False,
        "Not yet: every hidden size scored 0.9153, as if all were one model: build each with its own size, "
        "helpers.MnistModel(784, h, 10), not hidden_size",
    )


# ------------------------------------------------------------------------------------------------ 06, 09-11


def test_06_fashion_accuracy(capsys):
    assert checked("06_plots", 1, {"fashion_test_acc": 0.8412}, capsys) == (
        True,
        "Correct: 0.8412 on Fashion-MNIST's test set, below MNIST's: clothes are harder to tell apart than digits",
    )


@pytest.mark.parametrize(
    "acc, line",
    [
        (
            0.9699,
            "Not yet: 0.9699 is what the model scores on MNIST's digits: evaluate it on Fashion-MNIST's test set, "
            "helpers.load_fashion_mnist(DATA, train=False)",
        ),
        (
            0.1,
            "Not yet: fashion_test_acc is 0.1000, about what guessing scores (0.1): did the model train (fit) before "
            "it was evaluated?",
        ),
        (____, UNANSWERED),
    ],
    ids=["mnist", "untrained", "unanswered"],
)
def test_06_fashion_accuracy_wrong_answers(acc, line, capsys):
    assert checked("06_plots", 1, {"fashion_test_acc": acc}, capsys) == (False, line)


def test_an_open_ended_exercise_says_it_is_a_question_for_thought(capsys):
    assert checked("09_cpu_vs_gpu", 1, {}, capsys) == (
        False,
        "A question for thought: there is no single right answer to check; run q1.solution() to compare yours "
        "with ours",
    )
    (q1,) = helpers_exercises.exercises("09_cpu_vs_gpu", {})
    q1.hint()
    assert capsys.readouterr().out.strip() == (
        "Hint: on each device in devices, train helpers.MnistModel(784, hidden, 10) with helpers.fit on resident "
        "loaders (helpers.DeviceResidentLoader.from_dataset) for hidden = 32, then 1024; each epoch of fit's history "
        "has its 'train_s'"
    )
    q1.solution()
    shown = capsys.readouterr().out
    assert shown.startswith("Solution: expect the 32-unit model to gain little on a GPU")
    assert shown.rstrip().endswith(q1.code) and "helpers.MnistModel(784, hidden, 10)" in q1.code


class FinishedRun:
    """What subprocess.run returns: the finished command, its exit code among its attributes."""

    returncode = 1


def test_10_processes(capsys):
    assert checked("10_many_gpus", 1, {"four_difference": 1.2e-6, "three_exit_code": 1}, capsys) == (
        True,
        "Correct: 4 processes end 1.2e-06 from 1, and 3 stop with exit code 1, as 128 does not split 3 ways",
    )
    # another right answer: the difference left as a one-number tensor, a launcher's other failing exit code
    assert checked("10_many_gpus", 1, {"four_difference": torch.tensor(0.0), "three_exit_code": 2}, capsys)[0]


def test_10_the_worked_solution_passes(tmp_path, capsys):
    """The solution's code, with a stand-in for torchrun that saves the weights, or fails as 3 processes do."""
    import shlex
    import types

    def run(args, capture_output, text):
        n = int(next(a for a in args if a.startswith("--nproc_per_node=")).split("=")[1])
        assert "--device" in args and args[args.index("--device") + 1] == "cpu", "4 processes share no GPUs"
        if 128 % n:
            return types.SimpleNamespace(returncode=1, stderr="ValueError: a batch of 128 does not split evenly")
        torch.save({"w": torch.ones(3) + 1e-7 * (n > 1)}, args[-1])
        return types.SimpleNamespace(returncode=0, stderr="")

    torch.save({"w": torch.ones(3)}, tmp_path / "one.pt")
    namespace = {
        "subprocess": types.SimpleNamespace(run=run),
        "shlex": shlex,
        "torch": torch,
        "WORK": tmp_path,
        "DEVICE": "cuda",
        "torchrun": "python -m torch.distributed.run",
        "dry_run": "helpers_cli.py --device cuda --seed 42 --dry-run train --save",
        "max_difference": lambda a, b: max((a[k] - b[k]).abs().max().item() for k in a),
    }
    solved("10_many_gpus", 1, namespace)
    assert namespace["three_exit_code"] == 1 and not (tmp_path / "three.pt").exists()
    assert checked("10_many_gpus", 1, namespace, capsys)[1].startswith("Correct: 4 processes end 1.2e-07 from 1")


@pytest.mark.parametrize(
    "answers, line",
    [
        (
            {"four_difference": 0.3, "three_exit_code": 1},
            "Not yet: four_difference is 0.3; 4 processes should end within rounding (about 1e-6) of 1 process: "
            "compare the weights of the same dry run, four.pt against one.pt",
        ),
        (
            {"four_difference": {"w": 1e-6}, "three_exit_code": 1},
            "Not yet: four_difference is a dict; it should be one number, the largest weight difference: "
            'max_difference(torch.load(WORK / "four.pt"), torch.load(WORK / "one.pt"))',
        ),
        (
            {"four_difference": 1e-6, "three_exit_code": 0},
            "Not yet: three_exit_code is 0, but 3 processes cannot split a batch of 128: take the return code of the "
            "run with --nproc_per_node=3",
        ),
        (
            {"four_difference": 1e-6, "three_exit_code": FinishedRun()},
            "Not yet: three_exit_code is the whole finished run; keep only its exit code: .returncode",
        ),
        (
            {"four_difference": 1e-6, "three_exit_code": "1"},
            "Not yet: three_exit_code is '1'; it should be the whole number a command ends with: "
            "subprocess.run(...).returncode",
        ),
        ({"four_difference": ____, "three_exit_code": ____}, UNANSWERED),
    ],
    ids=["different-weights", "not-a-number", "three-succeeded", "the-whole-run", "printed-code", "unanswered"],
)
def test_10_processes_wrong_answers(answers, line, capsys):
    assert checked("10_many_gpus", 1, answers, capsys) == (False, line)


def test_11_mixed_precision(capsys):
    assert checked("11_gpu_speed", 1, {"results": {"float32": 0.9699, "bfloat16": 0.9702}}, capsys) == (
        True,
        "Correct: float32 0.9699, bfloat16 0.9702: 0.03 points apart",
    )
    # another right answer: float16, as on a T4, with the accuracies kept as history-like dicts
    assert checked("11_gpu_speed", 1, {"results": {"float16": {"val_acc": 0.97}, "float32": 0.9691}}, capsys) == (
        True,
        "Correct: float32 0.9691, float16 0.9700: 0.09 points apart",
    )


def test_11_the_worked_solution_passes(capsys):
    """The solution's code, with train_lesson standing in: one run per precision, each step as asked."""
    import contextlib
    import io
    import types

    import helpers_speed

    steps = []

    def train_lesson(root, device, epochs, seed, pipeline, make_step):
        steps.append(make_step)
        print("Epoch [0] ...")  # what the solution keeps out of sight
        return {"test_acc": 0.9691 if make_step is helpers.lesson_step else 0.9703}

    stand_in = types.SimpleNamespace(lesson_step=helpers.lesson_step, train_lesson=train_lesson)
    namespace = {"helpers": stand_in, "helpers_speed": helpers_speed, "contextlib": contextlib, "io": io}
    namespace |= {"DEVICE": torch.device("cpu"), "DATA": "data", "exercise_epochs": 1, "seed": 42}
    solved("11_gpu_speed", 1, namespace)
    assert capsys.readouterr().out == " float32: test accuracy 0.9691\nbfloat16: test accuracy 0.9703\n"
    assert len(steps) == 2 and steps[0] is helpers.lesson_step and steps[1] is not helpers.lesson_step
    assert checked("11_gpu_speed", 1, namespace, capsys) == (
        True,
        "Correct: float32 0.9691, bfloat16 0.9703: 0.12 points apart",
    )


@pytest.mark.parametrize(
    "results, line",
    [
        (
            {"bfloat16": 0.97},
            "Not yet: results needs a 'float32' entry: the test accuracy of the same training without autocast",
        ),
        (
            {"float32": 0.97},
            "Not yet: results has ['float32']; add 'bfloat16' (or 'float16' with a GradScaler on an older GPU): the "
            "same training under helpers_speed.mixed_precision",
        ),
        (
            {"float32": {"model": nn.Linear(784, 10), "test_acc": 0.97}, "bfloat16": 0.97},
            "Not yet: results['float32'] is the whole run that train_lesson returned; keep only its test accuracy: "
            "run['test_acc']",
        ),
        (
            {"float32": 96.91, "bfloat16": 97.03},
            "Not yet: results['float32'] is 96.91, a percentage; keep the accuracy as train_lesson gives it, a number "
            "between 0 and 1: run['test_acc']",
        ),
        ({"float32": ____, "bfloat16": ____}, UNANSWERED),
    ],
    ids=["no-float32", "no-16-bit", "the-whole-run", "percent", "unanswered"],
)
def test_11_mixed_precision_wrong_answers(results, line, capsys):
    assert checked("11_gpu_speed", 1, {"results": results}, capsys) == (False, line)


def test_in_a_notebook_the_line_is_html_in_colour_and_carries_every_language(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.get_ipython", lambda: object())
    monkeypatch.setattr("IPython.display.display", lambda data, raw, metadata: shown.append((data, metadata)))
    helpers_exercises.exercises("03_model", {"deeper": Flat(784, 64, 10)})[1].check()
    ((data, metadata),) = shown
    assert data["text/plain"].startswith("Not yet: your model's linear layers go 784 → 64 → 10")
    assert data["text/html"].startswith('<p><b style="color:#c62828">Not yet</b>: your model')
    assert metadata["helpers_exercises"]["en"] == data
    assert metadata["helpers_exercises"]["zh"]["text/plain"].startswith("还没有：你的模型的线性层是 784 → 64 → 10")


# ------------------------------------------------------------------------------------------------ 07, 08


def fake_predictions():
    """Ten test images: confidences 0.4 to 0.999, the first seven predicted right."""
    top = torch.tensor([0.4, 0.6, 0.7, 0.8, 0.95, 0.96, 0.995, 0.5, 0.92, 0.999])
    probs = torch.stack([top, (1 - top) / 2, (1 - top) / 2], dim=1)
    labels = torch.zeros(10, dtype=torch.long)
    preds = torch.tensor([0, 0, 0, 0, 0, 0, 0, 1, 1, 1])
    return {"probs": probs, "preds": preds, "labels": labels}


def test_07_sure_answers(capsys):
    namespace = solved("07_error_analysis", 1, {"predictions": fake_predictions()})
    assert namespace["answered"] == {0.5: (9, 6), 0.9: (5, 3), 0.99: (2, 1)}
    assert checked("07_error_analysis", 1, namespace, capsys) == (
        True,
        "Correct: at 0.99 the model answers 20.0% of the images and gets 50.00% of them right; the rest would go to "
        "a person",
    )
    as_lists = {0.5: [9, 6], 0.9: [5, 3], 0.99: [2, 1]}
    assert checked("07_error_analysis", 1, {"predictions": fake_predictions(), "answered": as_lists}, capsys)[0]


@pytest.mark.parametrize(
    "answered, line",
    [
        (
            {0.5: (9, 7), 0.9: (5, 7), 0.99: (2, 7)},
            "Not yet: at 0.5, 7 counts the right answers among all the test images; count them among the images "
            "the model is sure of: (right & sure).sum()",
        ),
        (
            {0.5: (1, 0), 0.9: (5, 3), 0.99: (2, 1)},
            "Not yet: at 0.5, 1 counts the images below the threshold; keep those with confidence >= 0.5",
        ),
        (
            {0.5: (0.9, 6 / 9), 0.9: (0.5, 0.6), 0.99: (0.2, 0.5)},
            "Not yet: answered[0.5] holds (0.9, 0.6666666666666666): a share, not a count; count the images with "
            ".sum(), not .mean()",
        ),
        (
            {0.5: (6, 9), 0.9: (3, 5), 0.99: (1, 2)},
            "Not yet: at 0.5, the two numbers are swapped: first the images answered (9), then how many of them are "
            "right (6)",
        ),
        (
            {0.5: (9, 6), 0.9: (5, 3), 0.99: (3, 2)},
            "Not yet: at 0.99, the model answers 2 images, not 3: the confidence is the largest probability, "
            'predictions["probs"].max(dim=1).values, and an image counts when it is >= the threshold',
        ),
    ],
    ids=["right-among-all", "below-the-threshold", "shares", "swapped", "wrong-count"],
)
def test_07_sure_answers_wrong_answers(answered, line, capsys):
    namespace = {"predictions": fake_predictions(), "answered": answered}
    assert checked("07_error_analysis", 1, namespace, capsys) == (False, line)


@pytest.fixture
def checkpoint_demo(tmp_path):
    """A folder like 08's demo: run.ckpt after 2 epochs on learnable data, and the validation loader."""
    train, val = learnable_loaders()
    torch.manual_seed(0)
    model = helpers.MnistModel()
    helpers.fit(2, 0.5, model, train, val, progress=False, verbose=False, checkpoint_path=tmp_path / "run.ckpt")
    return {"demo": tmp_path, "val_fast": val, "DEVICE": torch.device("cpu"), "helpers": helpers, "torch": torch}


def test_08_inside_a_checkpoint(checkpoint_demo, capsys):
    namespace = solved("08_checkpoints", 1, checkpoint_demo)
    passed, line = checked("08_checkpoints", 1, namespace, capsys)
    assert passed and line.startswith("Correct: 2 completed epochs, and the restored model scores ")
    history = torch.load(checkpoint_demo["demo"] / "run.ckpt", weights_only=True)["history"]
    answers = {"completed": len(history), "restored_score": history[-1]["val_acc"]}
    assert checked("08_checkpoints", 1, {**checkpoint_demo, **answers}, capsys)[0]


def test_08_inside_a_checkpoint_wrong_answers(checkpoint_demo, capsys):
    state = torch.load(checkpoint_demo["demo"] / "run.ckpt", weights_only=True)
    keys = {**checkpoint_demo, "completed": len(state), "restored_score": 0.9}
    assert checked("08_checkpoints", 1, keys, capsys) == (
        False,
        f"Not yet: {len(state)} is the number of keys in the checkpoint; the completed epochs are under the key "
        "'epoch' (or count the history)",
    )
    fresh = helpers.evaluate(helpers.MnistModel(), checkpoint_demo["val_fast"])["val_acc"]
    untrained = {**checkpoint_demo, "completed": 2, "restored_score": fresh}
    assert checked("08_checkpoints", 1, untrained, capsys) == (
        False,
        f"Not yet: restored_score is {fresh:.4f}, what an untrained model scores: load the checkpoint into the fresh "
        'model, helpers.load_checkpoint(demo / "run.ckpt", model), before you evaluate it',
    )
    last = state["history"][-1]["val_acc"]
    other = {**checkpoint_demo, "completed": 2, "restored_score": last - 0.05}
    assert checked("08_checkpoints", 1, other, capsys) == (
        False,
        f"Not yet: restored_score is {last - 0.05:.4f} where the history's last epoch says {last:.4f}: load the "
        "checkpoint into the model with helpers.load_checkpoint, then evaluate on the same validation loader, "
        "val_fast",
    )
