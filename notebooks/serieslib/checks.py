"""What the commands check before they change anything: settings, the device, the folders they write into.

`prepare` writes only into a new or empty folder, or one it marked as its own; `run` only into a new folder of its
own, out_root/<timestamp>/; each refusal is a `Refused` that says what to do instead.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import nbformat

from .pages import shown

PATH_SETTINGS = ("data_root", "checkpoint", "work_dir")  # settings that name a file or folder
PREPARED_MARK = ".series-prepared"  # inside the folder prepare made: the only non-empty folder it empties
LATEST_MARK = ".series-latest"  # inside the copy that stands for out_root/latest where symlinks are not allowed


class Refused(ValueError):
    """What a command will not do, and how to fix it; the command line prints it as one line."""


def checked_settings(values: dict) -> dict:
    """`values` with their paths absolute (`~` expanded) and their device checked: refused here, not by every notebook.

    Paths are taken from where the command was typed, since the kernels run in notebooks/.
    """
    resolved = {
        k: str(Path(v).expanduser().resolve()) if k in PATH_SETTINGS and isinstance(v, str) else v
        for k, v in values.items()
    }
    if resolved.get("device") is not None:
        check_device(resolved["device"], " (-p device)")
    elif os.environ.get("HELPERS_DEVICE"):
        check_device(os.environ["HELPERS_DEVICE"], " (from the environment variable HELPERS_DEVICE)")
    return resolved


def check_kinds(values: dict, notebooks: dict[str, nbformat.NotebookNode]) -> None:
    """Refuse a value that a notebook's set-up cell would refuse, with its message, before any kernel starts."""
    import helpers  # the notebooks' kinds of settings: helpers.whole(1, 50_000), helpers.DEVICE, ...

    from .pages import setting_kinds

    for stem, nb in notebooks.items():
        for name, kind in setting_kinds(nb).items():
            if name in values and name != "device":  # the device: checked_settings, once for every notebook
                try:
                    helpers.check_settings(values, **{name: eval(kind, {"helpers": helpers})})
                except ValueError as err:
                    raise Refused(f"{stem}: {err}") from None


def check_device(device: object, source: str) -> None:
    """Refuse a device that helpers.as_device refuses here, with its message; `source` says where it came from."""
    import helpers  # torch, loaded only when a device is to be checked

    try:
        helpers.as_device(device, source)
    except ValueError as err:
        raise Refused(str(err)) from None


def claim_prepared(out: Path) -> None:
    """Make `out` prepare's folder, empty but for its mark: a new or empty folder, or one prepare marked before."""
    if out.exists() and not out.is_dir():
        raise Refused(f"{shown(out)} is a file, not a folder: pass --out a new folder, e.g. --out runs/test")
    if out.is_dir() and any(out.iterdir()):
        if not _made_by_prepare(out):
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


def _made_by_prepare(out: Path) -> bool:
    """Whether prepare made the folder: its mark, or (made before the mark) its parameters.json and prepared/."""
    return (out / PREPARED_MARK).is_file() or ((out / "parameters.json").is_file() and (out / "prepared").is_dir())


def new_run_folder(out_root: Path) -> Path:
    """A new folder out_root/<timestamp>, made atomically: a run that starts in the same second gets <timestamp>-2."""
    if out_root.exists() and not out_root.is_dir():
        raise Refused(f"{shown(out_root)} is a file, not a folder for runs: move it away, or pass --out another folder")
    check_latest(out_root / "latest")
    stamp_ = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
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
    raise Refused(f"{shown(out_root)} already holds 999 runs started at {stamp_}: pass --out another folder")


def check_latest(latest: Path) -> None:
    """Refuse to start a run whose out_root/latest is something run did not make: it would be replaced at the end."""
    if latest.is_symlink() or not latest.exists() or (latest / LATEST_MARK).is_file():
        return
    raise Refused(f"{shown(latest)} is not the link (or copy) that run makes there: move it away, then run again")
