"""Shared fixtures: real MNIST from the repository's data/ folder (`make data` fills it); tiny random data and its
loaders, made the same way in every test file (import them: `from conftest import small_loaders`)."""

import shutil
import sys
from pathlib import Path

import matplotlib
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
matplotlib.use("Agg")

import helpers  # noqa: E402

MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def translated_paths(lang: str = "zh") -> list[Path]:
    """The committed translated notebooks, e.g. notebooks/zh/01_gpu_runtime.ipynb, in order."""
    return sorted((REPO / "notebooks" / lang).glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The repository's data/ root, with MNIST and Fashion-MNIST in it."""
    root = REPO / "data"
    missing = [
        f"{d}/raw/{n}" for d in ("MNIST", "FashionMNIST") for n in MNIST_FILES if not (root / d / "raw" / n).is_file()
    ]
    if missing:
        pytest.fail(f"data/ lacks {', '.join(missing)}: run `make data` first", pytrace=False)
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
    for name in MNIST_FILES:
        shutil.copy(data_root / "MNIST" / "raw" / name, raw / name)
    return tmp_path


@pytest.fixture
def unreachable_mirrors(monkeypatch):
    """torchvision's mirrors point at a closed local port: its download fails as it does offline."""
    monkeypatch.setattr(helpers.MNIST, "mirrors", ["http://127.0.0.1:9/"])
    monkeypatch.setattr(helpers.FashionMNIST, "mirrors", ["http://127.0.0.1:9/"])


# ---------------------------------------------------------------------------- tiny random data and its loaders


def random_images(n: int = 256, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` random images shaped like MNIST's, with values in [0, 1), and random labels 0-9: the same for one seed."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)


def cpu_loader(images, labels, batch_size=64, shuffle=False) -> helpers.DeviceResidentLoader:
    return helpers.DeviceResidentLoader(images, labels, batch_size, shuffle=shuffle, device="cpu")


def small_loaders(n=512) -> tuple[helpers.DeviceResidentLoader, helpers.DeviceResidentLoader]:
    """Training (shuffled) and validation (the first 100 images) loaders of `random_images(n)`, in batches of 64."""
    x, y = random_images(n)
    return cpu_loader(x, y, shuffle=True), cpu_loader(x[:100], y[:100])


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.fixture(autouse=True)
def _no_progress_bars(monkeypatch):
    monkeypatch.setenv("HELPERS_PROGRESS", "0")
    monkeypatch.delenv("HELPERS_DEVICE", raising=False)


def pytest_collection_modifyitems(config, items):
    """Tests marked `cuda` run where CUDA is present (`pytest -m cuda` runs only them) and skip elsewhere."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)


def chromium(user_data: Path, width: int, console: bool = False):
    """Headless Chromium through chromedriver (yielded, quit after); a skip that says why it cannot start.

    `console` keeps the browser console's messages for `get_log("browser")`. The site and JupyterLab tests use it.
    """
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException

    browser = next(filter(None, map(shutil.which, ["chromium", "chromium-browser", "google-chrome"])), None)
    driver = shutil.which("chromedriver")
    if not (browser and driver):
        pytest.skip(f"no Chromium ({browser}) or chromedriver ({driver}): apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},1600"]:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={user_data}")
    if console:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        chrome = webdriver.Chrome(options, webdriver.ChromeService(driver))
    except WebDriverException as err:
        pytest.skip(f"Chromium does not start through {driver}: {err.msg}")
    chrome.set_script_timeout(60)
    yield chrome
    chrome.quit()
