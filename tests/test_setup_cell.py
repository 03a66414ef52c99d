"""The set-up cell (notebooks/setup_cell.py) and the fetcher it downloads (notebooks/fetch_series.py), in each place
a notebook is opened: local Jupyter, Kaggle, a lone notebook without git, Colab; and without internet."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

from serieslib import pages  # noqa: E402


def _setup_in(cwd, env_overrides, path=None, code=None):
    """Run the set-up cell (or `code`) as a notebook kernel would, in `cwd` with these environment variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERIES_", "KAGGLE_"))}
    env |= {"PYTHONPATH": "", "HOME": str(cwd)} | env_overrides
    if path is not None:
        env["PATH"] = path
    if code is None:
        # The cell as it is, but where it would import helpers (and so PyTorch), find it: the import works
        # when the spec is found, and the whole cell, import included, runs in the Colab test below.
        assert pages.SETUP.endswith("\nimport helpers")
        found = "import importlib.util\nprint('HELPERS=' + importlib.util.find_spec('helpers').origin)\n"
        code = pages.SETUP.removesuffix("import helpers") + "print('REPO=' + str(REPO))\n" + found
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """Stand-ins for GitHub: this working tree, committed or not, as branch main of a bare repository and as a
    zip archive, and the same files where the set-up cell downloads notebooks/fetch_series.py from."""
    if not (REPO / ".git").exists():
        pytest.skip("the repository is not a git checkout")
    root = tmp_path_factory.mktemp("origin")
    tree = root / "pytorch-gpu-mnist"  # the files git would commit now: tracked ones and new ones it does not ignore
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    git = ["git", "-C", str(tree), "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "now"], check=True)
    bare = root / "pytorch-gpu-mnist.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run([*git, "push", "-q", str(bare), "HEAD:refs/heads/main"], check=True)
    archive = root / "main.zip"
    prefix = "--prefix=pytorch-gpu-mnist-main/"
    subprocess.run([*git, "archive", "--format=zip", prefix, "-o", str(archive), "HEAD"], check=True)
    return {
        "SERIES_REPO_URL": bare.as_uri(),
        "SERIES_BRANCH": "main",
        "SERIES_ARCHIVE_URL": archive.as_uri(),
        "SERIES_FETCH_URL": tree.as_uri() + "/",
    }


def test_setup_cell_is_short():
    """A learner who unfolds it reads it at a glance: the fetching is in notebooks/fetch_series.py."""
    assert len(pages.SETUP.splitlines()) <= 15


def test_setup_fetcher_uses_the_standard_library_only():
    """fetch_series.py runs before the repository is there."""
    tree = ast.parse((REPO / "notebooks" / "fetch_series.py").read_text(encoding="utf-8"))
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name.split(".")[0] for name in imported} <= sys.stdlib_module_names


def test_the_repositorys_address_is_written_once_in_fetch_series_and_stamped_everywhere():
    """The set-up cell downloads fetch_series.py from, and the badges open, the repository fetch_series.py names."""
    import fetch_series

    github, branch = fetch_series.GITHUB, fetch_series.BRANCH
    assert f'"https://raw.githubusercontent.com/{github}/{branch}/"' in pages.SETUP and "$" not in pages.SETUP
    assert f'/ ".cache" / "{Path(github).name}")' in pages.SETUP, "the fetched copy's folder is named after it"
    assert f"/github/{github}/blob/{branch}/notebooks/" in pages.badge("01_gpu_runtime.ipynb")
    tooling = [REPO / "notebooks" / "series.py", *(REPO / "notebooks" / "serieslib").glob("*.py"), pages.SETUP_FILE]
    assert [p.name for p in tooling if github in p.read_text(encoding="utf-8")] == [], "one definition"


def test_setup_in_local_jupyter_finds_the_repository():
    done = _setup_in(REPO / "notebooks", {"SERIES_REPO_URL": "file:///nowhere", "SERIES_FETCH_URL": "file:///nowhere"})
    assert done.returncode == 0, done.stderr
    assert f"REPO={REPO}" in done.stdout and f"HELPERS={REPO / 'helpers.py'}" in done.stdout
    assert "Fetched" not in done.stdout


def test_setup_in_kaggle_clones_into_the_cache(tmp_path, origin):
    working = tmp_path / "kaggle" / "working"
    working.mkdir(parents=True)
    cache = tmp_path / "cache" / "pytorch-gpu-mnist"
    done = _setup_in(working, origin | {"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "SERIES_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    assert "with git" in done.stdout and f"HELPERS={cache / 'helpers.py'}" in done.stdout
    assert "delete that folder to fetch it again" in done.stdout
    again = _setup_in(working, origin | {"SERIES_CACHE": str(cache), "SERIES_REPO_URL": "file:///nowhere"})
    assert again.returncode == 0 and "Fetched" not in again.stdout, "fetched once, then reused"
    assert f"HELPERS={cache / 'helpers.py'}" in again.stdout


def test_setup_for_a_lone_notebook_without_git_downloads_the_archive(tmp_path, origin):
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    no_git = tmp_path / "bin"  # a PATH on which there is no git
    no_git.mkdir()
    cache = tmp_path / "cache" / "pytorch-gpu-mnist"
    done = _setup_in(downloads, origin | {"SERIES_CACHE": str(cache)}, path=str(no_git))
    assert done.returncode == 0, done.stderr
    assert f"from {origin['SERIES_ARCHIVE_URL']}" in done.stdout and (cache / "notebooks" / "series.py").exists()
    assert not [p for p in cache.parent.iterdir() if p != cache], "no unpacking folder left behind"


def test_setup_that_cannot_download_its_fetcher_says_what_to_do_in_one_error(tmp_path):
    """No internet (Kaggle's default): the first download fails, and one error says what to do."""
    url = "file:///no/such/folder/"
    done = _setup_in(tmp_path, {"SERIES_FETCH_URL": url, "SERIES_CACHE": str(tmp_path / "cache" / "series")})
    assert done.returncode != 0
    assert done.stderr.count("Traceback") == 1 and "During handling" not in done.stderr, done.stderr
    message = done.stderr[done.stderr.index(f"RuntimeError: Cannot download {url}") :]
    assert "Turn internet on (Kaggle: Settings > Internet)" in message and "No such file" in message


@pytest.mark.parametrize("kaggle", [False, True])
def test_setup_that_cannot_fetch_says_what_happened_and_what_to_do(tmp_path, origin, kaggle):
    env = {"SERIES_REPO_URL": "file:///no/such/repository.git", "SERIES_ARCHIVE_URL": "file:///no/such/archive.zip"}
    env["SERIES_FETCH_URL"] = origin["SERIES_FETCH_URL"]
    env |= {"SERIES_CACHE": str(tmp_path / "cache" / "series")} | (
        {"KAGGLE_KERNEL_RUN_TYPE": "Batch"} if kaggle else {}
    )
    done = _setup_in(tmp_path, env)
    assert done.returncode != 0
    message = done.stderr[done.stderr.index("RuntimeError: Could not find or fetch this series' code") :]
    assert (
        "git clone file:///no/such/repository.git failed" in message
        and "downloading file:///no/such/archive.zip" in message
    )
    assert ("Settings > Internet" in message) is kaggle and (
        "open this notebook from its notebooks/ folder" in message
    ) is not kaggle
    assert "StopIteration" not in done.stderr and "CalledProcessError" not in done.stderr
    assert done.stderr.count("Traceback") == 1, done.stderr


def test_setup_in_colab_fetches_the_series_and_imports_helpers(tmp_path, origin):
    """With a stand-in google.colab module and Colab's working folder, the whole cell runs: fetch, then import."""
    fake = tmp_path / "fake_colab" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("# stands in for Colab's module\n")
    content = tmp_path / "content"  # Colab's working folder
    content.mkdir()
    cache = tmp_path / "root" / ".cache" / "pytorch-gpu-mnist"
    code = pages.SETUP + "\nprint('HELPERS=' + helpers.__file__, helpers.get_default_device('cpu'))\n"
    env = origin | {"PYTHONPATH": str(tmp_path / "fake_colab"), "SERIES_CACHE": str(cache)}
    done = _setup_in(content, env, code=code)
    assert done.returncode == 0, done.stderr
    assert f"HELPERS={cache / 'helpers.py'} cpu" in done.stdout and (cache / "notebooks" / "series.py").exists()
