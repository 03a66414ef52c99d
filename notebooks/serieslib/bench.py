"""MAINTAINERS.md's measured block, rewritten from a benchmark file (`make bench`, then `make bench-report`)."""

from __future__ import annotations

import json
from pathlib import Path

README_BENCH = ("<!-- bench:begin -->", "<!-- bench:end -->")


def read_bench(path: str | Path) -> dict:
    """The benchmark file, or an error that names it and says how to write it."""
    try:
        found = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist: run `make bench` first (or pass --file)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a benchmark file ({err}): run `make bench` to write it again") from None
    if not isinstance(found, dict) or not {"devices", "date", "torch"} <= found.keys():
        raise ValueError(f"{path} is not a benchmark file (no devices, date or torch): run `make bench` to write it")
    return found


def bench_report(path: str | Path = "runs/bench/bench.json") -> str:
    """The benchmark file as Markdown: where it was measured, then each table."""
    from helpers_speed import format_pipelines, format_speed

    found = read_bench(path)
    devices = "; ".join(found["devices"].values())
    parts = [f"Measured with `make bench` on {found['date']}, PyTorch {found['torch']}: {devices}."]
    if found.get("pipelines"):
        parts += ["**Input pipelines** (the lesson's model, lr 0.5):", format_pipelines(found["pipelines"])]
    if found.get("speed"):
        parts += ["**Speed features** (steady-state epochs; the first epoch apart):", format_speed(found["speed"])]
    return "\n\n".join(parts)


def write_bench_report(readme: str | Path, path: str | Path = "runs/bench/bench.json") -> None:
    """Replace the measured block of `readme` (between README_BENCH's markers) with `bench_report(path)`."""
    if not Path(readme).is_file():
        raise FileNotFoundError(f"{readme} is not a file: give the Markdown file whose figures to replace")
    text = Path(readme).read_text()
    begin, end = README_BENCH
    if begin not in text or end not in text:
        raise ValueError(f"{readme} has no block to replace: put {begin} and {end} where the figures go")
    report = bench_report(path)
    head, rest = text.split(begin, 1)
    Path(readme).write_text(f"{head}{begin}\n{report}\n{end}{rest.split(end, 1)[1]}")
