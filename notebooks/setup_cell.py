# @title Set-up: find this series' code, or fetch it, then import `helpers` { display-mode: "form" }
# In the repository (local Jupyter) helpers.py is in a parent folder. Anywhere else (Colab, Kaggle,
# a notebook downloaded on its own) the repository is fetched once into a cache folder, with git
# or, without git, as a zip archive. PyTorch is used as installed: nothing is upgraded.


def find_or_fetch_series(name="pytorch-gpu-mnist"):
    """Put the folder that holds helpers.py on the import path and return it: a parent, or a fetched copy."""
    import io
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    import urllib.request
    import zipfile
    from pathlib import Path

    def use(folder):
        sys.path.insert(0, str(folder))
        return folder

    for folder in (Path.cwd(), *Path.cwd().parents):
        if (folder / "helpers.py").is_file() and (folder / "notebooks" / "series.py").is_file():
            return use(folder)
    cache = Path(os.environ.get("SERIES_CACHE") or Path.home() / ".cache" / name)
    if (cache / "helpers.py").is_file():
        print(f"Using the series' code in {cache} (delete that folder to fetch it again)")
        return use(cache)
    url = os.environ.get("SERIES_REPO_URL", "https://github.com/gpu-lessons/pytorch-gpu-mnist.git")
    branch = os.environ.get("SERIES_BRANCH", "main")
    archive = os.environ.get(
        "SERIES_ARCHIVE_URL", "https://github.com/gpu-lessons/pytorch-gpu-mnist/archive/refs/heads/main.zip"
    )
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
            print(f"Fetched the series' code into {cache} with git")
            return use(cache)
        tried.append(f"git clone {url} failed: {done.stderr.strip()[-300:]}")
    else:
        tried.append("git clone: git is not installed here")
    try:
        with urllib.request.urlopen(archive, timeout=60) as response:
            zipped = zipfile.ZipFile(io.BytesIO(response.read()))
        unpacked = Path(tempfile.mkdtemp(dir=cache.parent))
        zipped.extractall(unpacked)
        (unpacked / zipped.namelist()[0].split("/")[0]).rename(cache)
        shutil.rmtree(unpacked)
        print(f"Fetched the series' code into {cache} from {archive}")
        return use(cache)
    except Exception as err:  # any failure of the download: reported below with what to do
        tried.append(f"downloading {archive} failed: {type(err).__name__}: {err}")
    fix = (
        "In Kaggle, turn on Settings > Internet (it needs a verified phone number), then run this cell again."
        if "KAGGLE_KERNEL_RUN_TYPE" in os.environ
        else "Check the internet connection and run this cell again, or get the repository yourself "
        f"(git clone {url}) and open this notebook from its notebooks/ folder."
    )
    tried = "".join(f"\n  - {line}" for line in tried)
    raise RuntimeError(f"Could not find or fetch this series' code (helpers.py):{tried}\n{fix}")


REPO = find_or_fetch_series()
import helpers
