"""Timing that notebooks 09-11 share: configurations taking turns, their epochs' median and spread, Markdown tables."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any


def take_turns(
    turns: Mapping[Hashable, Callable[[], Any]], rounds: int, alternate: bool = False, before: Callable | None = None
) -> dict[Hashable, list[float]]:
    """Call each of `turns` once a round (reversed every other with `alternate`; `before` untimed); seconds by turn."""
    seconds: dict[Hashable, list[float]] = {name: [] for name in turns}
    for i in range(rounds):
        for name in list(turns)[::-1] if alternate and i % 2 == 0 else turns:
            if before:
                before()
            t0 = time.perf_counter()
            turns[name]()
            seconds[name].append(time.perf_counter() - t0)
    return seconds


def epoch_times(seconds: Sequence[float]) -> dict[str, float]:
    """The median of epochs that took turns with other configurations, and their spread (the fastest and slowest)."""
    return {"epoch_s": statistics.median(seconds), "epoch_s_min": min(seconds), "epoch_s_max": max(seconds)}


def markdown_table(rows: Sequence[dict], columns: dict[str, Callable[[dict], str]]) -> str:
    """`rows` as a Markdown table: one column per header, its cell written by the function beside it."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for cell in columns.values()) + " |" for row in rows]
    return "\n".join(lines)
