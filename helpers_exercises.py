"""Exercises that answer in place: `check()`, `hint()` and `solution()` for each exercise of the series.

A notebook binds its exercises to its own globals once, then each exercise cell ends with a check:

    q1, q2 = helpers_exercises.exercises("05_training", globals())
    ...
    q1.check()   # "Correct: ..." or "Not yet: <what the check found, and what to look at>"
    q1.hint()    # a nudge
    q1.solution()  # the worked solution's idea and code

A check reads the learner's objects (the model, the loaders, the history, the number), never their source text,
so two different correct answers both pass. Messages exist in English and Chinese (`lang`); the printed line
starts with "Correct" or "Not yet" (正确 / 还没有), in colour where the front end shows HTML.
"""

from __future__ import annotations

import dataclasses
import html
import os
from collections.abc import Callable
from typing import Any


class Placeholder:
    """`____`: what an exercise cell holds until the learner writes an answer."""

    def __repr__(self) -> str:
        return "____"


____ = Placeholder()

LANGUAGES = ("en", "zh")
WORDS = {
    "correct": {"en": "Correct", "zh": "正确"},
    "not_yet": {"en": "Not yet", "zh": "还没有"},
    "hint": {"en": "Hint", "zh": "提示"},
    "solution": {"en": "Solution", "zh": "答案"},
    "thought": {"en": "A question for thought", "zh": "思考题"},
    "unanswered": {
        "en": "write your answer in place of ____ in the cell above, run it, then check again",
        "zh": "把上面单元格中的 ____ 换成你的答案，运行它，再检查一次",
    },
    "open_ended": {
        "en": "there is no single right answer to check; run q{n}.solution() to compare yours with ours",
        "zh": "这道题没有唯一的正确答案可供检查；运行 q{n}.solution()，把你的答案与参考答案对照",
    },
}


class NotYet(Exception):
    """Raised by a check: the answer is not right yet; the message (in every language) says what to look at."""

    def __init__(self, **messages: str):
        super().__init__(messages.get("en", ""))
        self.messages = messages


@dataclasses.dataclass
class Exercise:
    """One exercise: its check of the learner's objects, a hint and a worked solution, in each language."""

    number: int
    check_answer: Callable[[dict], dict[str, str]] | None  # namespace -> the "Correct" message; raises NotYet
    hints: dict[str, str]
    solutions: dict[str, str]  # the solution's prose, by language
    code: str = ""  # the solution's code, the same in every language
    namespace: dict = dataclasses.field(default_factory=dict, repr=False)
    lang: str = "en"

    def check(self) -> bool:
        """Check the learner's answer; print one line that starts with "Correct" or "Not yet"."""
        if self.check_answer is None:
            _show(
                WORDS["thought"][self.lang],
                WORDS["open_ended"][self.lang].format(n=self.number),
                "#1565c0",
                lang=self.lang,
            )
            return False
        try:
            found = self.check_answer(self.namespace)
        except Unanswered:
            _show(WORDS["not_yet"][self.lang], WORDS["unanswered"][self.lang], "#c62828", lang=self.lang)
            return False
        except NotYet as wrong:
            _show(WORDS["not_yet"][self.lang], wrong.messages[self.lang], "#c62828", lang=self.lang)
            return False
        _show(WORDS["correct"][self.lang], found[self.lang], "#2e7d32", lang=self.lang)
        return True

    def hint(self) -> None:
        """Print a nudge towards the answer."""
        _show(WORDS["hint"][self.lang], self.hints[self.lang], "#6a1b9a", lang=self.lang)

    def solution(self) -> None:
        """Print the worked solution: what it does, then its code."""
        _show(WORDS["solution"][self.lang], self.solutions[self.lang], "#37474f", code=self.code, lang=self.lang)


class Unanswered(Exception):
    """Raised by `answer()`: the learner has not replaced ____ yet."""


def answer(namespace: dict, name: str) -> Any:
    """The learner's object called `name`, or Unanswered while it is missing or still ____."""
    value = namespace.get(name, ____)
    if isinstance(value, Placeholder):
        raise Unanswered(name)
    return value


def _show(label: str, text: str, colour: str, code: str = "", lang: str = "en") -> None:
    """One line `label: text` (and the code below it): HTML in colour where the front end renders it, else text."""
    colon = "：" if lang == "zh" else ": "
    plain = f"{label}{colon}{text}" + (f"\n\n{code.strip()}" if code else "")
    rich = f'<p><b style="color:{colour}">{html.escape(label)}</b>{colon}{html.escape(text)}</p>'
    if code:
        rich += f"<pre>{html.escape(code.strip())}</pre>"
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display({"text/plain": plain, "text/html": rich}, raw=True)
    else:
        print(plain)


REGISTRY: dict[str, list[Exercise]] = {}


def register(notebook: str, exercise: Exercise) -> Exercise:
    """Add `exercise` to `notebook`'s list, in order of its number."""
    REGISTRY.setdefault(notebook, []).append(exercise)
    assert [e.number for e in REGISTRY[notebook]] == list(range(1, len(REGISTRY[notebook]) + 1)), notebook
    return exercise


def exercises(notebook: str, namespace: dict, lang: str | None = None) -> list[Exercise]:
    """The exercises of `notebook` (e.g. "05_training"), bound to the notebook's globals, in `lang`."""
    lang = lang or os.environ.get("SERIES_LANG", "en")
    if lang not in LANGUAGES:
        raise ValueError(f"lang={lang!r}: choose one of {', '.join(LANGUAGES)}")
    if notebook not in REGISTRY:
        raise ValueError(f"no exercises for {notebook!r}: choose one of {', '.join(sorted(REGISTRY))}")
    return [dataclasses.replace(e, namespace=namespace, lang=lang) for e in REGISTRY[notebook]]


# ------------------------------------------------------------------------------------------------ 03: the model


def _linear_sizes(model: Any) -> list[tuple[int, int]]:
    """(in, out) of each nn.Linear of `model`, in the order they were defined."""
    import torch.nn as nn

    return [(m.in_features, m.out_features) for m in model.modules() if isinstance(m, nn.Linear)]


def _arrow(sizes: list[tuple[int, int]]) -> str:
    return " → ".join(str(n) for n in [sizes[0][0], *(out for _, out in sizes)]) if sizes else "no nn.Linear"


def _check_two_hidden_layers(namespace: dict) -> dict[str, str]:
    import torch
    import torch.nn as nn

    model = answer(namespace, "deeper")
    if not isinstance(model, nn.Module):
        raise NotYet(
            en=f"deeper is a {type(model).__name__}, not a model: define a class that inherits nn.Module, "
            "then set deeper to an instance of it",
            zh=f"deeper 是一个 {type(model).__name__}，不是模型。先定义一个继承 nn.Module 的类，"
            "再把这个类的实例赋给 deeper",
        )
    sizes = _linear_sizes(model)
    if sizes != [(784, 64), (64, 32), (32, 10)]:
        hidden = max(len(sizes) - 1, 0)
        raise NotYet(
            en=f"your model's linear layers go {_arrow(sizes)} ({hidden} hidden layer{'s' if hidden != 1 else ''}); "
            "the exercise asks for 784 → 64 → 32 → 10: three nn.Linear layers, each one's output size the next "
            "one's input size",
            zh=f"你的模型的线性层是 {_arrow(sizes)}（{hidden} 个隐藏层）；题目要求 784 → 64 → 32 → 10，"
            "即三个 nn.Linear 层，每一层的输出大小等于下一层的输入大小",
        )
    images = torch.rand(8, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad():
            a, b, both = model(images), model(images.roll(1, 0)), model(images + images.roll(1, 0))
    except Exception as err:  # the learner's forward: any error is theirs to read
        raise NotYet(
            en=f"your model fails on a batch of images of shape [8, 1, 28, 28] ({type(err).__name__}: {err}); "
            "flatten the images first, with xb.flatten(1) or xb.view(xb.size(0), -1)",
            zh=f"你的模型在形状为 [8, 1, 28, 28] 的一批图像上出错（{type(err).__name__}: {err}）；"
            "先把图像展平：xb.flatten(1) 或 xb.view(xb.size(0), -1)",
        ) from None
    if list(a.shape) != [8, 10]:
        raise NotYet(
            en=f"your model returns shape {list(a.shape)} for 8 images; it should return [8, 10], ten scores per image",
            zh=f"对 8 张图像，你的模型返回的形状是 {list(a.shape)}；应该是 [8, 10]，每张图像 10 个分数",
        )
    with torch.no_grad():
        zero = model(torch.zeros_like(images))
    if torch.allclose(a + b - zero, both, atol=1e-5):
        raise NotYet(
            en="your model is linear: without a ReLU between them, three linear layers add up to one; "
            "apply F.relu (or nn.ReLU) to the output of each hidden layer",
            zh="你的模型是线性的：层与层之间没有 ReLU，三个线性层合起来只相当于一个；"
            "在每个隐藏层的输出上应用 F.relu（或 nn.ReLU）",
        )
    count = sum(p.numel() for p in model.parameters())
    return {
        "en": f"784 → 64 → 32 → 10 with a non-linearity between the layers, {count:,} parameters",
        "zh": f"784 → 64 → 32 → 10，层与层之间有非线性激活，共 {count:,} 个参数",
    }


register(
    "03_model",
    Exercise(
        1,
        None,
        hints={
            "en": "a layer nn.Linear(a, b) has a × b weights and b biases; sum them for each layer",
            "zh": "一个 nn.Linear(a, b) 层有 a × b 个权重和 b 个偏置；逐层相加",
        },
        solutions={
            "en": "784 × h + h weights and biases in the first layer against h × 10 + 10 in the second: for every "
            "hidden size, the first layer holds about 99% of the parameters",
            "zh": "第一层有 784 × h + h 个权重和偏置，第二层有 h × 10 + 10 个：无论隐藏层多大，约 99% 的参数都在第一层",
        },
    ),
)
register(
    "03_model",
    Exercise(
        2,
        _check_two_hidden_layers,
        hints={
            "en": "copy MnistModel and add a third nn.Linear: 784 → 64, 64 → 32, 32 → 10, with F.relu after the "
            "first two; then deeper = YourClass()",
            "zh": "照着 MnistModel 写，再加一个 nn.Linear：784 → 64、64 → 32、32 → 10，前两层之后各接 F.relu；"
            "然后 deeper = 你的类()",
        },
        solutions={
            "en": "three linear layers, a ReLU after each of the first two",
            "zh": "三个线性层，前两层之后各接一个 ReLU",
        },
        code="""class TwoHiddenLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(784, 64)
        self.linear2 = nn.Linear(64, 32)
        self.linear3 = nn.Linear(32, 10)

    def forward(self, xb):
        out = F.relu(self.linear1(xb.flatten(1)))
        out = F.relu(self.linear2(out))
        return self.linear3(out)


deeper = TwoHiddenLayers()""",
    ),
)
