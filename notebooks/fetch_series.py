"""Fetch this series' code into a cache folder: with git, or without git as a zip archive.

The notebooks' set-up cell downloads this file and calls fetch_series() when it finds the repository neither
around the notebook nor in the cache (Colab, Kaggle, a notebook downloaded on its own). It runs before the
repository is there, so it uses the standard library only. SERIES_REPO_URL, SERIES_BRANCH and
SERIES_ARCHIVE_URL fetch from elsewhere (the tests' stand-ins for GitHub).
"""

import io
import os
import shutil
import subprocess
import tempfile
import urllib.request
import zipfile
from pathlib import Path

# The repository's address, its one definition: `series.py stamp` writes it into every notebook's badge and
# set-up cell. A fork changes it here, then runs `python notebooks/series.py stamp`.
GITHUB, BRANCH = "gpu-lessons/pytorch-gpu-mnist", "main"


def fetch_series(cache: Path) -> Path:
    """Fetch the repository into `cache` with git, else as a zip archive, and return `cache`; or raise RuntimeError."""
    url = os.environ.get("SERIES_REPO_URL", f"https://github.com/{GITHUB}.git")
    branch = os.environ.get("SERIES_BRANCH", BRANCH)
    archive = os.environ.get("SERIES_ARCHIVE_URL", f"https://github.com/{GITHUB}/archive/refs/heads/{branch}.zip")
    cache.parent.mkdir(parents=True, exist_ok=True)
    tried = []
    if shutil.which("git"):
        cmd = ["git", "clone", "--quiet", "--depth", "1", "--branch", branch, url, str(cache)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(cmd, 1, "", "no answer within 5 minutes")
            shutil.rmtree(cache, ignore_errors=True)
        if done.returncode == 0:
            print(f"Fetched the series' code into {cache} with git (delete that folder to fetch it again)")
            return cache
        tried.append(f"git clone {url} failed: {done.stderr.strip()[-300:]}")
    else:
        tried.append("git clone: git is not installed here")
    try:
        with urllib.request.urlopen(archive, timeout=60) as response:
            zipped = zipfile.ZipFile(io.BytesIO(response.read()))
        unpacked = Path(tempfile.mkdtemp(dir=cache.parent))
        try:
            zipped.extractall(unpacked)
            (unpacked / zipped.namelist()[0].split("/")[0]).rename(cache)
        finally:
            shutil.rmtree(unpacked)
        print(f"Fetched the series' code into {cache} from {archive} (delete that folder to fetch it again)")
        return cache
    except Exception as err:  # any failure of the download: reported below with what to do
        tried.append(f"downloading {archive} failed: {type(err).__name__}: {err}")
    fix = (
        "In Kaggle, turn on Settings > Internet (it needs a verified phone number), then run this cell again."
        if "KAGGLE_KERNEL_RUN_TYPE" in os.environ
        else "Check the internet connection and run this cell again, or get the repository yourself "
        f"(git clone {url}) and open this notebook from its notebooks/ folder."
    )
    what = "".join(f"\n  - {line}" for line in tried)
    raise RuntimeError(f"Could not find or fetch this series' code (helpers.py):{what}\n{fix}")
