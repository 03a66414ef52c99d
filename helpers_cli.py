"""The command line of the series: benchmarks and a speedrun, as in PyTorch's MNIST example.

python helpers_cli.py bench                  # the input pipelines and speed features side by side
python helpers_cli.py bench --ddp            # 1 process against 2 data-parallel ones (notebook 10)
python helpers_cli.py --dry-run speedrun     # a quick check (speedrun --dry-run works too)
python helpers_cli.py --help
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from helpers import (
    LESSON,
    TrainingDiverged,
    available_devices,
    check_hparams,
    check_seed,
    describe_device,
    get_default_device,
)
from helpers_data import MnistUnavailable, check_writable, is_plain_path
from helpers_ddp import benchmark_ddp
from helpers_speed import (
    SPEED_MODELS,
    benchmark_pipelines,
    benchmark_speed,
    speedrun,
)

DRY_RUN_IMAGES = 1024  # --dry-run: this many training images, one epoch a phase


def parser() -> argparse.ArgumentParser:
    """The options of every command; `--dry-run` may go before or after the command."""
    parser = argparse.ArgumentParser(prog="helpers_cli.py", description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data", help="data root; MNIST goes to DATA/MNIST/raw (default: data)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 or mps (default: the best available)")
    parser.add_argument("--seed", type=int, default=LESSON.seed, help=f"random seed (default: {LESSON.seed})")
    parser.add_argument("--dry-run", action="store_true", help=f"a quick check on {DRY_RUN_IMAGES:,} images, one epoch")
    parser.add_argument("--debug", action="store_true", help="show an error's full traceback (or HELPERS_DEBUG=1)")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="seconds per epoch of each input pipeline on each device")
    bench.add_argument("--epochs", type=int, default=3, help="epochs per configuration; the median is reported")
    bench.add_argument("--devices", nargs="+", default=None, help="devices to compare (default: all present)")
    bench.add_argument("--out", default="runs/bench", help="folder for bench.json and bench.png")
    bench.add_argument("--ddp", action="store_true", help="1 process against --nprocs data-parallel ones instead")
    bench.add_argument("--nprocs", type=int, default=2, help="processes for --ddp (default: 2)")
    bench.add_argument("--limit", type=int, default=10_000, help="training images per epoch for --ddp and speed")
    bench.add_argument("--no-speed", action="store_true", help="the input pipelines only, not the speed features")
    run = commands.add_parser("speedrun", help="a fixed schedule as fast as possible, then test accuracy once")
    run.add_argument("--batch-size", type=int, default=LESSON.batch_size)
    run.add_argument("--lr", type=float, default=0.2)
    run.add_argument("--momentum", type=float, default=0.9)
    run.add_argument("--epochs", type=int, default=6)
    run.add_argument("--target", type=float, default=0.97, help="exit 1 if the test accuracy ends below this")
    for command in (bench, run):  # `bench --dry-run` as well as `--dry-run bench`
        command.add_argument("--dry-run", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def bench(args: argparse.Namespace) -> int:
    """The pipelines and speed features side by side, or (--ddp) one process against data-parallel ones."""
    out, limit = Path(args.out), DRY_RUN_IMAGES if args.dry_run else None
    epochs = 1 if args.dry_run else args.epochs
    if args.ddp:
        device = str(get_default_device(args.device))
        options = {"nprocs": args.nprocs, "limit": limit or args.limit, "device": device, "seed": args.seed}
        benchmark_ddp(args.data, epochs=epochs, out_dir=out, **options)
        return 0
    devices = args.devices or ([args.device] if args.device else None)
    rows = benchmark_pipelines(args.data, devices, epochs, limit=limit, out_dir=out, seed=args.seed)
    speed = [] if args.no_speed else _speed_features(args, list(dict.fromkeys(r["device"] for r in rows)))
    write_bench(out / "bench.json", pipelines=rows, speed=speed)
    print(f"wrote {out / 'bench.json'} and {out / 'bench.png'}")
    return 0


def _speed_features(args: argparse.Namespace, devices: list[str]) -> list[dict]:
    """`benchmark_speed` on `devices`; a dry run times plain float32 on the lesson's model alone, compiling nothing."""
    return benchmark_speed(
        args.data,
        devices,
        models=["small"] if args.dry_run else tuple(SPEED_MODELS),
        configs=["float32"] if args.dry_run else None,
        epochs=2 if args.dry_run else max(args.epochs, 2),
        limit=DRY_RUN_IMAGES if args.dry_run else args.limit,
        seed=args.seed,
    )


def write_bench(path: str | Path, **sections: list[dict]) -> None:
    """Write a benchmark file once: where and when it was measured, then each section's rows."""
    found = {"machine": describe_device("cpu"), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    found["devices"] = {name: describe_device(name) for name in available_devices()}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(found | sections, indent=2) + "\n")


def run_speedrun(args: argparse.Namespace) -> int:
    """The speedrun; exit 1 if its test accuracy ends below --target (a dry run always passes)."""
    result = speedrun(
        root=args.data,
        device=args.device,
        batch_size=args.batch_size,
        lr=args.lr,
        momentum=args.momentum,
        epochs=1 if args.dry_run else args.epochs,
        target=args.target,
        seed=args.seed,
    )
    return 0 if result["reached"] or args.dry_run else 1


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"bench": bench, "speedrun": run_speedrun}


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; raises what it finds wrong (`cli` prints it as one line)."""
    args = parser().parse_args(argv)
    check_args(args)  # as given, before --dry-run replaces any of them and before any work
    return COMMANDS[args.command](args)


def _at_least(option: str, value: float, low: float) -> None:
    if not math.isfinite(value) or value < low:  # nan is not below anything: it would pass a plain `<`
        raise ValueError(f"{option} must be a number of at least {low}, got {value}")


def check_args(args: argparse.Namespace) -> None:
    """Refuse a bad option or an output path that cannot be written, naming it, before any work."""
    check_seed(args.seed, "--seed")
    if not is_plain_path(args.data):  # '' would put MNIST in the working folder; C:\data, a folder of that name
        raise ValueError(
            f"--data must be a folder's path as this system writes it, such as --data data; got {args.data!r}"
        )
    if args.command == "bench":
        _at_least("--epochs", args.epochs, 1)
        _at_least("--limit", args.limit, 1)
        if args.ddp and (args.nprocs < 2 or LESSON.batch_size % args.nprocs):  # before any process is started
            raise ValueError(
                f"--nprocs must be at least 2 and divide a batch of {LESSON.batch_size}, got {args.nprocs}"
            )
        check_writable(args.out, folder=True)
    elif args.command == "speedrun":
        _at_least("--epochs", args.epochs, 1)
        check_hparams(args.epochs, args.lr)
        _at_least("--batch-size", args.batch_size, 1)
        _at_least("--momentum", args.momentum, 0)
        if not 0 <= args.target <= 1:
            raise ValueError(f"--target is a test accuracy from 0 to 1, such as 0.97; got {args.target}")


EXPECTED_ERRORS = (ValueError, TypeError, OSError, MnistUnavailable, TrainingDiverged)


def cli(argv: Sequence[str] | None = None) -> int:
    """`main` for a shell: an expected error is one line `error: ...` and exit 2 (argparse's code).

    --debug or HELPERS_DEBUG=1 shows the traceback instead.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return main(argv)
    except KeyboardInterrupt as err:  # TrainingInterrupted too: fit has said where it stopped
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return 130
    except EXPECTED_ERRORS as err:
        if "--debug" in argv or os.environ.get("HELPERS_DEBUG") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
