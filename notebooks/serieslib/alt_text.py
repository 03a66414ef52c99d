"""Alt text for the website: each figure a notebook shows carries it in its output's metadata
({"alt": {"en": ..., "zh": ...}}), which website/ reads; Colab and Jupyter ignore it.

Only the tooling that executes notebooks for commit (`series.py refresh` and `run`) loads this into the kernel, through
a start-up file of an IPython folder of its own (`kernel_env`); a learner's kernel never runs it. A drawing function
of helpers that knows what its figure shows says so (`fig.drawn`, read by `DRAWN`); any other figure is described
from what it draws. This file imports nothing of the series: the kernel loads it by its path.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

STARTUP = """\
def _alt_text_formatter():  # the series' tooling: alt text for the website, in each figure's output metadata
    import importlib.util

    spec = importlib.util.spec_from_file_location("series_alt_text", {path!r})
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.register(get_ipython())


_alt_text_formatter()
del _alt_text_formatter
"""


def register(shell: Any) -> None:
    """Make `shell` put each matplotlib figure's alt text into the metadata of its display output."""
    shell.display_formatter.mimebundle_formatter.for_type_by_name(
        "matplotlib.figure", "Figure", lambda fig: ({}, {"alt": alt_text(fig)})
    )


@functools.cache
def kernel_env() -> dict[str, str]:
    """Environment for kernels that execute notebooks for commit: an IPYTHONDIR whose start-up file calls `register`."""
    folder = Path(tempfile.mkdtemp(prefix="series-ipython-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    startup = folder / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "50-alt-text.py").write_text(STARTUP.format(path=str(Path(__file__).resolve())))
    return {"IPYTHONDIR": str(folder)}


MOST_NAMED = 8  # a figure's bars, labels or images named in its alt text; the rest counted


def _more(count: int) -> tuple[str, str]:
    """ "; and 3 more" (and its Chinese) for `count` things of which MOST_NAMED are named."""
    left = count - MOST_NAMED
    return (f"; and {left} more", f"；另有 {left} 项") if left > 0 else ("", "")


def _n(value: float) -> str:
    """A number as alt text says it: three significant digits, thousands grouped."""
    value = 0.0 if abs(value) < 1e-6 else value  # float32's -4.5e-08 for a zero
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _curve(line: Any, xlabel: str) -> tuple[str, str]:
    """How one line of a chart goes: from its first point to its last, flat at first or at the end."""
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    mid, span = len(y) // 2, float(y.max() - y.min())
    up = y[-1] > y[0]
    at = lambda i: f"{_n(y[i])} at {xlabel} {_n(x[i])}"  # noqa: E731
    zh_at = lambda i: f"{xlabel} {_n(x[i])} 时的 {_n(y[i])}"  # noqa: E731
    name = "" if line.get_label().startswith("_") else line.get_label()
    en, zh = (f"{name}: ", f"{name}：") if name else ("", "")
    moved = np.flatnonzero(np.abs(y - y[0]) > 0.02 * span)
    if len(moved) and moved[0] > len(y) // 4:  # flat, then a rise or a fall (ReLU)
        k = moved[0] - 1
        en += f"stays at {at(0)} until {xlabel} {_n(x[k])}, then {'rises' if up else 'falls'} to {at(-1)}"
        return en, zh + f"从 {zh_at(0)} 保持不变，直到 {xlabel} {_n(x[k])}，然后{'升' if up else '降'}到 {zh_at(-1)}"
    flat = len(y) >= 4 and abs(y[-1] - y[mid]) < 0.25 * abs(y[mid] - y[0])
    en += f"{'rises' if up else 'falls'} from {at(0)} to {at(-1)}" + (", levelling off" if flat else "")
    return en, zh + f"从 {zh_at(0)} {'升' if up else '降'}到 {zh_at(-1)}" + ("，后半段趋于平缓" if flat else "")


def _axes_alt(ax: Any) -> tuple[str, str]:
    """What one set of axes draws: its curves, bars, image, or (a diagram) its labels."""
    from matplotlib.container import BarContainer

    title = ax.get_title()
    en, zh = (f"“{title}”: ", f"“{title}”：") if title else ("", "")
    xlabel, ylabel = ax.get_xlabel() or "x", ax.get_ylabel() or "y"
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) > 1]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if ax.get_images():
        image = np.asarray(ax.get_images()[0].get_array())
        h, w = image.shape[:2]
        if image.ndim == 2 and ax.get_images()[0].get_cmap().name == "gray":
            return en + f"a {h} × {w} greyscale image", zh + f"一张 {h} × {w} 的灰度图像"
        if image.ndim == 3:
            return en + f"an image of {w} × {h} pixels", zh + f"一张 {w} × {h} 像素的图像"
        low, high = _n(image.min()), _n(image.max())
        return (
            en + f"a {h} × {w} heat map, {ylabel} down and {xlabel} across, values from {low} to {high}",
            zh + f"一张 {h} × {w} 的热图，纵向为 {ylabel}，横向为 {xlabel}，数值从 {low} 到 {high}",
        )
    if lines and ax.axison:
        curves = [_curve(line, xlabel) for line in lines]
        return (
            en + f"{ylabel} against {xlabel}; " + "; ".join(c[0] for c in curves),
            zh + f"{ylabel} 随 {xlabel} 的变化；" + "；".join(c[1] for c in curves),
        )
    if bars:
        horizontal = bars[0].orientation == "horizontal"
        names = [t.get_text() for t in (ax.get_yticklabels() if horizontal else ax.get_xticklabels())]
        sizes = [b.get_width() if horizontal else b.get_height() for c in bars for b in c]
        unit = xlabel if horizontal else ylabel
        pairs = [f"{name} {_n(size)}" for name, size in zip(names, sizes)]
        more = _more(len(pairs))
        return (
            en + f"a bar chart of {unit}: {'; '.join(pairs[:MOST_NAMED])}" + more[0],
            zh + f"{unit} 的条形图：{'；'.join(pairs[:MOST_NAMED])}" + more[1],
        )
    labels = [", ".join(t.get_text().split("\n")) for t in ax.texts if t.get_text().strip()]
    more = _more(len(labels))
    return (
        en + "a diagram labelled " + "; ".join(labels[:MOST_NAMED]) + more[0],
        zh + "示意图，标注依次为：" + "；".join(labels[:MOST_NAMED]) + more[1],
    )


def _batch(n: int, h: int, w: int, nrow: int) -> dict[str, str]:
    return {
        "en": f"One batch as a grid: {n} images of {h} × {w} pixels, {nrow} a row",
        "zh": f"一个批次排成的网格：{n} 张 {h} × {w} 像素的图像，每行 {nrow} 张",
    }


def _network(sizes: list[int], activation: str, shown: int) -> dict[str, str]:
    chain = " → ".join(f"{n:,}" for n in sizes)
    layers = [f"Linear({a}, {b})" for a, b in zip(sizes, sizes[1:])]
    return {
        "en": f"Diagram of the network {chain}: columns of circles for {sizes[0]:,} inputs, "
        + "".join(f"{n:,} hidden units (then {activation}), " for n in sizes[1:-1])
        + f"{sizes[-1]:,} outputs; every circle joined by a line (a weight) to every circle of the next column, "
        f"the layers {', '.join(layers)}; at most {shown} circles a column, three dots for the rest",
        "zh": f"网络 {chain} 的示意图：一列列圆圈，依次是 {sizes[0]:,} 个输入、"
        + "".join(f"{n:,} 个隐藏单元（之后是 {activation}）、" for n in sizes[1:-1])
        + f"{sizes[-1]:,} 个输出；每个圆圈都用一条线（一个权重）连到下一列的每个圆圈，"
        f"各层依次是 {'、'.join(layers)}；每列最多画 {shown} 个圆圈，其余以三个点代表",
    }


def _confusion(cm: list[list[int]], names: list[str]) -> dict[str, str]:
    counts = np.asarray(cm)
    n, right, total = len(counts), int(np.trace(counts)), int(counts.sum())
    off = counts - np.diag(np.diag(counts))
    i, j = divmod(int(off.argmax()), n)
    return {
        "en": f"Confusion matrix, {n} × {n}: true label down, predicted label across, each cell its count. "
        f"The diagonal (right) holds {right:,} of the {total:,} images; the largest count off it is "
        f"{int(off[i, j])}, true {names[i]} predicted as {names[j]}",
        "zh": f"混淆矩阵，{n} × {n}：纵向为真实标签，横向为预测标签，每格是其计数。"
        f"对角线（预测正确）共 {right:,} 张，总数 {total:,} 张；对角线外最大的计数是 "
        f"{int(off[i, j])}：真实为 {names[i]}，被预测成 {names[j]}",
    }


# The figures whose drawing function says what they show: helpers sets fig.drawn = (kind, what it drew).
DRAWN = {"batch": _batch, "network": _network, "confusion": _confusion}


def alt_text(fig: Any) -> dict[str, str]:
    """A figure's alt text in English and Chinese: what its drawing function says it drew, else what its axes draw."""
    if hasattr(fig, "drawn"):
        kind, drawn = fig.drawn
        return DRAWN[kind](**drawn)
    shown = [ax for ax in fig.axes if ax.get_visible() and (ax.axison or ax.get_images() or ax.texts)]
    top = fig._suptitle.get_text() if fig._suptitle else ""
    if len(shown) > 2 and all(ax.get_images() for ax in shown):
        titles = [ax.get_title() for ax in shown if ax.get_title()]
        h, w = np.asarray(shown[0].get_images()[0].get_array()).shape[:2]
        more = _more(len(titles))
        return {
            "en": f"“{top}”: a grid of {len(shown)} images of {h} × {w} pixels, titled "
            + "; ".join(titles[:MOST_NAMED])
            + more[0],
            "zh": f"“{top}”：{len(shown)} 张 {h} × {w} 像素的图像组成的网格，标题依次为 "
            + "；".join(titles[:MOST_NAMED])
            + more[1],
        }
    parts = [_axes_alt(ax) for ax in shown]
    return {"en": "; ".join(p[0] for p in parts), "zh": "；".join(p[1] for p in parts)}
