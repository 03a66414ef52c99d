"""What the commands refuse before they change anything (settings, the device, their folders), each a `Refused`."""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from pathlib import Path

from .pages import shown

PREPARED_MARK = ".series-prepared"  # inside the folder prepare made: the only non-empty folder it empties


class Refused(ValueError):
    """What a command will not do, and how to fix it; the command line prints it as one line."""


def require(module: str, command: str) -> None:
    """Refuse a command whose package is missing (a learner's requirements.txt lacks the tools'), before any work."""
    if importlib.util.find_spec(module) is None:
        raise Refused(
            f"series.py {command} needs {module}, which requirements-dev.txt installs: run `make {command}` "
            "(or pip install -r requirements-dev.txt), then try again"
        )


def checked_settings(values: dict) -> dict:
    """`values` as given (a relative path too: the notebooks take it from the repository), their device checked once."""
    device, source = values.get("device"), " (-p device)"
    if device in (None, "auto"):  # auto: the best device of each notebook's machine, unless HELPERS_DEVICE names one
        device, source = os.environ.get("HELPERS_DEVICE") or None, " (from the environment variable HELPERS_DEVICE)"
    if device is not None:
        import helpers  # torch, loaded only when a device is to be checked

        try:
            helpers.as_device(device, source)
        except ValueError as err:
            raise Refused(str(err)) from None
    return dict(values)


def check_kinds(values: dict, stems: list[str]) -> None:
    """Refuse a value that a notebook's set-up would refuse, with its message, before any kernel starts."""
    import series_setup  # what each notebook's settings accept

    for stem in stems:
        spec = series_setup.NOTEBOOKS.get(stem)
        accepts = {k: v for k, v in spec.settings.items() if k in values and k != "device"} if spec else {}
        try:  # the device: checked_settings, once for every notebook
            series_setup.check_settings(values, accepts)
        except ValueError as err:
            raise Refused(f"{stem}: {err}") from None


def claim_prepared(out: Path) -> None:
    """Make `out` prepare's folder, empty but for its mark: a new or empty folder, or one prepare marked before."""
    if out.exists() and not out.is_dir():
        raise Refused(f"{shown(out)} is a file, not a folder: pass --out a new folder, e.g. --out runs/test")
    if out.is_dir() and any(out.iterdir()):
        if not (out / PREPARED_MARK).is_file():
            raise Refused(
                f"{shown(out)} is not empty and prepare did not make it (no {PREPARED_MARK} in it); prepare "
                "empties its folder, so it writes only into a new or empty one: pass --out e.g. runs/test"
            )
        shutil.rmtree(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / PREPARED_MARK).write_text("Made by `python notebooks/series.py prepare`, which empties it each time.\n")
    except OSError as err:
        raise Refused(f"cannot write into {shown(out)} ({err.strerror}): pass --out a writable folder") from None


def new_run_folder(out_root: Path) -> Path:
    """A new folder out_root/<timestamp>, made atomically: a run that starts in the same second gets <timestamp>-2."""
    latest = out_root / "latest"
    if out_root.exists() and not out_root.is_dir():
        raise Refused(f"{shown(out_root)} is a file, not a folder for runs: move it away, or pass --out another folder")
    if latest.exists() and not latest.is_symlink():  # run replaces it with a link when it has finished
        raise Refused(f"{shown(latest)} is not the link that run makes there: move it away, then run again")
    stamp_ = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 100):
        out = out_root / (stamp_ if n == 1 else f"{stamp_}-{n}")
        try:
            out.mkdir(parents=True)  # no exist_ok: of two runs, only one makes it
            return out
        except FileExistsError:
            continue
        except OSError as err:
            raise Refused(
                f"cannot make a run's folder in {shown(out_root)} ({err.strerror}): "
                "make it a writable folder, or pass --out another one"
            ) from None
    raise Refused(f"{shown(out_root)} already holds 99 runs started at {stamp_}: pass --out another folder")
