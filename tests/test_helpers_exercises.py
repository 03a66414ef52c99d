"""helpers_exercises: each check passes a correct answer other than the solution and names what is wrong."""

import pytest
import torch.nn as nn
import torch.nn.functional as F

import helpers_exercises
from helpers_exercises import ____


def checked(notebook, number, namespace, capsys, lang="en"):
    """(passed, the printed line) of exercise `number` of `notebook` against `namespace`."""
    exercise = helpers_exercises.exercises(notebook, namespace, lang=lang)[number - 1]
    passed = exercise.check()
    return passed, capsys.readouterr().out.strip()


class Flat(nn.Module):
    def __init__(self, *sizes, relu=True):
        super().__init__()
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()] if relu else [nn.Linear(a, b)]
        self.layers = nn.Sequential(nn.Flatten(), *layers[: -1 if relu else None])

    def forward(self, xb):
        return self.layers(xb)


class NoFlatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(784, 64), nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, xb):
        return self.c(F.relu(self.b(F.relu(self.a(xb)))))


def test_03_two_hidden_layers_the_solution_and_another_correct_answer_pass(capsys):
    namespace = {"nn": nn, "F": F}
    exec(helpers_exercises.REGISTRY["03_model"][1].code, namespace)
    assert checked("03_model", 2, namespace, capsys) == (
        True,
        "Correct: 784 → 64 → 32 → 10 with a non-linearity between the layers, 52,650 parameters",
    )
    assert checked("03_model", 2, {"deeper": Flat(784, 64, 32, 10)}, capsys)[0]


@pytest.mark.parametrize(
    "deeper, line",
    [
        (
            ____,
            "Not yet: write your answer in place of ____ in the cell above, run it, then check again",
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
            NoFlatten(),
            "Not yet: your model fails on a batch of images of shape [8, 1, 28, 28] (RuntimeError: mat1 and mat2 "
            "shapes cannot be multiplied (224x28 and 784x64)); flatten the images first, with xb.flatten(1) or "
            "xb.view(xb.size(0), -1)",
        ),
    ],
    ids=["unanswered", "one-hidden-layer", "no-relu", "not-flattened"],
)
def test_03_two_hidden_layers_wrong_answers_get_their_hint(deeper, line, capsys):
    assert checked("03_model", 2, {"deeper": deeper}, capsys) == (False, line)


def test_the_chinese_edition_checks_in_chinese(capsys):
    passed, line = checked("03_model", 2, {"deeper": Flat(784, 64, 10)}, capsys, lang="zh")
    assert not passed and line.startswith("还没有：你的模型的线性层是 784 → 64 → 10（1 个隐藏层）")


def test_an_open_ended_exercise_says_it_is_a_question_for_thought(capsys):
    assert checked("03_model", 1, {}, capsys) == (
        False,
        "A question for thought: there is no single right answer to check; run q1.solution() to compare yours "
        "with ours",
    )
