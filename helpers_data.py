"""Data files for the series (not part of the lesson): MNIST and Fashion-MNIST through torchvision's download, and
safe writes of files. A failed download gets one message that says which files to put where."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path

from torchvision.datasets import MNIST, FashionMNIST

from helpers_exercises import Said


class MnistUnavailable(RuntimeError):
    """MNIST (or Fashion-MNIST) is not in the data folder and could not be downloaded into it."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write bytes so that readers see the old file or the whole new one, never a torn one (through a symlink)."""
    path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(err.errno, f"cannot create the folder for {path}: {err.strerror}") from None
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:  # name the file the caller asked for, not the temporary one
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        fix = {errno.ENOSPC: "free some disk space"}.get(err.errno, "check that the folder exists and is writable")
        raise OSError(err.errno, f"cannot write {path}: {err.strerror or err}; {fix}, or choose another path") from None


def is_plain_path(value: str | Path) -> bool:
    """A path as this system writes it: not empty, printable ('C:\\new' hides a \\n), off Windows no drive or `\\`."""
    text = str(value)
    windows_only = os.sep == "/" and ("\\" in text or (len(text) > 1 and text[1] == ":" and text[0].isalpha()))
    return bool(text.strip()) and text.isprintable() and not windows_only


def display_path(path: Path) -> str:
    """`path` as a message shows it: relative to the working folder when that is short, else absolute."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return relative if not relative.startswith(os.pardir + os.sep + os.pardir) else str(path)


def _files(dataset: type) -> list[str]:
    """The compressed IDX files torchvision downloads for `dataset` (train and test images and labels)."""
    return [name for name, _ in dataset.resources]


def _in_place(raw: Path, dataset: type) -> bool:
    """Whether torchvision finds `dataset`'s unpacked files in `raw` (it downloads nothing then)."""
    return all((raw / Path(name).stem).is_file() for name in _files(dataset))


def _problem(root: Path, dataset: type, setting: str) -> Said | None:
    """What stops `dataset` from being put under `root`, and the fix, before any download; None when nothing does."""
    name = dataset.__name__
    for folder, above in ((root, root.parent), (root.parent, root.parent.parent)):  # given MNIST/ or MNIST/raw/
        if folder.name == name and _in_place(folder / "raw", dataset):
            return Said("{setting} is {root}, inside the {name} folder: give the folder that holds {name}/, {above}",
                        setting=setting, root=root, name=name, above=above)  # fmt: skip
    raw = root / name / "raw"
    existing = next(p for p in (raw, *raw.parents) if p.exists() or p == p.parent)
    if not existing.is_dir() and existing in (root, *root.parents):
        return Said("{setting} is {root}, but {existing} is a file: give the folder that holds it, or another folder",
                    setting=setting, root=root, existing=existing)  # fmt: skip
    if not existing.is_dir():
        return Said("{setting} is {root}, but {existing} is a file where {name}'s folder goes: give another folder",
                    setting=setting, root=root, existing=existing, name=name)  # fmt: skip
    if not _in_place(raw, dataset) and not os.access(existing, os.W_OK | os.X_OK):
        return Said("{setting} is {root}, and {existing} is not writable: make it writable, or give another folder",
                    setting=setting, root=root, existing=existing)  # fmt: skip
    return None


def _ensure(root: str | Path, dataset: type, setting: str | None) -> Path:
    """Make sure `dataset`'s IDX files are in `<root>/<Dataset>/raw`, downloading them if needed; return that folder."""
    root = Path(os.path.abspath(Path(root).expanduser()))  # messages say where a relative root was taken from
    setting = setting or "the data folder"
    if problem := _problem(root, dataset, setting):
        raise MnistUnavailable(problem)
    raw = root / dataset.__name__ / "raw"
    if _in_place(raw, dataset):
        return raw
    timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(20)  # an unreachable mirror should fail, not hang the notebook
    try:
        dataset(str(root), train=True, download=True)
    except (OSError, RuntimeError) as err:
        files = ", ".join(_files(dataset))
        raise MnistUnavailable(Said(
            "Could not download {name} into {raw} ({error}). Connect to the internet and run again, or download "
            "{files} from {mirror} into {raw}", name=dataset.__name__, raw=raw, error=" ".join(str(err).split())[:200],
            files=files, mirror=dataset.mirrors[0]
        )) from None  # fmt: skip
    finally:
        socket.setdefaulttimeout(timeout)
    return raw


def ensure_mnist(root: str | Path = "data", *, setting: str | None = None) -> Path:
    """Put MNIST's IDX files in `<root>/MNIST/raw` (MD5-checked); return it. `setting`: what messages call `root`."""
    return _ensure(root, MNIST, setting)


def ensure_fashion_mnist(root: str | Path = "data") -> Path:
    """As `ensure_mnist`, for Fashion-MNIST (`<root>/FashionMNIST/raw`)."""
    return _ensure(root, FashionMNIST, None)
