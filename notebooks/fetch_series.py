"""Fetch one version of this series' code into a cache folder: with git, or without git as a zip archive.

Kept for the notebooks released up to version 2026.12.1: their set-up cell downloads this file from the branch and
calls fetch_series(cache, version) when it finds the code neither around the notebook nor in the cache folder of the
notebook's version (Colab, Kaggle, a notebook downloaded on its own). Notebooks since 2026.12.2 install the code with
pip instead (pyproject.toml; series_setup.py), and never download this file. Keep fetch_series(cache, version)
working for the released ones (and fetch_series(cache), which set-up cells from before versions call: they get the
branch, as they did). It runs before the repository is there, so it uses the standard library only.
SERIES_REPO_URL, SERIES_BRANCH and SERIES_ARCHIVE_URL (where {ref} stands for refs/tags/<tag> or
refs/heads/<branch>) fetch from elsewhere: the tests' stand-ins for GitHub.
"""

import io
import os
import shutil
import subprocess
import tempfile
import urllib.request
import zipfile
from pathlib import Path

# Where the released set-up cells fetch from: the repository pyproject.toml names (a test keeps the two equal).
GITHUB, BRANCH = "gpu-lessons/pytorch-gpu-mnist", "main"


def fetch_series(cache: Path, version: str | None = None) -> Path:
    """Fetch tag v`version` (the branch without a version, or while that tag is missing) into `cache`; return it.

    Raises RuntimeError with one message that says what to do: the folder is in the way, cannot be written, or
    nothing could be fetched.
    """
    cache = Path(cache)
    if (cache / "helpers.py").is_file():
        return cache  # fetched already
    if cache.exists() and not (cache.is_dir() and not any(cache.iterdir())):
        raise RuntimeError(
            f"{cache} is not a copy of this series' code (it has no helpers.py), and it is in the way: delete it "
            "or empty it, or set SERIES_CACHE to another folder, then run this cell again"
        )
    url = os.environ.get("SERIES_REPO_URL", f"https://github.com/{GITHUB}.git")
    branch = os.environ.get("SERIES_BRANCH", BRANCH)
    archive = os.environ.get("SERIES_ARCHIVE_URL", f"https://github.com/{GITHUB}/archive/{{ref}}.zip")
    tag = f"v{version}" if version else None
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{cache.name}-fetching-", dir=cache.parent))
    except OSError as err:  # a read-only home, say
        raise RuntimeError(
            f"Cannot write to {cache.parent} ({err.strerror or err}): set SERIES_CACHE to a writable folder "
            "(run %env SERIES_CACHE=/tmp/series in a cell), then run this cell again"
        ) from None
    try:
        return _fetch(cache, staging, url, tag, branch, archive)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch(cache: Path, staging: Path, url: str, tag: str | None, branch: str, archive: str) -> Path:
    """Fetch into `staging`, then move the copy to `cache`: an interrupted fetch leaves no half copy there."""
    tried, missing = [], False  # missing: the tag is not there (not released yet), so the branch is fetched

    def fall_back():
        nonlocal missing
        if not missing:
            print(f"No tag {tag} of this series' code yet (not released): fetching branch {branch} instead")
        missing = True

    if shutil.which("git"):
        ref, done = branch, None
        if tag:
            listed = _git("ls-remote", "--exit-code", url, f"refs/tags/{tag}")
            if listed.returncode == 0:
                ref = tag
            elif listed.returncode == 2:  # the repository answered, without that tag
                fall_back()
            else:  # no answer: cloning would fail the same way
                done = listed
        done = done or _git("clone", "--quiet", "--depth", "1", "--branch", ref, url, str(staging / "git"))
        if done.returncode == 0:
            _move(staging / "git", cache)
            print(f"Fetched the series' code ({ref}) into {cache} with git (delete it to fetch it again)")
            return cache
        tried.append(f"git clone {url} failed: {done.stderr.strip()[-300:]}")
    else:
        tried.append("git clone: git is not installed here")
    refs = [(tag, f"refs/tags/{tag}")] if tag and not missing and "{ref}" in archive else []
    for ref, full in [*refs, (branch, f"refs/heads/{branch}")]:
        address = archive.replace("{ref}", full)
        try:
            with urllib.request.urlopen(address, timeout=60) as response:
                zipped = zipfile.ZipFile(io.BytesIO(response.read()))
            unpacked = staging / "zip"
            zipped.extractall(unpacked)
            _move(unpacked / zipped.namelist()[0].split("/")[0], cache)
            print(f"Fetched the series' code ({ref}) into {cache} from {address} (delete it to fetch it again)")
            return cache
        except Exception as err:  # any failure of the download: reported below with what to do
            if ref == tag and _not_found(err):  # the tag's archive is not there: not released yet
                fall_back()
                continue
            tried.append(f"downloading {address} failed: {type(err).__name__}: {err}")
            break
    fix = (
        "In Kaggle, turn on Settings > Internet (it needs a verified phone number), then run this cell again."
        if "KAGGLE_KERNEL_RUN_TYPE" in os.environ
        else "Check the internet connection and run this cell again, or get the repository yourself "
        f"(git clone {url}) and open this notebook from its notebooks/ folder."
    )
    what = "".join(f"\n  - {line}" for line in tried)
    raise RuntimeError(f"Could not find or fetch this series' code (helpers.py):{what}\n{fix}")


def _git(*args: str) -> subprocess.CompletedProcess:
    """Run git without ever asking for a password (there is no one to type it), within 5 minutes."""
    cmd = ["git", *args]
    try:
        env = os.environ | {"GIT_TERMINAL_PROMPT": "0"}
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 1, "", "no answer within 5 minutes")


def _not_found(err: Exception) -> bool:
    """Whether a download failed for want of the file: GitHub's 404, or no such file behind a file: URL."""
    return getattr(err, "code", None) == 404 or isinstance(getattr(err, "reason", None), FileNotFoundError)


def _move(copy: Path, cache: Path) -> None:
    """Put the fetched copy in its place, `cache` (an empty folder there is replaced)."""
    if cache.is_dir():
        cache.rmdir()
    copy.rename(cache)
