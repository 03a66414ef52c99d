"""Shared fixtures: real MNIST, fetched once per machine into the repository's data/ folder."""

import shutil
import sys
from pathlib import Path

import matplotlib
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
matplotlib.use("Agg")

import helpers  # noqa: E402
import helpers_data  # noqa: E402


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The repository's data/ root with verified MNIST (fetched through the offline path if missing)."""
    root = REPO / "data"
    helpers_data.ensure_mnist(root)
    return root


@pytest.fixture(scope="session")
def mnist(data_root):
    return helpers.load_mnist(data_root)


@pytest.fixture(scope="session")
def mnist_test(data_root):
    return helpers.load_mnist(data_root, train=False)


@pytest.fixture
def raw_copy(data_root, tmp_path) -> Path:
    """A private data root holding copies of the verified raw files, to damage freely."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in helpers_data.MNIST_MD5:
        shutil.copy(data_root / "MNIST" / "raw" / name, raw / name)
    return tmp_path


@pytest.fixture
def unreachable_mirrors(monkeypatch):
    """torchvision's mirrors point at a closed local port: its download fails as it does offline."""
    monkeypatch.setattr(helpers.MNIST, "mirrors", ["http://127.0.0.1:9/"])
    monkeypatch.setattr(helpers.FashionMNIST, "mirrors", ["http://127.0.0.1:9/"])


@pytest.fixture(autouse=True)
def _no_progress_bars(monkeypatch):
    monkeypatch.setenv("HELPERS_PROGRESS", "0")
    monkeypatch.delenv("HELPERS_DEVICE", raising=False)
    monkeypatch.delenv("MNIST_SOURCE", raising=False)


def pytest_collection_modifyitems(config, items):
    """Tests marked `cuda` run where CUDA is present (`pytest -m cuda` runs only them) and skip elsewhere."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)
