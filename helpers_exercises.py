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
    passed: bool = False  # what the last check() found; check() returns nothing, so a cell shows no Out[]

    def check(self) -> None:
        """Check the learner's answer; print one line that starts with "Correct" or "Not yet" (and keep `passed`)."""
        self.passed = False
        if self.check_answer is None:
            opened = {lang: text.format(n=self.number) for lang, text in WORDS["open_ended"].items()}
            self._show("thought", opened, "#1565c0")
            return
        try:
            found = self.check_answer(self.namespace)
        except Unanswered:
            self._show("not_yet", WORDS["unanswered"], "#c62828")
            return
        except NotYet as wrong:
            self._show("not_yet", wrong.messages, "#c62828")
            return
        self._show("correct", found, "#2e7d32")
        self.passed = True

    def hint(self) -> None:
        """Print a nudge towards the answer."""
        self._show("hint", self.hints, "#6a1b9a")

    def solution(self) -> None:
        """Print the worked solution: what it does, then its code."""
        self._show("solution", self.solutions, "#37474f", code=self.code)

    def _show(self, label: str, texts: dict[str, str], colour: str, code: str = "") -> None:
        """The line `label: text` in this exercise's language; the other languages ride along in the metadata."""
        outputs = {lang: _rendered(WORDS[label][lang], texts[lang], colour, code, lang) for lang in LANGUAGES}
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            get_ipython = None
        if get_ipython is not None and get_ipython() is not None:
            display(outputs[self.lang], raw=True, metadata={"helpers_exercises": outputs})
        else:
            print(outputs[self.lang]["text/plain"])


class Unanswered(Exception):
    """Raised by `answer()`: the learner has not replaced ____ yet."""


def answer(namespace: dict, name: str) -> Any:
    """The learner's object called `name`, or Unanswered while it is missing or still holds a ____."""
    value = namespace.get(name, ____)
    if _holds_placeholder(value):
        raise Unanswered(name)
    return value


def _holds_placeholder(value: Any) -> bool:
    if isinstance(value, Placeholder):
        return True
    if isinstance(value, dict):
        return any(_holds_placeholder(v) for v in value.values())
    return isinstance(value, (list, tuple)) and any(_holds_placeholder(v) for v in value)


def _counted(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else repr(value)


def _trained(value: Any, name: str, least: float = 0.2) -> float:
    """`value` as an accuracy from a model that trained; NotYet when it is not a number in [0, 1], or a guess."""
    if isinstance(value, dict) and "val_acc" in value:
        value = value["val_acc"]
    if not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise NotYet(
            en=f"{name} is {value!r}: it should be an accuracy, a number between 0 and 1 (history[-1]['val_acc'])",
            zh=f"{name} 是 {value!r}；应该是准确率，即 0 到 1 之间的数（history[-1]['val_acc']）",
        )
    if value < least:
        raise NotYet(
            en=f"{name} is {value:.4f}, about what guessing scores (0.1): did the model train (fit) before it was "
            "evaluated?",
            zh=f"{name} 是 {value:.4f}，和随机猜测（0.1）差不多。评估之前，模型训练（fit）过吗？",
        )
    return float(value)


def _missing(name: str, found: dict, wanted: list) -> None:
    """NotYet naming the first of `wanted` that the dict `found` (called `name`) lacks."""
    if not isinstance(found, dict):
        raise NotYet(
            en=f"{name} is a {type(found).__name__}; it should be a dict with the keys {wanted}",
            zh=f"{name} 是一个 {type(found).__name__}；应该是一个字典，键为 {wanted}",
        )
    for key in wanted:
        if key not in found:
            raise NotYet(
                en=f"{name} has no entry for {key!r}; it needs one for each of {wanted}",
                zh=f"{name} 中没有 {key!r} 这一项；{wanted} 中的每一项都要有",
            )


def _rendered(label: str, text: str, colour: str, code: str, lang: str) -> dict[str, str]:
    """The line `label: text` (and the code below it) as plain text, and as HTML in colour."""
    colon = "：" if lang == "zh" else ": "
    plain = f"{label}{colon}{text}" + (f"\n\n{code.strip()}" if code else "")
    rich = f'<p><b style="color:{colour}">{html.escape(label)}</b>{colon}{html.escape(text)}</p>'
    if code:
        rich += f"<pre>{html.escape(code.strip())}</pre>"
    return {"text/plain": plain, "text/html": rich}


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


# ------------------------------------------------------------------------------------------------ 02: the data


def _check_batch_counts(namespace: dict) -> dict[str, str]:
    batches = answer(namespace, "batches")
    n = len(namespace["train_set"])
    sizes = [32, 128, 512]
    _missing("batches", batches, sizes)
    for size in sizes:
        found = batches[size]
        if not (isinstance(found, (tuple, list)) and len(found) == 2):
            raise NotYet(
                en=f"batches[{size}] is {found!r}; it should be a pair: (number of batches, size of the last batch)",
                zh=f"batches[{size}] 是 {found!r}；应该是一对数，即（批量的个数，最后一个批量的大小）",
            )
        count, last = found
        right = -(-n // size)
        if count != right:
            if count == -(-(n + 10_000) // size) or count == (n + 10_000) // size:
                raise NotYet(
                    en=f"at batch size {size} you counted from 60,000 images; the training set is the {n:,} left "
                    "after the validation split: len(train_set)",
                    zh=f"批量大小为 {size} 时，你是按 60,000 张图像算的；训练集是划出验证集后剩下的 {n:,} 张，即 "
                    "len(train_set)",
                )
            if count == n // size:
                raise NotYet(
                    en=f"at batch size {size}, {count:,} leaves out the last, smaller batch: an epoch uses every "
                    "image, so round the division up (len(DataLoader(train_set, size)) counts it for you)",
                    zh=f"批量大小为 {size} 时，{count:,} 漏掉了最后那个较小的批量。一轮要用到每一张图像，"
                    "所以除法要向上取整（len(DataLoader(train_set, size)) 会替你数）",
                )
            raise NotYet(
                en=f"at batch size {size}, {_counted(count)} is not the number of batches; len(DataLoader(train_set, "
                f"{size})) gives it",
                zh=f"批量大小为 {size} 时，{_counted(count)} 不是批量的个数；用 len(DataLoader(train_set, {size})) "
                "可以求出它",
            )
        if last != n - (right - 1) * size:
            raise NotYet(
                en=f"at batch size {size}, the last batch does not hold {_counted(last)} images: it holds what the "
                f"{right - 1:,} full batches leave of the {n:,}",
                zh=f"批量大小为 {size} 时，最后一个批量不是 {_counted(last)} 张图像，而是 {n:,} 张分完 {right - 1:,} "
                "个完整批量后剩下的那些",
            )
    listed = "; ".join(f"{size}: {batches[size][0]:,} batches, the last of {batches[size][1]}" for size in sizes)
    listed_zh = "；".join(
        f"批量大小为 {size} 时有 {batches[size][0]:,} 个批量，最后一个批量 {batches[size][1]} 张" for size in sizes
    )
    return {
        "en": f"{listed}. Bigger batches: fewer, larger steps per epoch",
        "zh": f"{listed_zh}。批量越大，每轮的步数越少、每一步越大",
    }


def _check_fashion_loader(namespace: dict) -> dict[str, str]:
    from torch.utils.data import DataLoader, RandomSampler

    loader = answer(namespace, "fashion_loader")
    if not isinstance(loader, DataLoader):
        raise NotYet(
            en=f"fashion_loader is a {type(loader).__name__}; make it a DataLoader over Fashion-MNIST, as the lesson "
            "makes train_loader",
            zh=f"fashion_loader 是一个 {type(loader).__name__}；像原课程创建 train_loader 那样，把它做成 Fashion-MNIST "
            "上的 DataLoader",
        )
    classes = list(getattr(getattr(loader.dataset, "dataset", loader.dataset), "classes", []))
    if "T-shirt/top" not in classes:
        raise NotYet(
            en=f"fashion_loader's images are not Fashion-MNIST's (its classes are {classes[:3]}...); load them "
            "with helpers.load_fashion_mnist(DATA)",
            zh=f"fashion_loader 中的图像不是 Fashion-MNIST 的（类别是 {classes[:3]}……）；用 "
            "helpers.load_fashion_mnist(DATA) 加载",
        )
    if not isinstance(loader.sampler, RandomSampler):
        raise NotYet(
            en="fashion_loader does not shuffle: pass shuffle=True, so that each batch mixes the ten kinds of clothing",
            zh="fashion_loader 没有打乱顺序；传入 shuffle=True，让每个批量都混有十类服装",
        )
    return {
        "en": f"a shuffled DataLoader over Fashion-MNIST's {len(loader.dataset):,} images, "
        f"batches of {loader.batch_size}",
        "zh": f"已在 Fashion-MNIST 的 {len(loader.dataset):,} 张图像上创建打乱顺序的 DataLoader，"
        f"批量大小为 {loader.batch_size}",
    }


register(
    "02_data_loading",
    Exercise(
        1,
        _check_batch_counts,
        hints={
            "en": "an epoch uses every image once: len(DataLoader(train_set, size)) batches, all full but the last",
            "zh": "一轮把每张图像用一次，共 len(DataLoader(train_set, size)) 个批量，除最后一个外都是满的",
        },
        solutions={
            "en": "count the batches with len() of a DataLoader; the last holds what the full batches leave",
            "zh": "用 DataLoader 的 len() 数出批量个数；最后一个批量装的是完整批量分完后剩下的图像",
        },
        code="""batches = {}
for size in (32, 128, 512):
    count = len(DataLoader(train_set, size))
    batches[size] = (count, len(train_set) - (count - 1) * size)""",
    ),
)
register(
    "02_data_loading",
    Exercise(
        2,
        _check_fashion_loader,
        hints={
            "en": "helpers.load_fashion_mnist(DATA) returns a dataset like MNIST(...); give it to DataLoader with "
            "a batch size and shuffle=True",
            "zh": "helpers.load_fashion_mnist(DATA) 返回一个和 MNIST(...) 一样的数据集；把它连同批量大小和 "
            "shuffle=True 交给 DataLoader",
        },
        solutions={
            "en": "load the dataset, wrap it in a shuffled DataLoader, show one batch",
            "zh": "加载数据集，用打乱顺序的 DataLoader 包装，显示一个批量",
        },
        code="""fashion = helpers.load_fashion_mnist(DATA)
fashion_loader = DataLoader(fashion, 32, shuffle=True, generator=torch.Generator().manual_seed(seed))
helpers.show_batch(fashion_loader)""",
    ),
)


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
    if isinstance(model, type) and issubclass(model, nn.Module):
        raise NotYet(
            en=f"deeper is the class {model.__name__} itself; set it to a model made from the class: "
            f"deeper = {model.__name__}()",
            zh=f"deeper 是类 {model.__name__} 本身；应该把用这个类创建的模型赋给它，即 deeper = {model.__name__}()",
        )
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
    device = next(model.parameters()).device  # the learner's model may be on the GPU already
    images = torch.rand(8, 1, 28, 28, generator=torch.Generator().manual_seed(0)).to(device)
    try:
        with torch.no_grad():
            a, b, both = model(images), model(images.roll(1, 0)), model(images + images.roll(1, 0))
    except Exception as err:  # the learner's forward: any error is theirs to read
        raise NotYet(
            en=f"your model fails on a batch of images of shape [8, 1, 28, 28] ({type(err).__name__}: {err}); "
            "flatten the images first, with xb.flatten(1) or xb.view(xb.size(0), -1)",
            zh=f"你的模型在形状为 [8, 1, 28, 28] 的一批图像上出错（{type(err).__name__}: {err}）；"
            "先用 xb.flatten(1) 或 xb.view(xb.size(0), -1) 把图像展平",
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
            zh="你的模型是线性的，因为层与层之间没有 ReLU，三个线性层合起来只相当于一个；"
            "在每个隐藏层的输出上应用 F.relu（或 nn.ReLU）",
        )
    _check_relu_after_each_hidden_layer(model, images, a)
    count = sum(p.numel() for p in model.parameters())
    return {
        "en": f"784 → 64 → 32 → 10 with a ReLU after each hidden layer, {count:,} parameters",
        "zh": f"784 → 64 → 32 → 10，每个隐藏层之后都有 ReLU，共 {count:,} 个参数",
    }


def _check_relu_after_each_hidden_layer(model: Any, images: Any, scores: Any) -> None:
    """NotYet when a linear layer receives negative values (no ReLU before it), or the scores never go negative."""
    import torch
    import torch.nn as nn

    seen = []
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    hooks = [m.register_forward_hook(lambda m, i, o: seen.append((i[0], o))) for m in linears]
    try:
        with torch.no_grad():
            model(images)
    finally:
        for hook in hooks:
            hook.remove()
    for n, (received, _) in enumerate(seen[1:], start=2):
        if (received < 0).any():
            raise NotYet(
                en=f"linear layer {n} receives negative values: there is no ReLU after layer {n - 1}; apply F.relu "
                f"(or nn.ReLU) to the output of every hidden layer",
                zh=f"第 {n} 个线性层收到了负值，说明第 {n - 1} 层之后没有 ReLU；"
                "在每个隐藏层的输出上应用 F.relu（或 nn.ReLU）",
            )
    if (seen[-1][1] < 0).any() and not (scores < 0).any():
        raise NotYet(
            en="your model's scores are never negative: a ReLU after the last layer clips them; return the last "
            "layer's output as it is",
            zh="你的模型输出的分数从不为负，因为最后一层之后的 ReLU 把负值截断了；直接返回最后一层的输出",
        )


def _check_parameter_counts(namespace: dict) -> dict[str, str]:
    counts = answer(namespace, "parameters")
    sizes = [16, 64, 128, 1024]
    _missing("parameters", counts, sizes)
    for h in sizes:
        right, found = 784 * h + h + h * 10 + 10, counts[h]
        if found == right:
            continue
        if found == 784 * h + h * 10:
            raise NotYet(
                en=f"hidden {h}: {_counted(found)} counts the weights alone; each nn.Linear(a, b) also has b biases",
                zh=f"隐藏单元为 {h} 时，{_counted(found)} 只数了权重；每个 nn.Linear(a, b) 还有 b 个偏置",
            )
        if found == 784 * h + h:
            raise NotYet(
                en=f"hidden {h}: {_counted(found)} is the first layer alone; add the second, nn.Linear({h}, 10)",
                zh=f"隐藏单元为 {h} 时，{_counted(found)} 只是第一层的参数；还要加上第二层 nn.Linear({h}, 10) 的",
            )
        raise NotYet(
            en=f"hidden {h}: {_counted(found)} is not the model's count; add up p.numel() over model.parameters()",
            zh=f"隐藏单元为 {h} 时，{_counted(found)} 不是模型的参数个数；把 model.parameters() 中每个 p.numel() 相加",
        )
    listed = ", ".join(f"{h}: {counts[h]:,}" for h in sizes)
    first, *rest = sizes
    listed_zh = "；".join(
        [f"隐藏单元为 {first} 时，模型有 {counts[first]:,} 个参数", *(f"{h} 时有 {counts[h]:,} 个" for h in rest)]
    )
    return {
        "en": f"{listed}; at every size about 99% of them are in the first layer, 784 × hidden weights",
        "zh": f"{listed_zh}。无论隐藏层多大，约 99% 的参数都在第一层，即 784 × h 个权重",
    }


register(
    "03_model",
    Exercise(
        1,
        _check_parameter_counts,
        hints={
            "en": "make helpers.MnistModel(784, h, 10) for each h and add up p.numel() over its parameters(); "
            "by hand, nn.Linear(a, b) has a × b weights and b biases",
            "zh": "对每个 h 创建 helpers.MnistModel(784, h, 10)，把它的 parameters() 中每个 p.numel() 相加；"
            "手工计算时，nn.Linear(a, b) 有 a × b 个权重和 b 个偏置",
        },
        solutions={
            "en": "count each model's parameters; the first layer has 784 × h + h of the 795 × h + 10",
            "zh": "数出每个模型的参数；795 × h + 10 个参数中，第一层占 784 × h + h 个",
        },
        code="""parameters = {}
for h in (16, 64, 128, 1024):
    parameters[h] = sum(p.numel() for p in helpers.MnistModel(784, h, 10).parameters())""",
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
            "zh": "照着 MnistModel 写，再加一个 nn.Linear，三层分别是 784 → 64、64 → 32、32 → 10，"
            "前两层之后各接 F.relu；然后 deeper = 你的类()",
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


# ------------------------------------------------------------------------------------------------ 04: devices


def _check_moved_once(namespace: dict) -> dict[str, str]:
    import torch

    images, device = answer(namespace, "val_on_device"), torch.device(namespace["DEVICE"])
    n = len(namespace["val_set"])
    if not isinstance(images, torch.Tensor):
        raise NotYet(
            en=f"val_on_device is a {type(images).__name__}; make it one tensor holding every validation image",
            zh=f"val_on_device 是一个 {type(images).__name__}；应该是装着全部验证图像的一个张量",
        )
    if len(images) != n:
        raise NotYet(
            en=f"val_on_device holds {len(images):,} images; the validation set has {n:,}: take them as one batch, "
            "next(iter(DataLoader(val_set, len(val_set))))",
            zh=f"val_on_device 装着 {len(images):,} 张图像；验证集有 {n:,} 张，应该把它们当作一个批量取出，"
            "即 next(iter(DataLoader(val_set, len(val_set))))",
        )
    if images.device.type != device.type:
        raise NotYet(
            en=f"val_on_device is on {images.device.type}; the notebook's device is {device}: move it there once, "
            "with .to(DEVICE)",
            zh=f"val_on_device 在 {images.device.type} 上；本笔记本的设备是 {device}，用 .to(DEVICE) 把它一次移过去",
        )
    return {
        "en": f"{n:,} images in one tensor on {device}; each batch is now a slice, val_on_device[i : i + 256]",
        "zh": f"{n:,} 张图像在 {device} 上的一个张量里；现在每个批量就是一个切片 val_on_device[i : i + 256]",
    }


def _check_dict_to_device(namespace: dict) -> dict[str, str]:
    import torch

    move = answer(namespace, "to_device_with_dicts")
    images, labels = torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)
    cases = {
        "a dict": {"images": images, "labels": labels},
        "a list": [images, labels],
        "a dict of lists": {"x": [images]},
    }
    in_chinese = {"a dict": "字典", "a list": "列表", "a dict of lists": "值为列表的字典"}
    moved = {}
    for what, data in cases.items():
        try:
            moved[what] = move(data, "meta")
        except Exception as err:  # the learner's function: its error is what to fix
            if what == "a dict" and isinstance(err, AttributeError):
                raise NotYet(
                    en="your function does not know dicts yet: it calls .to on the dict itself; add a branch for "
                    "dicts before the last line",
                    zh="你的函数还不能处理字典，它对字典本身调用了 .to；在最后一行之前加一个处理字典的分支",
                ) from None
            if what == "a dict of lists":
                raise NotYet(
                    en=f"dicts and lists move, but a dict whose values are lists fails ({type(err).__name__}: "
                    f"{err}): move each value by calling your function on it, not .to, so that it recurses",
                    zh=f"字典和列表都能移动，但值为列表的字典出错（{type(err).__name__}: {err}）；"
                    "对每个值调用你的函数本身，而不是 .to，让它递归",
                ) from None
            raise NotYet(
                en=f"your function raised {type(err).__name__} ({err}) on {what}; try it on one",
                zh=f"你的函数处理{in_chinese[what]}时出错，引发了 {type(err).__name__}（{err}）",
            ) from None
    if _holds_placeholder(list(moved.values())):  # the exercise cell's outline, its ____ not yet replaced
        raise Unanswered("to_device_with_dicts")
    if not isinstance(moved["a dict"], dict):
        raise NotYet(
            en=f"for a dict your function returned a {type(moved['a dict']).__name__}: build a dict, "
            "{key: ... for key, value in data.items()}",
            zh=f"对于字典，你的函数返回了 {type(moved['a dict']).__name__}；应该构造一个字典，"
            "即 {key: ... for key, value in data.items()}",
        )
    if set(moved["a dict"]) != {"images", "labels"}:
        raise NotYet(
            en=f"the dict came back with the keys {sorted(moved['a dict'])}: keep each key with its moved value",
            zh=f"返回的字典的键是 {sorted(moved['a dict'])}；每个键都要保留，并配上移动后的值",
        )
    if any(v.device.type != "meta" for v in moved["a dict"].values()):
        raise NotYet(
            en="the dict came back with its tensors where they were: move each value, by calling your function on it",
            zh="返回的字典中的张量没有移动；对每个值调用你的函数，把它移过去",
        )
    if not all(t.device.type == "meta" for t in moved["a list"]):
        raise NotYet(
            en="dicts work now, but lists no longer do: keep the lesson's branch for lists and tuples",
            zh="字典可以了，但列表不行了；保留原课程处理列表和元组的那个分支",
        )
    if moved["a dict of lists"]["x"][0].device.type != "meta":
        raise NotYet(
            en="a dict whose values are lists comes back unmoved: call your function on each value, so it recurses",
            zh="值为列表的字典没有被移动；对每个值调用你的函数本身，让它递归",
        )
    return {
        "en": "dicts, lists and dicts of lists all move, key by key",
        "zh": "字典、列表和值为列表的字典都能移动，字典逐个键处理",
    }


register(
    "04_device_transfer",
    Exercise(
        1,
        _check_moved_once,
        hints={
            "en": "one DataLoader batch of len(val_set) images gives every image in one tensor; then .to(DEVICE) once",
            "zh": "一个大小为 len(val_set) 的 DataLoader 批量就是装着全部图像的一个张量；然后只调用一次 .to(DEVICE)",
        },
        solutions={
            "en": "one copy of 10,000 images instead of 40 copies of 256; time both with helpers.synchronize",
            "zh": "一次复制 10,000 张图像，而不是 40 次各复制 256 张；两种做法都用 helpers.synchronize 计时",
        },
        code="""val_images, val_labels = next(iter(DataLoader(val_set, len(val_set))))
val_on_device = val_images.to(DEVICE)""",
    ),
)
register(
    "04_device_transfer",
    Exercise(
        2,
        _check_dict_to_device,
        hints={
            "en": "add a branch before the one for lists: if isinstance(data, dict), return a dict whose values are "
            "moved by the same function",
            "zh": "在处理列表的分支之前加一个分支，在 isinstance(data, dict) 时返回一个字典，其中的值由同一个函数移动",
        },
        solutions={
            "en": "a dict branch that calls the function on every value, so nested containers move too",
            "zh": "增加一个处理字典的分支，对每个值调用函数本身，嵌套的容器也就一起移动了",
        },
        code="""def to_device_with_dicts(data, device):
    if isinstance(data, dict):
        return {key: to_device_with_dicts(value, device) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [to_device_with_dicts(x, device) for x in data]
    return data.to(device, non_blocking=True)""",
    ),
)


# ------------------------------------------------------------------------------------------------ 05: training


def _check_batch_and_lr(namespace: dict) -> dict[str, str]:
    results = answer(namespace, "results")
    wanted = [(size, lr) for size in (32, 128, 512) for lr in (0.05, 0.5)]
    _missing("results", results, wanted)
    accs = {key: _trained(results[key], f"results[{key}]", least=0) for key in wanted}
    if all(accs[(size, 0.05)] == accs[(size, 0.5)] for size in (32, 128, 512)):
        raise NotYet(
            en="at each batch size both learning rates scored the same: give each run its own rate, "
            "[(exercise_epochs, lr)]",
            zh="在每种批量大小下，两个学习率的得分都相同；让每次运行使用自己的学习率，即 [(exercise_epochs, lr)]",
        )
    if all(accs[(32, lr)] == accs[(128, lr)] == accs[(512, lr)] for lr in (0.05, 0.5)):
        raise NotYet(
            en="at each learning rate the three batch sizes scored the same: give each run its own batch size, "
            "train_on_device(model_fn, [(exercise_epochs, lr)], size, exercise_set)",
            zh="在每个学习率下，三种批量大小的得分都相同；让每次运行使用自己的批量大小，"
            "即 train_on_device(model_fn, [(exercise_epochs, lr)], size, exercise_set)",
        )
    best = answer(namespace, "best")
    top = max(accs, key=accs.get)
    if not isinstance(best, (tuple, list)) or tuple(best) != top:
        raise NotYet(
            en=f"best is {best!r}, but your results say {top} did best ({accs[top]:.4f}): best = max(results, "
            "key=results.get)",
            zh=f"best 是 {best!r}，但你的结果表明 {top} 最好（{accs[top]:.4f}）；"
            "应该是 best = max(results, key=results.get)",
        )
    worst = min(accs, key=accs.get)
    return {
        "en": f"batch {top[0]} at lr {top[1]} did best ({accs[top]:.4f}), batch {worst[0]} at lr {worst[1]} worst "
        f"({accs[worst]:.4f}): smaller batches take more steps per epoch, a larger rate bigger ones",
        "zh": f"批量大小 {top[0]}、学习率 {top[1]} 最好（{accs[top]:.4f}），批量大小 {worst[0]}、学习率 {worst[1]} "
        f"最差（{accs[worst]:.4f}）。原因是批量越小，每轮的步数越多；学习率越大，每一步越大",
    }


def _check_hidden_sizes(namespace: dict) -> dict[str, str]:
    import math

    results = answer(namespace, "hidden_results")
    _missing("hidden_results", results, [16, 64, 128])
    accs = {h: _trained(results[h], f"hidden_results[{h}]") for h in sorted(results)}
    if len(set(accs.values())) == 1:
        raise NotYet(
            en=f"every hidden size scored {accs[16]:.4f}, as if all were one model: build each with its own size, "
            "helpers.MnistModel(784, h, 10), not hidden_size",
            zh=f"每种隐藏层大小的得分都是 {accs[16]:.4f}，就像同一个模型一样；每个模型都要用自己的大小来创建，"
            "即 helpers.MnistModel(784, h, 10)，而不是 hidden_size",
        )
    listed = ", ".join(f"{h}: {a:.4f}" for h, a in accs.items())
    listed_zh = "准确率在隐藏单元为 " + "，".join(f"{h} 时是 {a:.4f}" for h, a in accs.items())
    sizes = list(accs)
    per_doubling = [(accs[b] - accs[a]) / math.log2(b / a) for a, b in zip(sizes, sizes[1:])]
    if all(later < earlier for earlier, later in zip(per_doubling, per_doubling[1:])):
        return {
            "en": f"{listed}; each doubling gains less than the one before",
            "zh": f"{listed_zh}；每翻一倍，增益都比上一次小",
        }
    gains = ", ".join(f"{g * 100:+.2f}" for g in per_doubling)
    gains_zh = "、".join(f"{g * 100:+.2f}" for g in per_doubling)
    return {
        "en": f"{listed}; per doubling {gains} points: not steady, and a change of a few tenths of a point is "
        "within what another seed changes (notebook 06)",
        "zh": f"{listed_zh}。每翻一倍分别变化 {gains_zh} 个百分点；变化并不稳定，零点几个百分点的变化"
        "在换一个随机种子带来的波动之内（笔记本 06）",
    }


def _check_deeper_trained(namespace: dict) -> dict[str, str]:
    _check_two_hidden_layers(namespace)
    history = answer(namespace, "deeper_history")
    if not (isinstance(history, list) and history and isinstance(history[-1], dict)):
        raise NotYet(
            en="deeper_history should be the list that fit returns, one dict per epoch",
            zh="deeper_history 应该是 fit 返回的列表，每轮一个字典",
        )
    acc = _trained(history[-1], "deeper_history[-1]['val_acc']")
    return {
        "en": f"784 → 64 → 32 → 10 trained to {acc:.4f} validation accuracy in {len(history)} epochs",
        "zh": f"784 → 64 → 32 → 10 训练 {len(history)} 轮，验证准确率为 {acc:.4f}",
    }


register(
    "05_training",
    Exercise(
        1,
        _check_batch_and_lr,
        hints={
            "en": "loop over the batch sizes and the learning rates; for each pair, train_on_device(model_fn, "
            "[(exercise_epochs, lr)], size, exercise_set) trains a fresh model and returns its history: keep "
            "results[(size, lr)] = its last val_acc; best = max(results, key=results.get)",
            "zh": "对批量大小和学习率做双重循环；对每一对，train_on_device(model_fn, [(exercise_epochs, lr)], size, "
            "exercise_set) 训练一个新模型并返回训练历史，记下 results[(size, lr)] = 最后一轮的 val_acc；"
            "best = max(results, key=results.get)",
        },
        solutions={
            "en": "six fresh models, the same epochs each; compare the accuracies at each batch size",
            "zh": "六个新模型，每个训练同样的轮数；在每种批量大小下比较准确率",
        },
        code="""print(f"{'batch':>5} {'lr':>5} {'val_acc':>8} {'s/epoch':>8}")
results = {}
for size in (32, 128, 512):
    for lr in (0.05, 0.5):
        model_fn = partial(helpers.MnistModel, 784, hidden_size, 10)
        runs = train_on_device(model_fn, [(exercise_epochs, lr)], size, exercise_set)
        results[(size, lr)] = runs[-1]["val_acc"]
        print(f"{size:>5} {lr:>5} {results[(size, lr)]:>8.4f} {sum(h['epoch_s'] for h in runs) / len(runs):>8.3f}")
best = max(results, key=results.get)""",
    ),
)
register(
    "05_training",
    Exercise(
        2,
        _check_hidden_sizes,
        hints={
            "en": "for h in 16, 64, 128, train_on_device(partial(helpers.MnistModel, 784, h, 10), "
            "[(exercise_epochs, lr1)], data=exercise_set) trains one; keep hidden_results[h] = its last val_acc",
            "zh": "对 h = 16、64、128，用 train_on_device(partial(helpers.MnistModel, 784, h, 10), "
            "[(exercise_epochs, lr1)], data=exercise_set) 训练，记下 hidden_results[h] = 最后一轮的 val_acc",
        },
        solutions={
            "en": "a fresh model for each size, 32 (the lesson's) included; more hidden units buy a little accuracy",
            "zh": "每种大小训练一个新模型，包括原课程的 32；隐藏单元越多，准确率略高一些",
        },
        code="""hidden_results = {}
for h in (16, 32, 64, 128):
    runs = train_on_device(partial(helpers.MnistModel, 784, h, 10), [(exercise_epochs, lr1)], data=exercise_set)
    hidden_results[h] = runs[-1]["val_acc"]""",
    ),
)
register(
    "05_training",
    Exercise(
        3,
        _check_deeper_trained,
        hints={
            "en": "notebook 03's exercise built this model (nn.Sequential is shorter); set deeper to one, then "
            "deeper_history = train_on_device(lambda: deeper, [(exercise_epochs, lr1)], data=exercise_set)",
            "zh": "笔记本 03 的练习已经搭过这个模型（用 nn.Sequential 更短）；把 deeper 设为它的一个实例，再让 "
            "deeper_history = train_on_device(lambda: deeper, [(exercise_epochs, lr1)], data=exercise_set)",
        },
        solutions={
            "en": "a model of three linear layers with ReLUs between, trained like the lesson's",
            "zh": "三个线性层、层间接 ReLU 的模型，按原课程的方式训练",
        },
        code="""layers = [nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)]
deeper = nn.Sequential(*layers)
deeper_history = train_on_device(lambda: deeper, [(exercise_epochs, lr1)], data=exercise_set)""",
    ),
)


# ------------------------------------------------------------------------------------------------ 06: results


def _check_fashion_accuracy(namespace: dict) -> dict[str, str]:
    acc = _trained(answer(namespace, "fashion_test_acc"), "fashion_test_acc")
    if acc > 0.94:
        raise NotYet(
            en=f"{acc:.4f} is what the model scores on MNIST's digits: evaluate it on Fashion-MNIST's test set, "
            "helpers.load_fashion_mnist(DATA, train=False)",
            zh=f"{acc:.4f} 是模型在 MNIST 手写数字上的成绩；要在 Fashion-MNIST 的测试集上评估，"
            "测试集用 helpers.load_fashion_mnist(DATA, train=False) 加载",
        )
    return {
        "en": f"{acc:.4f} on Fashion-MNIST's test set, below MNIST's: clothes are harder to tell apart than digits",
        "zh": f"Fashion-MNIST 测试集上的准确率为 {acc:.4f}，低于 MNIST，因为服装比手写数字更难区分",
    }


register(
    "06_plots",
    Exercise(
        1,
        _check_fashion_accuracy,
        hints={
            "en": "the same steps as for MNIST: load, split, make loaders, train a fresh MnistModel with fit, then "
            "helpers.evaluate on the Fashion-MNIST test loader; fashion_test_acc = its 'val_acc'",
            "zh": "步骤与 MNIST 相同，即加载、划分、创建数据加载器、用 fit 训练一个新的 MnistModel，"
            "再在 Fashion-MNIST 的测试数据加载器上调用 helpers.evaluate；fashion_test_acc = 结果中的 'val_acc'",
        },
        solutions={
            "en": "the lesson's schedule on Fashion-MNIST: shirts, pullovers and coats are the classes it mixes up",
            "zh": "在 Fashion-MNIST 上沿用原课程的训练计划，模型最容易混淆的是衬衫、套头衫和外套这几类",
        },
        code="""fashion = helpers.load_fashion_mnist(DATA)
fashion_test = helpers.load_fashion_mnist(DATA, train=False)
fashion_train, fashion_val = helpers.split_dataset(fashion, seed=seed)
loaders = [
    helpers.DeviceResidentLoader.from_dataset(part, size, shuffle=shuffle, device=DEVICE, seed=seed)
    for part, size, shuffle in ((fashion_train, 128, True), (fashion_val, 256, False), (fashion_test, 256, False))
]
helpers.seed_everything(seed)
fashion_model = helpers.to_device(helpers.MnistModel(784, hidden_size, 10), DEVICE)
first = math.ceil(exercise_epochs / 2)
helpers.fit(first, 0.5, fashion_model, *loaders[:2], progress=False, verbose=False)
helpers.fit(exercise_epochs - first, 0.1, fashion_model, *loaders[:2], progress=False, verbose=False)
fashion_test_acc = helpers.evaluate(fashion_model, loaders[2])["val_acc"]""",
    ),
)


# ------------------------------------------------------------------------------------------------ 07, 08


def _check_sure_answers(namespace: dict) -> dict[str, str]:
    answered = answer(namespace, "answered")
    predictions = namespace["predictions"]
    confidence = predictions["probs"].max(dim=1).values
    right = predictions["preds"] == predictions["labels"]
    thresholds = [0.5, 0.9, 0.99]
    _missing("answered", answered, thresholds)
    for t in thresholds:
        sure = confidence >= t
        count, correct = int(sure.sum()), int((right & sure).sum())
        found = answered[t]
        if not (isinstance(found, (tuple, list)) and len(found) == 2):
            raise NotYet(
                en=f"answered[{t}] is {found!r}; it should be a pair of counts: (images answered, of them right)",
                zh=f"answered[{t}] 是 {found!r}；应该是一对计数，即（作答的图像数，其中答对的张数）",
            )
        n, r = found
        if any(isinstance(x, float) and 0 < x < 1 for x in (n, r)):
            raise NotYet(
                en=f"answered[{t}] holds {found!r}: a share, not a count; count the images with .sum(), not .mean()",
                zh=f"answered[{t}] 是 {found!r}，这是比例，不是个数；用 .sum() 而不是 .mean() 来数图像",
            )
        if (n, r) == (correct, count) and n != r:
            raise NotYet(
                en=f"at {t}, the two numbers are swapped: first the images answered ({count:,}), then how many of "
                f"them are right ({correct:,})",
                zh=f"阈值 {t} 时，两个数的顺序反了，应该先是作答的图像数（{count:,}），"
                f"再是其中答对的张数（{correct:,}）",
            )
        if n == len(confidence) - count and n != count:
            raise NotYet(
                en=f"at {t}, {_counted(n)} counts the images below the threshold; keep those with confidence >= {t}",
                zh=f"阈值 {t} 时，{_counted(n)} 数的是低于阈值的图像；应该保留置信度 >= {t} 的图像",
            )
        if n != count:
            raise NotYet(
                en=f"at {t}, the model answers {count:,} images, not {_counted(n)}: the confidence is the largest "
                'probability, predictions["probs"].max(dim=1).values, and an image counts when it is >= the threshold',
                zh=f"阈值 {t} 时，模型作答的图像是 {count:,} 张，不是 {_counted(n)}。置信度是最大的那个概率，"
                '即 predictions["probs"].max(dim=1).values，达到阈值的图像才计入',
            )
        if r == int(right.sum()) and r != correct:
            raise NotYet(
                en=f"at {t}, {_counted(r)} counts the right answers among all the test images; count them among "
                "the images the model is sure of: (right & sure).sum()",
                zh=f"阈值 {t} 时，{_counted(r)} 数的是全部测试图像中答对的；"
                "应该只在模型有把握的图像中数，即 (right & sure).sum()",
            )
        if r != correct:
            raise NotYet(
                en=f"at {t}, {_counted(r)} is not how many of the {count:,} sure answers are right",
                zh=f"阈值 {t} 时，{_counted(r)} 不是 {count:,} 个有把握的答案中答对的张数",
            )
    n, r = answered[0.99]
    return {
        "en": f"at 0.99 the model answers {n / len(confidence):.1%} of the images and gets {r / n:.2%} of them right; "
        "the rest would go to a person",
        "zh": f"阈值 0.99 时，模型对 {n / len(confidence):.1%} 的图像作答，其中 {r / n:.2%} 答对；其余的交给人来判断",
    }


def _check_inside_a_checkpoint(namespace: dict) -> dict[str, str]:
    import torch

    state = torch.load(namespace["demo"] / "run.ckpt", weights_only=True)
    completed = answer(namespace, "completed")
    if completed == len(state):
        raise NotYet(
            en=f"{completed} is the number of keys in the checkpoint; the completed epochs are under the key 'epoch' "
            "(or count the history)",
            zh=f"{completed} 是检查点中键的个数；完成的轮数存在键 'epoch' 下（也可以数训练历史的长度）",
        )
    if completed != state["epoch"]:
        raise NotYet(
            en=f"completed is {completed!r}, but the checkpoint holds {state['epoch']} completed epochs: "
            "state['epoch']",
            zh=f"completed 是 {completed!r}，但检查点记录的是完成了 {state['epoch']} 轮，即 state['epoch']",
        )
    score = answer(namespace, "restored_score")
    if isinstance(score, float) and score < 0.2:
        raise NotYet(
            en=f"restored_score is {score:.4f}, what an untrained model scores: load the checkpoint into the fresh "
            'model, helpers.load_checkpoint(demo / "run.ckpt", model), before you evaluate it',
            zh=f"restored_score 是 {score:.4f}，这是未训练模型的得分；评估之前，先用 "
            'helpers.load_checkpoint(demo / "run.ckpt", model) 把检查点载入这个新模型',
        )
    score = _trained(score, "restored_score")
    last = state["history"][-1]["val_acc"]
    if abs(score - last) > 1e-4:
        raise NotYet(
            en=f"restored_score is {score:.4f} where the history's last epoch says {last:.4f}: load the checkpoint "
            "into the model with helpers.load_checkpoint, then evaluate on the same validation loader, val_fast",
            zh=f"restored_score 是 {score:.4f}，而训练历史中最后一轮的记录是 {last:.4f}；先用 "
            "helpers.load_checkpoint 把检查点载入模型，再在同一个验证数据加载器 val_fast 上评估",
        )
    return {
        "en": f"{completed} completed epochs, and the restored model scores {score:.4f}, what the last one recorded",
        "zh": f"完成了 {completed} 轮，恢复后的模型得分 {score:.4f}，与最后一轮的记录相同",
    }


register(
    "07_error_analysis",
    Exercise(
        1,
        _check_sure_answers,
        hints={
            "en": "sure = confidence >= t picks the images; sure.sum() counts them and (right & sure).sum() the right "
            "ones, with right = predictions['preds'] == predictions['labels']",
            "zh": "sure = confidence >= t 选出图像；sure.sum() 数出它们，(right & sure).sum() 数出其中答对的，"
            "这里 right = predictions['preds'] == predictions['labels']",
        },
        solutions={
            "en": "the more sure the model, the fewer images it answers and the more of them it gets right",
            "zh": "模型越有把握，作答的图像越少，答对的比例越高",
        },
        code="""confidence = predictions["probs"].max(dim=1).values
right = predictions["preds"] == predictions["labels"]
answered = {}
for threshold in (0.5, 0.9, 0.99):
    sure = confidence >= threshold
    answered[threshold] = (int(sure.sum()), int((right & sure).sum()))""",
    ),
)
register(
    "08_checkpoints",
    Exercise(
        1,
        _check_inside_a_checkpoint,
        hints={
            "en": "a checkpoint is a dict: print(list(state)) shows its keys; 'epoch' and 'history' answer the first "
            "part, helpers.load_checkpoint and helpers.evaluate the second",
            "zh": "检查点是一个字典，print(list(state)) 会显示它的键；用 'epoch' 和 'history' 可以回答第一问，"
            "用 helpers.load_checkpoint 和 helpers.evaluate 可以回答第二问",
        },
        solutions={
            "en": "the checkpoint holds everything needed to resume; the restored weights score what was recorded",
            "zh": "检查点保存了继续训练所需的一切；恢复的权重得分与记录完全相同",
        },
        code="""state = torch.load(demo / "run.ckpt", weights_only=True)
completed = state["epoch"]
restored = helpers.to_device(helpers.MnistModel(), DEVICE)
helpers.load_checkpoint(demo / "run.ckpt", restored)
restored_score = helpers.evaluate(restored, val_fast)["val_acc"]""",
    ),
)

# ------------------------------------------------------------------------------------------------ 09-11: speed


register(
    "09_cpu_vs_gpu",
    Exercise(
        1,
        None,
        hints={
            "en": "on each device in devices, train helpers.MnistModel(784, hidden, 10) with helpers.fit on "
            "resident loaders (helpers.DeviceResidentLoader.from_dataset) for hidden = 32, then 1024; each epoch "
            "of fit's history has its 'train_s'",
            "zh": "在 devices 中的每个设备上，用驻留数据加载器（helpers.DeviceResidentLoader.from_dataset）和 "
            "helpers.fit 训练 helpers.MnistModel(784, hidden, 10)，hidden 先取 32，再取 1024；"
            "fit 返回的训练历史中，每轮都有 'train_s'",
        },
        solutions={
            "en": "expect the 32-unit model to gain little on a GPU, since its steps are too small to keep one busy "
            "and its time goes into launching work; the 1,024-unit model, with 32 times the arithmetic, is where "
            "a GPU pulls ahead",
            "zh": "预计 32 个隐藏单元的模型在 GPU 上快不了多少，因为它的每一步太小，不足以让 GPU 忙起来，"
            "时间都花在启动运算上；1,024 个隐藏单元的模型计算量是它的 32 倍，GPU 在这里才领先",
        },
        code="""train_set, val_set = helpers.split_dataset(helpers.load_mnist(DATA), seed=seed)
for hidden in (32, 1024):
    for name in devices:
        train = helpers.DeviceResidentLoader.from_dataset(train_set, 128, shuffle=True, device=name, seed=seed)
        val = helpers.DeviceResidentLoader.from_dataset(val_set, 256, device=name)
        helpers.seed_everything(seed)
        trained = helpers.to_device(helpers.MnistModel(784, hidden, 10), name)
        runs = helpers.fit(exercise_epochs, 0.5, trained, train, val, progress=False, verbose=False)
        print(f"hidden {hidden:>4} on {name:<6}: {min(h['train_s'] for h in runs):.2f} s per epoch of training")""",
    ),
)


def _check_processes(namespace: dict) -> dict[str, str]:
    difference = answer(namespace, "four_difference")
    if getattr(difference, "shape", None) == ():  # a tensor of one number: that number
        difference = difference.item()
    if isinstance(difference, bool) or not isinstance(difference, (int, float)):
        raise NotYet(
            en=f"four_difference is a {type(difference).__name__}; it should be one number, the largest weight "
            'difference: max_difference(torch.load(WORK / "four.pt"), torch.load(WORK / "one.pt"))',
            zh=f"four_difference 是一个 {type(difference).__name__}；应该是一个数，即最大的权重差，用 "
            'max_difference(torch.load(WORK / "four.pt"), torch.load(WORK / "one.pt")) 求出',
        )
    if difference > 1e-4:
        raise NotYet(
            en=f"four_difference is {difference!r}; 4 processes should end within rounding (about 1e-6) of 1 "
            "process: compare the weights of the same dry run, four.pt against one.pt",
            zh=f"four_difference 是 {difference!r}，而 4 个进程与 1 个进程的结果应该只差舍入误差（约 1e-6）；"
            "要比较同一次试运行的权重，即 four.pt 与 one.pt",
        )
    code = answer(namespace, "three_exit_code")
    if hasattr(code, "returncode"):
        raise NotYet(
            en="three_exit_code is the whole finished run; keep only its exit code: .returncode",
            zh="three_exit_code 是整个运行结果；只需要其中的退出码，即 .returncode",
        )
    if isinstance(code, bool) or not isinstance(code, int):
        raise NotYet(
            en=f"three_exit_code is {code!r}; it should be the whole number a command ends with: "
            "subprocess.run(...).returncode",
            zh=f"three_exit_code 是 {code!r}；应该是命令结束时给出的整数，即 subprocess.run(...).returncode",
        )
    if code == 0:
        raise NotYet(
            en="three_exit_code is 0, but 3 processes cannot split a batch of 128: take the return code of the run "
            "with --nproc_per_node=3",
            zh="three_exit_code 是 0，但 3 个进程无法均分大小为 128 的批量；应取 --nproc_per_node=3 那次运行的退出码",
        )
    return {
        "en": f"4 processes end {difference:.1e} from 1, and 3 stop with exit code {code}, as 128 does not split 3 "
        "ways",
        "zh": f"4 个进程与 1 个进程相差 {difference:.1e}；3 个进程以退出码 {code} 停止，因为 128 不能三等分",
    }


register(
    "10_many_gpus",
    Exercise(
        1,
        _check_processes,
        hints={
            "en": "run the dry run with torchrun --nproc_per_node=4 and =3, as above for 2, through "
            "subprocess.run(shlex.split(command)); compare the saved weights with max_difference, and keep the "
            "second run's returncode",
            "zh": "像上面对 2 个进程那样，通过 subprocess.run(shlex.split(command)) 用 torchrun --nproc_per_node=4 "
            "和 =3 各做一次试运行；用 max_difference 比较保存的权重，并记下第二次运行的 returncode",
        },
        solutions={
            "en": "the global batch of 128 splits into 4 × 32, so 4 processes train the same steps as 1; 3 do not "
            "divide 128, and helpers_ddp refuses before training",
            "zh": "全局批量 128 可以分成 4 × 32，所以 4 个进程训练的步骤与 1 个进程相同；3 不能整除 128，helpers_ddp "
            "在训练前就拒绝",
        },
        code="""def torchrun_dry_run(n, save):
    command = f"{torchrun} --standalone --nproc_per_node={n} {dry_run} {save}"
    return subprocess.run(
        shlex.split(command.replace(f"--device {DEVICE}", "--device cpu")), capture_output=True, text=True
    )


torchrun_dry_run(4, WORK / "four.pt")
four_difference = max_difference(torch.load(WORK / "four.pt"), torch.load(WORK / "one.pt"))
three = torchrun_dry_run(3, WORK / "three.pt")
three_exit_code = three.returncode""",
    ),
)


def _check_mixed_precision(namespace: dict) -> dict[str, str]:
    results = answer(namespace, "results")
    if not isinstance(results, dict) or "float32" not in results:
        raise NotYet(
            en="results needs a 'float32' entry: the test accuracy of the same training without autocast",
            zh="results 需要一个 'float32' 项，即不用 autocast、其余相同的训练得到的测试准确率",
        )
    low = [k for k in results if k in ("bfloat16", "float16")]
    if not low:
        raise NotYet(
            en=f"results has {sorted(results)}; add 'bfloat16' (or 'float16' with a GradScaler on an older GPU): the "
            "same training under helpers_speed.mixed_precision",
            zh=f"results 中有 {sorted(results)}；再加上 'bfloat16'（旧 GPU 上用 'float16' 加 GradScaler），"
            "即在 helpers_speed.mixed_precision 下的同样训练",
        )
    for key in ("float32", low[0]):
        if isinstance(results[key], dict) and "test_acc" in results[key]:
            raise NotYet(
                en=f"results[{key!r}] is the whole run that train_lesson returned; keep only its test accuracy: "
                "run['test_acc']",
                zh=f"results[{key!r}] 是 train_lesson 返回的整个运行结果；只需要其中的测试准确率，即 run['test_acc']",
            )
        if isinstance(results[key], (int, float)) and 1 < results[key] <= 100:
            raise NotYet(
                en=f"results[{key!r}] is {results[key]}, a percentage; keep the accuracy as train_lesson gives it, "
                "a number between 0 and 1: run['test_acc']",
                zh=f"results[{key!r}] 是 {results[key]}，这是百分数；请保留 train_lesson 给出的准确率，即 0 到 1 "
                "之间的数 run['test_acc']",
            )
    full, half = _trained(results["float32"], "results['float32']"), _trained(results[low[0]], f"results['{low[0]}']")
    return {
        "en": f"float32 {full:.4f}, {low[0]} {half:.4f}: {abs(full - half) * 100:.2f} points apart",
        "zh": f"float32 为 {full:.4f}，{low[0]} 为 {half:.4f}，两者相差 {abs(full - half) * 100:.2f} 个百分点",
    }


register(
    "11_gpu_speed",
    Exercise(
        1,
        _check_mixed_precision,
        hints={
            "en": "helpers.train_lesson(..., make_step=helpers.lesson_step) and make_step="
            "helpers_speed.mixed_precision('bfloat16'); keep each run's 'test_acc' in results",
            "zh": "分别用 helpers.train_lesson(..., make_step=helpers.lesson_step) 和 make_step="
            "helpers_speed.mixed_precision('bfloat16') 训练；把每次运行的 'test_acc' 记在 results 中",
        },
        solutions={
            "en": "the same schedule with and without autocast: the test accuracies differ by a fraction of a point, "
            "no more than a change of seed moves them (notebook 06)",
            "zh": "同样的训练计划，用与不用 autocast，测试准确率只差零点几个百分点，不超过换一个随机种子带来的波动"
            "（笔记本 06）",
        },
        code="""amp = "float16" if DEVICE.type == "cuda" and not helpers_speed.bf16_native(DEVICE) else "bfloat16"
results = {}
for name, step in (("float32", helpers.lesson_step), (amp, helpers_speed.mixed_precision(amp))):
    with contextlib.redirect_stdout(io.StringIO()):  # the epoch lines: only the results below
        run = helpers.train_lesson(
            DATA, str(DEVICE), epochs=[exercise_epochs] * 2, seed=seed, pipeline="resident", make_step=step
        )
    results[name] = run["test_acc"]
    print(f"{name:>8}: test accuracy {run['test_acc']:.4f}")""",
    ),
)
