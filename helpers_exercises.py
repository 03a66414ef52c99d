"""Exercises that answer in place: `q1.check()` ("Correct", "Not yet" or "Your turn"), `q1.hint()`, `q1.solution()`.

A check reads the learner's objects, never their source, and never raises: what stops it is a "Not yet" naming the
learner's line. A Table checks expected values row by row, each typical mistake with its message; `wrong` does so in
code. Messages are English; notebooks/zh/messages.md translates them, one row per template.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import math
import os
import re
import string
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

LANGUAGES = ("en", "zh")
EDITIONS = Path(__file__).resolve().parent / "notebooks"  # the English notebooks; <lang>/messages.md: the messages
LABELS = {
    "correct": ("Correct", "#2e7d32"),
    "not_yet": ("Not yet", "#c62828"),
    "hint": ("Hint", "#6a1b9a"),
    "solution": ("Solution", "#37474f"),
    "thought": ("A question for thought", "#1565c0"),
    "todo": ("Your turn", "#37474f"),  # a cell whose ____ is still there: no verdict, so nothing in red
}
UNANSWERED = "fill in the ____ above with your answer, then run this cell"
UNDEFINED = "run the cells above first (`{name}` is not defined)"
OPEN_ENDED = "there is no single right answer to check; run q{number}.solution() to compare yours with ours"
# A worked solution as its notebook shows it, folded: a Markdown cell tagged `solution` (答案 N： in Chinese).
SOLUTION = re.compile(
    r"<details><summary>(?:Solution|答案) (\d+)(?:: |：)(.+?)</summary>\n\n```python\n(.+)\n```\n</details>", re.S
)


@functools.cache
def catalogue(lang: str) -> dict[str, str]:
    """English text -> its translation: the rows `| English | translation |` of notebooks/<lang>/messages.md."""
    path = EDITIONS / lang / "messages.md"
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if line.startswith("|") and len(cells) == 2 and not set(cells[0]) <= set("-: ") and cells[0] != "English":
            rows[cells[0]] = cells[1]
    return rows


@functools.cache
def solutions(notebook: str, lang: str = "en") -> list[str]:
    """The code of each worked solution of `notebook` (cells tagged `solution`), in `lang`'s edition, else English."""
    path = EDITIONS / f"{notebook}.ipynb" if lang == "en" else EDITIONS / lang / f"{notebook}.ipynb"
    if lang != "en" and not path.is_file():
        return solutions(notebook)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"] if path.is_file() else []
    sources = ["".join(c["source"]) for c in cells if "solution" in c.get("metadata", {}).get("tags", [])]
    return [match[3] if (match := SOLUTION.fullmatch(source)) else "" for source in sources]


class Said:
    """A message: an English template and its fields, said in any language (its row of the edition's catalogue)."""

    def __init__(self, template: str, **fields: Any):
        self.template, self.fields = template, fields

    def __call__(self, lang: str = "en") -> str:
        text = self.template if lang == "en" else catalogue(lang).get(self.template.strip(), self.template)  # a row
        # is stripped: " (the setting device)", which follows a name in English, has no blank before it in Chinese
        if not self.fields:
            return text
        fields = {name: v(lang) if isinstance(v, Said) else v for name, v in self.fields.items()}
        try:
            return text.format(**fields)
        except Exception:  # a value that cannot be shown as the template asks: said by its kind, never an exception
            kinds = {name: Shown(f"a {_kind(value)}") for name, value in fields.items() if not isinstance(value, str)}
            return text.format(**(fields | kinds))

    def __str__(self) -> str:  # an exception raised with a Said reads in English, unless `speaking` translates it
        return self()


@functools.cache
def _pattern(template: str) -> re.Pattern | None:
    """A regular expression that matches what `template` formats to, each field a named group (None: too loose)."""
    parts, names = [], set()
    for literal, name, _spec, conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is not None:
            if not name.isidentifier():
                return None
            value = "'.*?'|\".*?\"" if conversion == "r" else ".+?"  # a repr is quoted: where it ends is plain
            parts.append(f"(?P={name})" if name in names else f"(?P<{name}>{value})")
            names.add(name)
    literal_chars = sum(len(literal) for literal, *_ in string.Formatter().parse(template))
    return re.compile("".join(parts), re.S) if literal_chars >= 8 else None


def heard(text: str, lang: str) -> str:
    """`text`, an English message that a catalogue row's template made, in `lang` (its fields too); else as it is."""
    if lang == "en":
        return text
    rows = catalogue(lang)
    for english, translated in rows.items():
        match = (pattern := _pattern(english)) and pattern.fullmatch(text)
        if match:
            fields = {}
            for name, value in match.groupdict().items():  # a row is stripped: " (the setting device)", which
                said = heard(value.strip(), lang)  # follows a name in English, has no blank before it in Chinese
                fields[name] = said if said != value.strip() else value
            return "".join(literal + (fields[name] if name is not None else "")
                           for literal, name, *_ in string.Formatter().parse(translated))  # fmt: skip
    return text


def speaking(start: Callable) -> Callable:
    """`start`, whose errors raised with a Said message come out in its `lang` (or SERIES_LANG's)."""

    @functools.wraps(start)
    def wrapper(*args: Any, lang: str | None = None, **kwargs: Any) -> Any:
        try:
            return start(*args, lang=lang, **kwargs)
        except Exception as err:
            said, lang = err.args[0] if err.args else None, lang or os.environ.get("SERIES_LANG") or "en"
            if lang == "en" or not isinstance(said, (Said, str)):
                raise
            translated = said(lang) if isinstance(said, Said) else heard(said, lang)
            if translated == said:
                raise
            raise type(err)(translated) from None

    return wrapper


class Joined(Said):
    """Items a message lists, joined as its language writes a list: ", " in English, "，" in Chinese."""

    def __init__(self, items: Any):
        super().__init__("")
        self.items = list(items)

    def __call__(self, lang: str = "en") -> str:
        return ("，" if lang == "zh" else ", ").join(self.items)


class Shown:
    """A value as a message shows it: its text, whatever format or index the template asks of it."""

    def __init__(self, text: str):
        self.text = text

    def __format__(self, spec: str) -> str:
        return self.text

    __repr__ = __str__ = lambda self: self.text

    def __getitem__(self, key: Any) -> Shown:
        return self


class NotYet(Exception):
    """Raised by a check: the answer is not right yet; the message says what the check found and what to look at."""

    def __init__(self, template: str, **fields: Any):
        self.said = Said(template, **fields)
        super().__init__(self.said())


class Unanswered(Exception):
    """Raised by `answer()`: the learner has not replaced ____ yet."""


@dataclasses.dataclass
class Exercise:
    """An exercise: its check of the learner's objects, a hint, its worked solution's idea (its code: the notebook)."""

    check_answer: Callable[[dict], Said] | None  # namespace -> the "Correct" message; raises NotYet. None: open-ended
    nudge: str  # what hint() says
    idea: str  # the worked solution in a sentence
    notebook: str
    number: int  # 1, 2, ... in the notebook's order
    namespace: dict = dataclasses.field(default_factory=dict, repr=False)
    lang: str = "en"
    passed: bool = False  # what the last check() found; check() returns nothing, so a cell shows no Out[]

    def check(self) -> None:
        """Check the learner's answer; print one line that starts with "Correct" or "Not yet" (and keep `passed`)."""
        self.passed = False
        if self.check_answer is None:
            return self._show("thought", Said(OPEN_ENDED, number=self.number))
        try:
            found = self.check_answer(self.namespace)
        except Unanswered:
            return self._show("todo", Said(UNANSWERED))
        except NotYet as wrong:
            return self._show("not_yet", wrong.said)
        except Exception as err:  # a check never raises: what stopped it is the learner's to read
            return self._show("not_yet", raised(err, Said("the check")).said)
        self.passed = True
        self._show("correct", found)

    def hint(self) -> None:
        """Print a nudge towards the answer."""
        self._show("hint", Said(self.nudge))

    def solution(self) -> None:
        """Print the worked solution: what it does, then its code (the notebook's folded cell "Solution N")."""
        codes = {lang: dict(enumerate(solutions(self.notebook, lang), 1)).get(self.number, "") for lang in LANGUAGES}
        self._show("solution", Said(self.idea), codes)

    def _show(self, label: str, said: Said, codes: dict[str, str] | None = None) -> None:
        """The line `label: text` (and the code below it) in this exercise's language, as text and as coloured HTML."""
        outputs = {}
        for lang in LANGUAGES:
            code = (codes or {}).get(lang, "")
            word, colour, colon = Said(LABELS[label][0])(lang), LABELS[label][1], "：" if lang == "zh" else ": "
            rich = f'<p><b style="color:{colour}">{html.escape(word)}</b>{colon}{html.escape(said(lang))}</p>'
            outputs[lang] = {"text/plain": f"{word}{colon}{said(lang)}" + (f"\n\n{code}" if code else ""),
                             "text/html": rich + (f"<pre>{html.escape(code)}</pre>" if code else "")}  # fmt: skip
        say(outputs, self.lang)


def say(outputs: dict[str, dict[str, str]], lang: str) -> None:
    """Show `outputs[lang]` (mime type -> text) in a notebook, every language in the metadata; else print its text."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(outputs.get(lang, outputs["en"]), raw=True, metadata={"helpers_exercises": outputs})
    else:
        print(outputs.get(lang, outputs["en"])["text/plain"])


REGISTRY: dict[str, list[Exercise]] = {}


def exercise(notebook: str, nudge: str, idea: str) -> Callable:
    """A decorator: the check it decorates (None: an open-ended exercise) is `notebook`'s next exercise."""

    def registered(check: Callable[[dict], Said] | None) -> Callable | None:
        listed = REGISTRY.setdefault(notebook, [])
        listed.append(Exercise(check, nudge, idea, notebook, len(listed) + 1))
        return check

    return registered


def exercises(notebook: str, namespace: dict, lang: str | None = None) -> list[Exercise]:
    """The exercises of `notebook` (e.g. "05_training"), bound to the notebook's globals, in `lang`."""
    given = lang or os.environ.get("SERIES_LANG") or "en"
    if given not in LANGUAGES:
        source = f"lang={lang!r}" if lang else f"the environment variable SERIES_LANG is {given!r}"
        raise ValueError(f"{source}: choose one of {', '.join(LANGUAGES)}" + ("" if lang else ", or unset it"))
    lang = given
    if notebook not in REGISTRY:
        raise ValueError(f"no exercises for {notebook!r}: choose one of {', '.join(sorted(REGISTRY))}")
    return [dataclasses.replace(e, namespace=namespace, lang=lang) for e in REGISTRY[notebook]]


# ------------------------------------------------------------------------------------------------ reading answers


def need(namespace: dict, name: str) -> Any:
    """The notebook's object called `name`; NotYet while the cells that define it have not run."""
    wrong(name not in namespace, UNDEFINED, name=name)
    return namespace[name]


def answer(namespace: dict, name: str) -> Any:
    """The learner's object called `name`; Unanswered while it still holds a ____."""
    if _holds_placeholder(value := need(namespace, name)):
        raise Unanswered(name)
    return value


def _holds_placeholder(value: Any) -> bool:
    """Whether `value` is, or holds, a blank: the set-up cell's `____ = ()`, an empty tuple."""
    inside = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return (isinstance(value, tuple) and not value) or any(_holds_placeholder(v) for v in inside)


def _kind(value: Any) -> str:
    return type(value).__name__


def wrong(shows: bool, template: str, **fields: Any) -> None:
    """NotYet saying `template` when the answer `shows` the mistake it names: a check's row, as code."""
    if shows:
        raise NotYet(template, **fields)


def raised(err: Exception, call: str | Said) -> NotYet:
    """A NotYet naming what `call` raised, and the last line of the learner's own code (no module's) it came from."""
    error = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}".rstrip(": ")
    series, libraries = str(Path(__file__).parent), ("site-packages", "dist-packages", "<frozen")
    mine = [f for f in traceback.extract_tb(err.__traceback__) if str(Path(f.filename).parent) != series
            and not f.filename.startswith(sys.base_prefix) and not any(p in f.filename for p in libraries)]  # fmt: skip
    if line := (mine[-1].line or "").strip() if mine else "":
        return NotYet("{call} raised {error}, at the line `{line}`", call=call, error=error, line=line)
    return NotYet("{call} raised {error}", call=call, error=error)


def run(call: str, learners: Callable, *args: Any) -> Any:
    """What the learner's function returns for `args`; NotYet naming what it raised, and where."""
    try:
        return learners(*args)
    except Exception as err:
        raise raised(err, call) from None


def function(namespace: dict, name: str) -> Callable:
    """The learner's function called `name`; NotYet when it is something else."""
    found = answer(namespace, name)
    wrong(not callable(found), "{name} is a {kind}, not a function: define it with def", name=name, kind=_kind(found))
    return found


def number(value: Any, name: str) -> float | int:
    """`value` as a finite Python number (a one-number tensor read out); NotYet when it is none."""
    wrong(getattr(getattr(value, "device", None), "type", None) == "meta", "{name} is on the meta device: it has a "
          "shape but no value; compute it on a real device", name=name)  # fmt: skip
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        value = value.item()
    wrong(isinstance(value, bool) or not isinstance(value, (int, float)), "{name} is {found!r}, a {kind}; it should "
          "be one number", name=name, found=value, kind=_kind(value))  # fmt: skip
    wrong(not math.isfinite(value), "{name} is {found}, not a finite number: look at how your cell computes it",
          name=name, found=value)  # fmt: skip
    return value


def count(value: Any, name: str) -> int:
    """`value` as a whole number; NotYet when it is not one."""
    value = number(value, name)
    wrong(not float(value).is_integer(), "{name} is {found}; it should be a whole number, a count", name=name,
          found=value)  # fmt: skip
    return int(value)


def accuracy(value: Any, name: str, trained: bool = False) -> float:
    """An accuracy as fit and evaluate give it, in [0, 1]; with `trained`, NotYet when it is what guessing scores."""
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        raise NotYet("{name} is a whole history, {epochs} epochs; keep the last epoch's accuracy: "
                     "history[-1]['val_acc']", name=name, epochs=len(value))  # fmt: skip
    value = number(value["val_acc"] if isinstance(value, dict) and "val_acc" in value else value, name)
    wrong(1 < value <= 100, "{name} is {found}, a percentage; keep the accuracy as fit gives it, a number between 0 "
          "and 1", name=name, found=value)  # fmt: skip
    wrong(not 0 <= value <= 1, "{name} is {found}: it should be an accuracy, a number between 0 and 1 "
          "(history[-1]['val_acc'])", name=name, found=value)  # fmt: skip
    wrong(trained and value < 0.2, "{name} is {found:.4f}, about what guessing scores (0.1): did the model train "
          "(fit) before it was evaluated?", name=name, found=value)  # fmt: skip
    return float(value)


def entries(found: Any, name: str, keys: Sequence) -> dict:
    """`found` as a dict with an entry for each of `keys`; NotYet naming the first one missing."""
    wrong(not isinstance(found, dict), "{name} is a {kind}; it should be a dict with the keys {keys}", name=name,
          kind=_kind(found), keys=list(keys))  # fmt: skip
    for key in keys:
        wrong(key not in found, "{name} has no entry for {key!r}; it needs one for each of {keys}", name=name,
              key=key, keys=list(keys))  # fmt: skip
    return found


def pair(message: str) -> Callable[[Any, str], tuple]:
    """A checker of one entry that should be a pair of numbers; `message` says what pair, when it is not one."""

    def checked(value: Any, name: str) -> tuple:
        wrong(not (isinstance(value, (tuple, list)) and len(value) == 2), message, name=name, found=value)
        return tuple(int(x) if float(x).is_integer() else x for x in (number(x, name) for x in value))

    return checked


# ------------------------------------------------------------------------------------------------ answers as rows

# A typical mistake: does the value found show it (found, the check's context), and the message that names it.
Mistake = tuple[Callable[[Any, SimpleNamespace], bool], str]


@dataclasses.dataclass
class Table:
    """A dict answer checked entry by entry: each value against its expected one, then each typical mistake."""

    name: str
    keys: tuple
    entry: Callable[[Any, str], Any]  # one value's type and shape checked; returns it as compared
    expected: Callable[[Any, SimpleNamespace], Any]  # (key, context) -> the right value
    mistakes: tuple[Mistake, ...]
    otherwise: str  # when the value is neither right nor a known mistake
    context: Callable[[dict], dict] = lambda namespace: {}  # what the check reads from the notebook

    def __call__(self, namespace: dict) -> tuple[dict, SimpleNamespace]:
        """The values found, by key, and the context; NotYet at the first that is not right."""
        found = entries(answer(namespace, self.name), self.name, self.keys)
        context, values = SimpleNamespace(**self.context(namespace)), {}
        for key in self.keys:
            name = f"{self.name}[{key!r}]"
            values[key] = value = self.entry(found[key], name)
            context.key, context.expected, context.name = key, self.expected(key, context), name
            if value != context.expected:
                message = next((m for shows, m in self.mistakes if shows(value, context)), self.otherwise)
                raise NotYet(message, found=value, **vars(context))
        return values, context


# ------------------------------------------------------------------------------------------------ 02: the data

BATCHES = Table(
    "batches", (32, 128, 512),
    entry=pair("{name} is {found!r}; it should be a pair: (number of batches, size of the last batch)"),
    expected=lambda size, c: (-(-c.n // size), c.n - (c.n - 1) // size * size),  # every batch full but the last
    context=lambda namespace: {"n": len(need(namespace, "train_set"))},
    mistakes=(
        (lambda f, c: not all(isinstance(x, int) for x in f), "{name} holds {found}; both are counts, whole numbers"),
        (lambda f, c: f[0] in (-(-(c.n + 10_000) // c.key), (c.n + 10_000) // c.key),
         "at batch size {key} you counted from 60,000 images; the training set is the {n:,} left after the "
         "validation split: len(train_set)"),
        (lambda f, c: f[0] == c.n // c.key,
         "at batch size {key}, {found[0]:,} leaves out the last, smaller batch: an epoch uses every image, so "
         "round the division up (len(DataLoader(train_set, size)) counts it for you)"),
        (lambda f, c: f[0] != c.expected[0],
         "at batch size {key}, {found[0]:,} is not the number of batches; len(DataLoader(train_set, {key})) "
         "gives it"),
    ),
    otherwise="at batch size {key}, the last batch does not hold {found[1]:,} images: it holds what the full "
    "batches of {key} leave of the {n:,}",
)  # fmt: skip


@exercise("02_data_loading",
          nudge="an epoch uses every image once: len(DataLoader(train_set, size)) batches, all full but the last",
          idea="count the batches with len() of a DataLoader; the last holds what the full batches leave; then time "
          "drawing the images at each size")  # fmt: skip
def _check_batch_counts(namespace: dict) -> Said:
    listed = Joined(f"{size} → ({n}, {last})" for size, (n, last) in BATCHES(namespace)[0].items())
    return Said("{listed}. Bigger batches: fewer, larger steps per epoch", listed=listed)


@exercise("02_data_loading",
          nudge="helpers.load_fashion_mnist(DATA) returns a dataset like MNIST(...); give it to DataLoader with a "
          "batch size and shuffle=True",
          idea="load the dataset, wrap it in a shuffled DataLoader, show one batch")  # fmt: skip
def _check_fashion_loader(namespace: dict) -> Said:
    from torch.utils.data import DataLoader, RandomSampler

    loader = answer(namespace, "fashion_loader")
    wrong(not isinstance(loader, DataLoader), "fashion_loader is a {kind}; make it a DataLoader over Fashion-MNIST, "
          "as the lesson makes train_loader", kind=_kind(loader))  # fmt: skip
    dataset = getattr(loader.dataset, "dataset", loader.dataset)
    classes = list(getattr(dataset, "classes", []))
    wrong("T-shirt/top" not in classes, "fashion_loader's images are not Fashion-MNIST's (its classes are "
          "{classes}...); load them with helpers.load_fashion_mnist(DATA)", classes=classes[:3])  # fmt: skip
    wrong(getattr(dataset, "train", True) is False, "fashion_loader holds Fashion-MNIST's test images; the training "
          "images are helpers.load_fashion_mnist(DATA)")  # fmt: skip
    wrong(not isinstance(loader.sampler, RandomSampler), "fashion_loader does not shuffle: pass shuffle=True, so "
          "that each batch mixes the ten kinds of clothing")  # fmt: skip
    return Said("a shuffled DataLoader over Fashion-MNIST's {n:,} images, batches of {size}",
                n=len(loader.dataset), size=loader.batch_size)  # fmt: skip


# ------------------------------------------------------------------------------------------------ 03: the model

PARAMETERS = Table(
    "parameters", (16, 64, 128, 1024),
    entry=count,
    expected=lambda h, c: 795 * h + 10,
    mistakes=(
        (lambda f, c: f == 794 * c.key,
         "hidden {key}: {found:,} counts the weights alone; each nn.Linear(a, b) also has b biases"),
        (lambda f, c: f == 785 * c.key,
         "hidden {key}: {found:,} is the first layer alone; add the second, nn.Linear({key}, 10)"),
        (lambda f, c: f == 25_450,
         "hidden {key}: {found:,} is the lesson's model, with 32 hidden units; build each with its own size, "
         "helpers.MnistModel(784, h, 10)"),
    ),
    otherwise="hidden {key}: {found:,} is not the model's count; add up p.numel() over model.parameters()",
)  # fmt: skip


@exercise("03_model",
          nudge="make helpers.MnistModel(784, h, 10) for each h and add up p.numel() over its parameters(); by hand, "
          "nn.Linear(a, b) has a × b weights and b biases",
          idea="count each model's parameters; the first layer has 784 × h + h of the 795 × h + 10")  # fmt: skip
def _check_parameter_counts(namespace: dict) -> Said:
    listed = Joined(f"{h} → {n:,}" for h, n in PARAMETERS(namespace)[0].items())
    return Said("{listed}; at every size about 99% of them are in the first layer, 784 × h weights", listed=listed)


def _scores(model: Any, images: Any, name: str) -> Any:
    """The model's scores for `images`: NotYet if it fails (advising to flatten only where that is what fails)."""
    import torch

    call = f"{name}(images)"
    try:
        with torch.no_grad():
            scores = model(images)
    except Exception as err:
        try:
            with torch.no_grad():
                flat_works = isinstance(model(images.flatten(1)), torch.Tensor)
        except Exception:
            flat_works = False
        wrong(flat_works, "{call} fails on images of shape [8, 1, 28, 28] ({error}) and works on them flattened: "
              "flatten them first, xb.flatten(1) or xb.view(xb.size(0), -1)", call=call,
              error=f"{type(err).__name__}: {err}".splitlines()[0])  # fmt: skip
        raise raised(err, call) from None
    wrong(scores is None, "{call} returns None: end forward with return, and the scores", call=call)
    if isinstance(scores, (tuple, list)):
        raise NotYet("{call} returns a {kind} of {length}; return only the scores, one tensor of shape [8, 10]",
                     call=call, kind=_kind(scores), length=len(scores))  # fmt: skip
    wrong(not isinstance(scores, torch.Tensor), "{call} returns a {kind}; it should return the scores, a tensor",
          call=call, kind=_kind(scores))  # fmt: skip
    wrong(list(scores.shape) != [8, 10], "{call} returns shape {shape} for 8 images; it should return [8, 10], ten "
          "scores per image", call=call, shape=list(scores.shape))  # fmt: skip
    wrong(not torch.isfinite(scores).all(), "{call} returns scores that are not finite (nan or inf): look at how "
          "forward computes them", call=call)  # fmt: skip
    return scores


def _architecture(model: Any, name: str) -> int:
    """NotYet unless `model` is 784 → 64 → 32 → 10 with a ReLU after each hidden layer; its parameter count."""
    import torch
    import torch.nn as nn

    if isinstance(model, type) and issubclass(model, nn.Module):
        raise NotYet("{name} is the class {cls} itself; make a model from it: {cls}()", name=name, cls=model.__name__)
    wrong(model is None, "{name} is None: a function that makes the model must end with return, to give it back",
          name=name)  # fmt: skip
    wrong(not isinstance(model, nn.Module), "{name} is a {kind}, not a model: define a class that inherits nn.Module "
          "(or chain layers with nn.Sequential), then make one", name=name, kind=_kind(model))  # fmt: skip
    wrong(any(p.is_meta for p in model.parameters()), "{name} is on the meta device: it has shapes but no weights, so "
          "nothing can be computed with it; make it again on a real device", name=name)  # fmt: skip
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    sizes = [(m.in_features, m.out_features) for m in linears]
    arrow = " → ".join(str(n) for n in [sizes[0][0], *(out for _, out in sizes)]) if sizes else "no nn.Linear"
    wrong(sizes != [(784, 64), (64, 32), (32, 10)], "{name}'s linear layers go {arrow} (hidden layers: {hidden}); the "
          "exercise asks for 784 → 64 → 32 → 10: three nn.Linear layers, each one's output size the next one's input "
          "size", name=name, arrow=arrow, hidden=max(len(sizes) - 1, 0))  # fmt: skip
    device = next(model.parameters()).device  # the learner's model may be on the GPU already
    images = torch.rand(8, 1, 28, 28, generator=torch.Generator().manual_seed(0)).to(device)
    a, b = _scores(model, images, name), _scores(model, images.roll(1, 0), name)
    both, zero = _scores(model, images + images.roll(1, 0), name), _scores(model, torch.zeros_like(images), name)
    wrong(torch.allclose(a + b - zero, both, atol=1e-5), "{name} is linear: without a ReLU between them, three linear "
          "layers add up to one; apply F.relu (or nn.ReLU) to the output of each hidden layer", name=name)  # fmt: skip
    seen = []
    hooks = [m.register_forward_hook(lambda m, i, o: seen.append((i[0], o))) for m in linears]
    try:
        _scores(model, images, name)
    finally:
        for hook in hooks:
            hook.remove()
    for n, (received, _) in enumerate(seen[1:], start=2):
        wrong((received < 0).any(), "linear layer {n} receives negative values: there is no ReLU after layer "
              "{before}; apply F.relu (or nn.ReLU) to the output of every hidden layer", n=n, before=n - 1)  # fmt: skip
    wrong((seen[-1][1] < 0).any() and not (a < 0).any(), "{name}'s scores are never negative: a ReLU after the last "
          "layer clips them; return the last layer's output as it is", name=name)  # fmt: skip
    return sum(p.numel() for p in model.parameters())


@exercise("03_model",
          nudge="three nn.Linear layers, 784 → 64, 64 → 32, 32 → 10; in forward, F.relu after the first two, then "
          "return the last one's output; then deeper = TwoHiddenLayers()",
          idea="three linear layers, a ReLU after each of the first two")  # fmt: skip
def _check_two_hidden_layers(namespace: dict) -> Said:
    total = _architecture(answer(namespace, "deeper"), "deeper")
    return Said("784 → 64 → 32 → 10 with a ReLU after each hidden layer, {count:,} parameters", count=total)


# ------------------------------------------------------------------------------------------------ 04: devices


def _seconds(function: Callable, device: Any) -> float:
    """Seconds `function` takes, the device's queued work included."""
    import torch

    wait = {"cuda": torch.cuda.synchronize, "mps": getattr(torch.mps, "synchronize", None)}.get(device.type)
    t0 = time.perf_counter()
    function()
    if wait:
        wait()
    return time.perf_counter() - t0


@exercise("04_device_transfer",
          nudge="val_images.to(DEVICE) makes the one copy; a batch is then a slice, val_on_device[i : i + 256]",
          idea="one copy of 10,000 images instead of 40 copies of 256; the check times a pass each way")  # fmt: skip
def _check_moved_once(namespace: dict) -> Said:
    import torch

    images = answer(namespace, "val_on_device")
    device, val_set = torch.device(need(namespace, "DEVICE")), need(namespace, "val_set")
    first = val_set[0][0]
    n, shape = len(val_set), [len(val_set), *first.shape]
    wrong(not isinstance(images, torch.Tensor), "val_on_device is a {kind}; make it one tensor holding every "
          "validation image: val_images.to(DEVICE)", kind=_kind(images))  # fmt: skip
    found = list(images.shape)
    wrong(found == [n] or not images.is_floating_point(), "val_on_device has shape {found} and holds {dtype}: those "
          "are the labels; move the images, val_images, of shape {shape}", found=found, dtype=images.dtype,
          shape=shape)  # fmt: skip
    wrong(found != shape, "val_on_device has shape {found}; every validation image in one tensor has shape {shape}: "
          "take them as one batch, next(iter(DataLoader(val_set, len(val_set))))", found=found,
          shape=shape)  # fmt: skip
    wrong(images.device.type != device.type, "val_on_device is on {found}; the notebook's device is {device}: move "
          "it there once, with .to(DEVICE)", found=images.device.type, device=device)  # fmt: skip
    wrong(not torch.equal(images[0].cpu(), first), "val_on_device[0] is not the first validation image, "
          "val_set[0][0]: gather them in order, without shuffling")  # fmt: skip
    sliced = run("one_pass_sliced()", answer(namespace, "one_pass_sliced"))
    if _holds_placeholder(sliced):
        raise Unanswered("one_pass_sliced")
    per_batch = run("one_pass_per_batch()", need(namespace, "one_pass_per_batch"))
    wrong(any(torch.as_tensor(x).numel() != 1 for x in sliced), "one_pass_sliced() gives batches, not one number per "
          "batch: end each with .sum(), as one_pass_per_batch() does")  # fmt: skip
    sums = [torch.stack([torch.as_tensor(x).float().cpu().reshape(()) for x in sums]) for sums in (per_batch, sliced)]
    wrong(len(sums[0]) != len(sums[1]), "one_pass_sliced() gives {got} batches, the DataLoader {want}: slice 256 "
          "images at a time, val_on_device[i : i + 256]", got=len(sums[1]), want=len(sums[0]))  # fmt: skip
    wrong(not torch.allclose(*sums, rtol=1e-4), "one_pass_sliced() gives {got} numbers, as many as the DataLoader's "
          "batches, but not their sums: each should be the .sum() of 256 images from val_on_device, starting at i",
          got=len(sums[1]))  # fmt: skip
    fields = {"n": n, "device": device, "copied": 1e3 * _seconds(namespace["one_pass_per_batch"], device)}
    fields["sliced"] = 1e3 * _seconds(namespace["one_pass_sliced"], device)
    if device.type == "cpu":
        return Said("{n:,} images in one tensor, and its slices hold the DataLoader's batches (a pass copying each "
                    "batch took {copied:.1f} ms, a pass over slices {sliced:.1f} ms). On a CPU .to(DEVICE) copies "
                    "nothing, so this checked the tensor and the slices only; on a GPU the check also finds the images "
                    "in GPU memory, and the times show what one copy saves", **fields)  # fmt: skip
    return Said("{n:,} images in one tensor on {device}, and its slices hold the DataLoader's batches: a pass copying "
                "each batch took {copied:.1f} ms, a pass over slices {sliced:.1f} ms", **fields)  # fmt: skip


# What an error on each container means, by what it says: (the container, the error's words, what to do).
DICT_ERRORS = (
    ("a_dict", "'dict' object has no attribute 'to'", "your function does not know dicts yet: it calls .to on the "
     "dict itself; add a branch for dicts before the last line"),
    ("a_list", "'list' object has no attribute 'to'", "dicts work now, but lists no longer do: keep the lesson's "
     "branch for lists and tuples"),
    ("a_dict_of_lists", "'list' object has no attribute 'to'", "dicts and lists move, but a dict whose values are "
     "lists fails: move each value by calling your function on it, not .to, so that it recurses"),
)  # fmt: skip


@exercise("04_device_transfer",
          nudge="in the dict branch, return a dict whose values are moved by the same function: "
          "{key: to_device_with_dicts(value, device) for key, value in data.items()}",
          idea="a dict branch that calls the function on every value, so nested containers move too")  # fmt: skip
def _check_dict_to_device(namespace: dict) -> Said:
    import torch

    move, meta = function(namespace, "to_device_with_dicts"), torch.device("meta")
    images, labels = torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)
    cases = {"a_dict": {"images": images, "labels": labels}, "a_list": [images, labels]}
    cases["a_dict_of_lists"] = {"x": [images]}
    moved = {}
    for case, data in cases.items():
        call = f"to_device_with_dicts({case}, 'meta')"
        try:
            moved[case] = move(data, "meta")
        except Exception as err:
            known = next((m for c, says, m in DICT_ERRORS if c == case and says in str(err)), None)
            raise (NotYet(known) if known else raised(err, call)) from None
        wrong(moved[case] is None, "{call} returned None: does each branch of your function end with return?",
              call=call)  # fmt: skip
        listed = case == "a_list"
        wrong(not isinstance(moved[case], (list, tuple) if listed else dict) and not _holds_placeholder(moved[case]),
              "{call} returned a {kind}; it should build a {want}", call=call, kind=_kind(moved[case]),
              want="list" if listed else "dict")  # fmt: skip
    if _holds_placeholder(list(moved.values())):  # the exercise cell's outline, its ____ not yet replaced
        raise Unanswered("to_device_with_dicts")
    wrong(set(moved["a_dict"]) != {"images", "labels"}, "the dict came back with the keys {keys}: keep each key with "
          "its moved value", keys=sorted(moved["a_dict"]))  # fmt: skip
    wrong(any(getattr(v, "device", None) != meta for v in moved["a_dict"].values()), "the dict came back with its "
          "tensors where they were: move each value, by calling your function on it")  # fmt: skip
    wrong(not all(getattr(t, "device", None) == meta for t in moved["a_list"]), "dicts work now, but lists no longer "
          "do: keep the lesson's branch for lists and tuples")  # fmt: skip
    inner = moved["a_dict_of_lists"].get("x")
    wrong(not (isinstance(inner, (list, tuple)) and inner and getattr(inner[0], "device", None) == meta), "a dict "
          "whose values are lists comes back with {found!r} for its list: call your function on each value, so that "
          "it recurses", found=inner)  # fmt: skip
    return Said("dicts, lists and dicts of lists all move, key by key")


# ------------------------------------------------------------------------------------------------ 05: training


def history(value: Any, name: str) -> list:
    """`value` as a history, as fit returns it: a list with a result dict per epoch; NotYet when it is none."""
    if isinstance(value, dict) and "val_acc" in value:
        raise NotYet("{name} is one epoch's result; keep the whole history train_on_device returns, a list with a "
                     "dict per epoch", name=name)  # fmt: skip
    wrong(not (isinstance(value, list) and value and all(isinstance(h, dict) and "val_acc" in h for h in value)),
          "{name} is {found!r}; it should be the history train_on_device returns, a list with a dict per epoch",
          name=name, found=value)  # fmt: skip
    return value


@exercise("05_training",
          nudge="train_on_device(model_fn, [(exercise_epochs, lr)], size, exercise_set): the phases are a list of "
          "(epochs, learning rate) pairs, here one, then the batch size and the images",
          idea="six fresh models, the same epochs each: compare the accuracies, and the seconds per epoch at each "
          "batch size")  # fmt: skip
def _check_batch_and_lr(namespace: dict) -> Said:
    keys = [(size, lr) for size in (32, 128, 512) for lr in (0.05, 0.5)]
    found = entries(answer(namespace, "histories"), "histories", keys)
    runs = {key: history(found[key], f"histories[{key!r}]") for key in keys}
    epochs = namespace.get("exercise_epochs")
    for key, run_history in runs.items():
        wrong(isinstance(epochs, int) and len(run_history) != epochs, "histories[{key!r}] has {found} epochs; each "
              "run trains exercise_epochs ({epochs}) epochs: [(exercise_epochs, lr)]", key=key,
              found=len(run_history), epochs=epochs)  # fmt: skip
    accs = {key: accuracy(run[-1], f"histories[{key!r}][-1]['val_acc']") for key, run in runs.items()}
    wrong(all(accs[(size, 0.05)] == accs[(size, 0.5)] for size in (32, 128, 512)), "at each batch size both learning "
          "rates scored the same: give each run its own rate, [(exercise_epochs, lr)]")  # fmt: skip
    wrong(all(accs[(32, lr)] == accs[(128, lr)] == accs[(512, lr)] for lr in (0.05, 0.5)), "at each learning rate "
          "the three batch sizes scored the same: give each run its own batch size, train_on_device(model_fn, "
          "[(exercise_epochs, lr)], size, exercise_set)")  # fmt: skip
    top, worst = max(accs, key=accs.get), min(accs, key=accs.get)
    said = {"top": top, "best": accs[top], "worst": worst, "least": accs[worst]}
    per_size = {}  # seconds per epoch at each batch size, over both rates
    for size in (32, 128, 512):
        times = [h.get("epoch_s") or 0 for lr in (0.05, 0.5) for h in runs[(size, lr)]]
        per_size[size] = sum(times) / len(times)
    fast, slow = min(per_size, key=per_size.get), max(per_size, key=per_size.get)
    return Said("batch {top[0]} at lr {top[1]} did best ({best:.4f}), batch {worst[0]} at lr {worst[1]} worst "
                "({least:.4f}); per epoch, batch {fast} was fastest ({fast_s:.2f} s) and batch {slow} slowest "
                "({slow_s:.2f} s): smaller batches take more steps per epoch, a larger rate bigger ones", fast=fast,
                fast_s=per_size[fast], slow=slow, slow_s=per_size[slow], **said)  # fmt: skip


@exercise("05_training",
          nudge="a fresh model with h hidden units comes from partial(helpers.MnistModel, 784, h, 10); give it to "
          "train_on_device with [(exercise_epochs, 0.5)] and data=exercise_set, and keep the history's last val_acc",
          idea="a fresh model for each size, 32 (the lesson's) included; more hidden units buy a little "
          "accuracy")  # fmt: skip
def _check_hidden_sizes(namespace: dict) -> Said:
    found = entries(answer(namespace, "hidden_results"), "hidden_results", [16, 32, 64, 128])
    accs = {h: accuracy(found[h], f"hidden_results[{h}]", trained=True) for h in (16, 32, 64, 128)}
    wrong(len(set(accs.values())) == 1, "every hidden size scored {acc:.4f}, as if all were one model: build each "
          "with its own size, helpers.MnistModel(784, h, 10), not hidden_size", acc=accs[16])  # fmt: skip
    per_doubling = [(accs[b] - accs[a]) / math.log2(b / a) * 100 for a, b in zip(accs, list(accs)[1:])]
    listed = Joined(f"{h} → {a:.4f}" for h, a in accs.items())
    if all(later < earlier for earlier, later in zip(per_doubling, per_doubling[1:])):
        return Said("{listed}; each doubling gains less than the one before", listed=listed)
    return Said("{listed}; per doubling {gains} points: not steady, and a change of a few tenths of a point is "
                "within what another seed changes (notebook 06)", listed=listed,
                gains=Joined(f"{g:+.2f}" for g in per_doubling))  # fmt: skip


@exercise("05_training",
          nudge="make_deeper returns nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), ...); "
          "train_on_device calls it for a fresh model: train_on_device(make_deeper, [(exercise_epochs, 0.5)], "
          "data=exercise_set)",
          idea="a model of three linear layers with ReLUs between, trained like the lesson's")  # fmt: skip
def _check_deeper_trained(namespace: dict) -> Said:
    model = run("make_deeper()", function(namespace, "make_deeper"))
    if _holds_placeholder(model):
        raise Unanswered("make_deeper")
    _architecture(model, "make_deeper()")
    history = answer(namespace, "deeper_history")
    wrong(not (isinstance(history, list) and history and isinstance(history[-1], dict)), "deeper_history is "
          "{found!r}; it should be the history train_on_device returns, a list with a dict per epoch",
          found=history)  # fmt: skip
    acc = accuracy(history[-1], "deeper_history[-1]['val_acc']", trained=True)
    return Said("784 → 64 → 32 → 10 trained to {acc:.4f} validation accuracy in {epochs} epochs", acc=acc,
                epochs=len(history))  # fmt: skip


# ------------------------------------------------------------------------------------------------ 06-08


@exercise("06_plots",
          nudge="the lesson's schedule is two phases, [(epochs, 0.5), (epochs, 0.1)], exercise_epochs in all; then "
          "helpers.evaluate(fashion_model, test_fast)['val_acc']",
          idea="the lesson's schedule on Fashion-MNIST: clothes are harder to tell apart than digits")  # fmt: skip
def _check_fashion_accuracy(namespace: dict) -> Said:
    phases = answer(namespace, "phases")
    wrong(not (isinstance(phases, (list, tuple)) and phases and all(isinstance(p, (list, tuple)) and len(p) == 2
          for p in phases)), "phases is {found!r}; it should be the schedule as a list of (epochs, learning rate) "
          "pairs, such as [(3, 0.5), (2, 0.1)]", found=phases)  # fmt: skip
    epochs = [count(n, "an epoch count in phases") for n, _ in phases]
    rates = [number(lr, "a learning rate in phases") for _, lr in phases]
    wrong(rates != [0.5, 0.1], "phases has the learning rates {rates}; the lesson's schedule has two phases, first "
          "at 0.5, then at 0.1", rates=rates)  # fmt: skip
    total = namespace.get("exercise_epochs")
    wrong(isinstance(total, int) and sum(epochs) != total, "phases trains {found} epochs in all; the exercise asks "
          "for exercise_epochs ({total}): the first half at 0.5, the rest at 0.1", found=sum(epochs),
          total=total)  # fmt: skip
    acc = accuracy(answer(namespace, "fashion_test_acc"), "fashion_test_acc", trained=True)
    wrong(acc > 0.94, "fashion_test_acc is {found:.4f}, what the model scores on MNIST's digits: evaluate it on "
          "Fashion-MNIST's test set, test_fast", found=acc)  # fmt: skip
    if all(name in namespace for name in ("helpers", "fashion_model", "test_fast", "val_fast")):
        scored = {part: namespace["helpers"].evaluate(namespace["fashion_model"], namespace[part])["val_acc"]
                  for part in ("test_fast", "val_fast")}  # fmt: skip
        wrong(abs(acc - scored["val_fast"]) < 1e-6 < abs(acc - scored["test_fast"]), "fashion_test_acc is {found:.4f}, "
              "the accuracy on the validation set, val_fast: evaluate the model on the test set, test_fast",
              found=acc)  # fmt: skip
    return Said("{acc:.4f} on Fashion-MNIST's test set, below MNIST's: clothes are harder to tell apart than digits",
                acc=acc)  # fmt: skip


def _sure(namespace: dict) -> dict:
    """What 07's check compares with: each test image's confidence, and whether the model got it right."""
    predictions = need(namespace, "predictions")
    parts = ("labels", "preds", "probs")
    wrong(not isinstance(predictions, dict) or not all(hasattr(predictions.get(k), "shape") for k in parts)
          or predictions["probs"].dim() != 2, "predictions is no longer what helpers.predict_loader returned (it is "
          "a {kind}): a cell gave the name to something else. Run again the cell that makes it, predictions = "
          "helpers.predict_loader(model, test_loader), or give your own a name of its own",
          kind=_kind(predictions))  # fmt: skip
    right = predictions["preds"] == predictions["labels"]
    return {"confidence": predictions["probs"].max(dim=1).values, "right": right, "all_right": int(right.sum())}


SURE = Table(
    "answered", (0.5, 0.9, 0.99),
    entry=pair("{name} is {found!r}; it should be a pair of counts: (images answered, how many of them right)"),
    expected=lambda t, c: (int((c.confidence >= t).sum()), int((c.right & (c.confidence >= t)).sum())),
    context=_sure,
    mistakes=(
        (lambda f, c: any(isinstance(x, float) and 0 < x < 1 for x in f),
         "{name} holds {found!r}: a share, not a count; count the images with .sum(), not .mean()"),
        (lambda f, c: not all(isinstance(x, int) for x in f), "{name} holds {found}; both are counts, whole numbers"),
        (lambda f, c: f == c.expected[::-1],
         "at {key}, the two numbers are swapped: first the images answered ({expected[0]:,}), then how many of "
         "them are right ({expected[1]:,})"),
        (lambda f, c: f[0] == len(c.confidence) - c.expected[0],
         "at {key}, {found[0]:,} counts the images below the threshold; keep those with confidence >= {key}"),
        (lambda f, c: f[0] != c.expected[0],
         "at {key}, the model answers {expected[0]:,} images, not {found[0]:,}: the confidence is the largest "
         'probability, predictions["probs"].max(dim=1).values, and an image counts when it is >= the threshold'),
        (lambda f, c: f[1] == c.all_right,
         "at {key}, {found[1]:,} counts the right answers among all the test images; count them among the images "
         "the model is sure of: (right & sure).sum()"),
        (lambda f, c: f[1] == c.expected[0] - c.expected[1],
         "at {key}, {found[1]:,} counts the wrong answers among the sure ones; count the right ones: "
         "(right & sure).sum()"),
    ),
    otherwise="at {key}, {found[1]:,} is not how many of the {expected[0]:,} sure answers are right",
)  # fmt: skip


@exercise("07_error_analysis",
          nudge="sure = confidence >= threshold picks the images; sure.sum() counts them, and (right & sure).sum() "
          "the right ones",
          idea="the more sure the model, the fewer images it answers and the more of them it gets right")  # fmt: skip
def _check_sure_answers(namespace: dict) -> Said:
    answered, context = SURE(namespace)
    n, r = answered[0.99]
    return Said("at 0.99 the model answers {share:.1%} of the images and gets {right:.2%} of them right; the rest "
                "would go to a person", share=n / len(context.confidence), right=r / max(n, 1))  # fmt: skip


@exercise("08_checkpoints",
          nudge="a checkpoint is a dict: print(list(state)) shows its keys, and 'epoch' and 'history' answer the "
          "first part; helpers.load_checkpoint and helpers.evaluate the second",
          idea="the checkpoint holds everything needed to resume; the restored weights score what was "
          "recorded")  # fmt: skip
def _check_inside_a_checkpoint(namespace: dict) -> Said:
    import torch

    path = need(namespace, "demo") / "run.ckpt"
    wrong(not path.is_file(), "{path} is not there yet: run the demo's cells above, which train and save it", path=path)
    state = torch.load(path, weights_only=True)
    completed, epochs = count(answer(namespace, "completed"), "completed"), state["epoch"]
    wrong(completed == len(state) != epochs, "{found} is the number of keys in the checkpoint; the completed epochs "
          "are under the key 'epoch' (or count the history)", found=completed)  # fmt: skip
    wrong(completed != epochs, "completed is {found}, but the checkpoint holds {epochs} completed epochs: "
          "state['epoch']", found=completed, epochs=epochs)  # fmt: skip
    score, last = accuracy(answer(namespace, "restored_score"), "restored_score"), state["history"][-1]["val_acc"]
    wrong(score < 0.2, "restored_score is {found:.4f}, what an untrained model scores: load the checkpoint into the "
          'fresh model, helpers.load_checkpoint(demo / "run.ckpt", restored), before you evaluate it',
          found=score)  # fmt: skip
    wrong(abs(score - last) > 1e-4, "restored_score is {found:.4f} where the history's last epoch says {last:.4f}: "
          "load the checkpoint into the model with helpers.load_checkpoint, then evaluate on the same validation "
          "loader, val_fast", found=score, last=last)  # fmt: skip
    return Said("{completed} completed epochs, and the restored model scores {score:.4f}, what the last one recorded",
                completed=completed, score=score)  # fmt: skip


# ------------------------------------------------------------------------------------------------ 09-11: speed


@exercise("09_cpu_vs_gpu",
          nudge="histories[key] is fit's history of one run, and each of its epochs has its 'train_s': the fastest "
          "is min(h['train_s'] for h in history)",
          idea="expect the 32-unit model to gain little on a GPU, since its steps are too small to keep one busy and "
          "its time goes into launching work; the 1,024-unit model, with 32 times the arithmetic, is where a GPU "
          "pulls ahead")  # fmt: skip
def _check_cpu_against_gpu(namespace: dict) -> Said:
    devices = [str(d) for d in need(namespace, "devices")]
    histories = need(namespace, "histories")
    keys = [(hidden, name) for hidden in (32, 1024) for name in devices]
    found = entries(answer(namespace, "seconds"), "seconds", keys)
    times = {}
    for key in keys:
        name, value = f"seconds[{key!r}]", found[key]
        wrong(isinstance(value, list) and bool(value) and isinstance(value[-1], dict), "{name} is a whole history, "
              "{epochs} epochs; keep one number, its fastest epoch of training: min(h['train_s'] for h in ...)",
              name=name, epochs=len(value) if isinstance(value, list) else 0)  # fmt: skip
        wrong(isinstance(value, dict) and "train_s" in value, "{name} is one epoch's result; keep only its seconds "
              "of training: ['train_s']", name=name)  # fmt: skip
        times[key] = number(value, name)
        wrong(times[key] <= 0, "{name} is {found}; a time is more than 0 seconds", name=name, found=times[key])
        epochs = [h["train_s"] for h in histories[key]]
        wrong(times[key] == epochs[-1] != min(epochs), "{name} is the last epoch's {found:.3f} s; the fastest took "
              "{fastest:.3f} s: min(h['train_s'] for h in history)", name=name, found=times[key],
              fastest=min(epochs))  # fmt: skip
        wrong(times[key] != min(epochs), "{name} is {found}, which is no epoch's seconds of training in "
              "histories[{key!r}]: keep its fastest, min(h['train_s'] for h in history)", name=name,
              found=times[key], key=key)  # fmt: skip
    cpu = devices[0]
    ratio = times[(1024, cpu)] / times[(32, cpu)]
    if len(devices) == 1:
        return Said("on the CPU the 1,024-unit model takes {ratio:.1f} times as long per epoch as the 32-unit one, "
                    "for 32 times the arithmetic; run this notebook on a GPU runtime to compare the two devices",
                    ratio=ratio)  # fmt: skip
    gpu = devices[1]
    small, big = (times[(h, cpu)] / times[(h, gpu)] for h in (32, 1024))
    return Said("the CPU's time divided by {gpu}'s: {small:.1f} for the 32-unit model, {big:.1f} for the 1,024-unit "
                "one; the more arithmetic per step, the more a GPU gains", gpu=gpu, small=small, big=big)  # fmt: skip


@exercise("10_many_gpus",
          nudge="keep the lines of Path('train_ddp.py').read_text() that do not hold set_epoch, joined with newlines; "
          "Path('no_set_epoch.py').write_text(without); then max_difference(torch.load('no_set_epoch.pt'), "
          "torch.load('short_one.pt'))",
          idea="without set_epoch, DistributedSampler shuffles every epoch as in the first, while one process "
          "reshuffles: from the second epoch the two train on other batches, and their weights part by far more "
          "than rounding")  # fmt: skip
def _check_set_epoch(namespace: dict) -> Said:
    text = answer(namespace, "without")
    wrong(not isinstance(text, str), "without is {found!r}; it should be the new script's text, a str: "
          "Path('train_ddp.py').read_text() without one line", found=text)  # fmt: skip
    wrong("set_epoch" in text, "without still calls set_epoch: leave out the line that holds it")  # fmt: skip
    wrong("DistributedSampler(" not in text or "DDP(" not in text, "without has lost more than the set_epoch line: "
          "keep every other line of train_ddp.py")  # fmt: skip
    difference = number(answer(namespace, "no_set_epoch_difference"), "no_set_epoch_difference")
    wrong(difference < 0, "no_set_epoch_difference is {found}; a difference of weights is never negative: take the "
          "largest absolute one, with max_difference", found=difference)  # fmt: skip
    wrong(difference <= 1e-5, "no_set_epoch_difference is {found:.1e}, rounding only: compare the weights of the run "
          "without set_epoch, no_set_epoch.pt (run no_set_epoch.py, not train_ddp.py), with short_one.pt",
          found=difference)  # fmt: skip
    return Said("without set_epoch the weights end {difference:.1e} from one process's, far more than rounding: every "
                "epoch repeated the first epoch's order", difference=difference)  # fmt: skip


@exercise("11_gpu_speed",
          nudge="scaler = torch.amp.GradScaler(DEVICE.type, enabled=dtype == torch.float16); the phases: "
          "for lr in (0.5, 0.1); then results[name] = accuracy(model, test)",
          idea="float16 alone needs loss scaling; bfloat16 keeps float32's range, so its scaler is disabled, a no-op "
          "that lets one step serve every precision. The same schedule with and without autocast ends a fraction of a "
          "point apart, no more than a change of seed moves it (notebook 06)")  # fmt: skip
def _check_mixed_precision(namespace: dict) -> Said:
    import torch

    scaler, dtype = answer(namespace, "scaler"), need(namespace, "exercise_dtype")
    wrong(not isinstance(scaler, torch.amp.GradScaler), "scaler is a {kind}; make it with "
          "torch.amp.GradScaler(DEVICE.type, enabled=...)", kind=_kind(scaler))  # fmt: skip
    amp = str(dtype).removeprefix("torch.")
    wrong(scaler.is_enabled() and dtype != torch.float16, "the {amp} run's scaler is enabled, but {amp} keeps "
          "float32's range and needs no loss scaling: enabled=dtype == torch.float16", amp=amp)  # fmt: skip
    wrong(not scaler.is_enabled() and dtype == torch.float16, "the float16 run's scaler is disabled, but without "
          "loss scaling float16's small gradients round to zero: enabled=dtype == torch.float16")  # fmt: skip
    results = answer(namespace, "results")
    entries(results, "results", ["float32", amp])
    for key in ("float32", amp):
        wrong(isinstance(results[key], dict) and "val_acc" in results[key], "results[{key!r}] is a whole evaluation; "
              "keep only the accuracy, a number: accuracy(model, test)", key=key)  # fmt: skip
    full, half = (accuracy(results[key], f"results[{key!r}]", trained=True) for key in ("float32", amp))
    apart = abs(full - half) * 100
    wrong(apart > 2, "float32 {full:.4f} and {amp} {half:.4f} are {apart:.2f} points apart, more than rounding moves "
          "them: train each from a fresh model (helpers.seed_everything(seed) first) with the same schedule, the "
          "lesson's two phases", full=full, amp=amp, half=half, apart=apart)  # fmt: skip
    return Said("float32 {full:.4f}, {amp} {half:.4f}: {apart:.2f} points apart", full=full, amp=amp, half=half,
                apart=apart)  # fmt: skip
