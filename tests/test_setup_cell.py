"""The set-up cell, read at a glance and stamped from pyproject.toml's version and address: it installs the series'
code pinned to its tag where the code is missing (Colab, Kaggle, a notebook on its own), never touching PyTorch, and
only there. And notebooks/fetch_series.py, which the set-up cells of the versions released before 2026.12.2 download
and run from the branch: each place they are opened (local Jupyter, Kaggle, a lone notebook without git, Colab),
without internet, with the version they were stamped with, and the faults a learner meets, each in one line."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from string import Template

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

import fetch_series  # noqa: E402
from serieslib import pages  # noqa: E402

VERSION = pages.VERSION
NAME = Path(pages.GITHUB).name  # the repository's name, and the legacy cache's folder in ~/.cache
GIT = [
    "-c",
    "user.name=test",
    "-c",
    "user.email=test@example.com",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
]
OFFLINE = {
    "SERIES_FETCH_URL": "file:///nowhere/",
    "SERIES_REPO_URL": "file:///nowhere",
    "SERIES_ARCHIVE_URL": "file:///x",
}

# The set-up cell of the released notebooks up to v2026.12.1, as `stamp` wrote it: it downloads
# notebooks/fetch_series.py from the branch and runs it, so that file stays, and keeps working for them.
LEGACY_SETUP = Template(
    """# @title Set-up: this notebook's settings and the series' code { display-mode: "form" }
import os
import sys
import urllib.request
import warnings
from pathlib import Path

VERSION = "$version"  # the version of the series' code this notebook belongs to (its git tag: v, then VERSION)
CACHE = Path(os.environ.get("SERIES_CACHE") or Path.home() / ".cache" / "$repo_name").expanduser() / VERSION
REPO = next((p for p in [Path.cwd(), *Path.cwd().parents] if (p / "notebooks/series.py").is_file()), CACHE)
if not (REPO / "helpers.py").is_file():  # Colab, Kaggle, a notebook on its own: fetch_series.py fetches VERSION
    URL = os.environ.get("SERIES_FETCH_URL", "https://raw.githubusercontent.com/$github/$branch/")
    try:
        exec(urllib.request.urlopen(URL + "notebooks/fetch_series.py", timeout=60).read(), fetched := {})
    except OSError as err:  # no internet: one message that says what to do, not urllib's traceback
        raise RuntimeError(f"Cannot download {URL}: {err}. Turn internet on (Kaggle: Settings > Internet)") from None
    except (SyntaxError, ValueError):  # not Python but a web page: a captive portal's login page, a proxy's notice
        raise RuntimeError(f"{URL} sent a web page, not Python: log in to the Wi-Fi, or check the connection") from None
    REPO = fetched["fetch_series"](CACHE, VERSION)
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore", message=".*pin_memory.*")  # the lesson's pin_memory=True without a GPU (notebook 02)
print(f"Series code v{VERSION} from {REPO if REPO == CACHE else 'the repository around this notebook'}")
import helpers"""
)


def legacy_setup(version: str = VERSION) -> str:
    """A released notebook's set-up cell, stamped with `version`."""
    return LEGACY_SETUP.substitute(github=pages.GITHUB, branch="main", repo_name=NAME, version=version)


def _setup_in(cwd, env_overrides, path=None, code=None):
    """Run the set-up cell (or `code`) as a notebook kernel would, in `cwd` with these environment variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERIES_", "KAGGLE_"))}
    env |= {"PYTHONPATH": "", "HOME": str(cwd)} | env_overrides
    if path is not None:
        env["PATH"] = path
    if code is None:
        # The cell as it is, but where it would import helpers (and so PyTorch), find it: the import works
        # when the spec is found, and the whole cell, import included, runs in the Colab test below.
        assert legacy_setup().endswith("\nimport helpers")
        found = "import importlib.util\nprint('HELPERS=' + importlib.util.find_spec('helpers').origin)\n"
        code = legacy_setup().removesuffix("import helpers") + "print('REPO=' + str(REPO))\n" + found
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _one_line_error(done) -> str:
    """The error a learner sees: one traceback, no chained one, ending in a one-line RuntimeError; that line."""
    assert done.returncode != 0, done.stdout
    assert done.stderr.count("Traceback") == 1 and "During handling" not in done.stderr, done.stderr
    last = done.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith("RuntimeError: "), done.stderr
    return last.removeprefix("RuntimeError: ")


def _commit_and_archive(tree: Path, ref: str, archives: Path, prefix: str) -> None:
    """Commit all of `tree`, and write the commit's zip archive as GitHub serves `ref`'s: archives/<ref>.zip."""
    git = ["git", "-C", str(tree), *GIT]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--no-verify", "-m", ref], check=True)
    _archive(tree, ref, archives, prefix)


def _archive(tree: Path, ref: str, archives: Path, prefix: str) -> None:
    """Write the zip archive of `tree`'s HEAD as GitHub serves `ref`'s, all in folder `prefix`: archives/<ref>.zip."""
    zipped = archives / f"{ref}.zip"
    zipped.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["git", "-C", str(tree), "archive", "--format=zip", f"--prefix={prefix}/", "-o", str(zipped), "HEAD"]
    subprocess.run(cmd, check=True)


def _publish(tree: Path, bare: Path) -> None:
    """Push `tree`'s HEAD as branch main, and its tags, to a new bare repository `bare`: GitHub's stand-in."""
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(bare)], check=True)
    subprocess.run(["git", "-C", str(tree), "push", "-q", str(bare), "HEAD:refs/heads/main", "--tags"], check=True)


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """Stand-ins for GitHub: this working tree, committed or not, as branch main of a bare repository, tagged
    v<SERIES_VERSION> (released), with the zip archives of tag and branch; and the same files where the set-up
    cell downloads notebooks/fetch_series.py from."""
    if not (REPO / ".git").exists():
        pytest.skip("the repository is not a git checkout")
    root = tmp_path_factory.mktemp("origin")
    tree = root / NAME  # the files git would commit now: tracked ones and new ones it does not ignore
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    archives = root / "archives"
    _commit_and_archive(tree, f"refs/tags/v{VERSION}", archives, f"{NAME}-{VERSION}")
    _archive(tree, "refs/heads/main", archives, f"{NAME}-main")
    subprocess.run(["git", "-C", str(tree), *GIT, "tag", "-a", f"v{VERSION}", "-m", "released"], check=True)
    _publish(tree, root / f"{NAME}.git")
    return {
        "SERIES_REPO_URL": (root / f"{NAME}.git").as_uri(),
        "SERIES_BRANCH": "main",
        "SERIES_ARCHIVE_URL": archives.as_uri() + "/{ref}.zip",
        "SERIES_FETCH_URL": tree.as_uri() + "/",
    }


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """Stand-ins for GitHub with two released versions of a tiny series: tags v1 (lightweight) and v2 (annotated),
    each with a helpers.py that says which version it is, and branch main, moved on since ("main"); the zip
    archives of each; and this working tree's fetch_series.py where the set-up cell downloads it from."""
    root = tmp_path_factory.mktemp("versions")
    tree, archives = root / "series", root / "archives"
    (tree / "notebooks").mkdir(parents=True)
    (tree / "notebooks" / "series.py").write_text("# marks the repository's root\n")
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    for version, ref in [("1", "refs/tags/v1"), ("2", "refs/tags/v2"), ("main", "refs/heads/main")]:
        (tree / "helpers.py").write_text(f'VERSION = "{version}"\n')
        _commit_and_archive(tree, ref, archives, f"series-{version}")
        if version == "1":
            subprocess.run(["git", "-C", str(tree), "tag", "v1"], check=True)
        elif version == "2":
            subprocess.run(["git", "-C", str(tree), *GIT, "tag", "-a", "v2", "-m", "version 2"], check=True)
    _publish(tree, root / "series.git")
    return {
        "SERIES_REPO_URL": (root / "series.git").as_uri(),
        "SERIES_BRANCH": "main",
        "SERIES_ARCHIVE_URL": archives.as_uri() + "/{ref}.zip",
        "SERIES_FETCH_URL": REPO.as_uri() + "/",  # fetch_series.py as it is in this working tree
    }


@pytest.fixture
def stamped():
    """stamped(version): a released notebook's set-up cell for that version of the code, with a line that shows
    which helpers it imported."""

    def cell(version: str) -> str:
        source = legacy_setup(version)
        assert f'VERSION = "{version}"' in source and "$" not in source
        fetched = source.split("\nimport helpers")[0] + "\nimport helpers"
        return fetched + "\nprint('HELPERS', helpers.VERSION, helpers.__file__)\n"

    return cell


def _no_git(tmp_path: Path) -> str:
    """A PATH on which there is no git."""
    folder = tmp_path / "no-git-bin"
    folder.mkdir(exist_ok=True)
    return str(folder)


# ---------------------------------------------------------------------------- the set-up cell


def test_the_set_up_cell_is_read_at_a_glance_and_runs_nothing_downloaded_in_sight():
    for path in pages.notebook_paths():
        source = pages.setup_source(path.stem)
        code = [line for line in source.splitlines() if line.strip() and not line.startswith("#")]
        assert len(code) <= 8, path.stem
        assert "exec(" not in source and "urlopen" not in source and "fetch_series" not in source
        assert max(len(line) for line in source.splitlines()) <= 120


def test_the_version_and_the_address_are_written_once_in_pyproject_and_stamped_into_every_set_up_cell():
    """pyproject.toml's version names a git tag, v<version>: each set-up cell installs that tag and tells `start`
    which version it expects; the badges open the repository pyproject.toml names."""
    assert re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z._-]*", VERSION), "a tag name"
    for path in pages.notebook_paths():
        source = pages.setup_source(path.stem)
        assert f"git+https://github.com/{pages.GITHUB}@v{VERSION}\n" in source
        assert source.endswith(f'start("{path.stem}", globals(), version="{VERSION}")')
    assert pages.setup_source("03_model", "7") == pages.setup_source("03_model").replace(VERSION, "7")
    assert f"/github/{pages.GITHUB}/blob/main/notebooks/" in pages.badge("01_gpu_runtime.ipynb")
    tooling = [REPO / "notebooks" / "series.py", *(REPO / "notebooks" / "serieslib").glob("*.py")]
    tooling += [*REPO.glob("helpers*.py"), REPO / "series_setup.py"]
    assert [p.name for p in tooling if VERSION in p.read_text(encoding="utf-8")] == [], "one definition"
    assert [p.name for p in tooling if pages.GITHUB in p.read_text(encoding="utf-8")] == [], "one definition"


def _pip_line(stem: str = "05_training") -> list[str]:
    """The arguments of the set-up cell's `%pip install ...`."""
    (line,) = [line.strip() for line in pages.setup_source(stem).splitlines() if line.strip().startswith("%pip")]
    return line.split()[1:]


def test_the_set_up_cell_installs_the_series_at_its_tag_and_nothing_else(tmp_path, origin):
    """The cell's own `%pip install` line, run as Colab runs it, against a stand-in for GitHub (git's insteadOf
    sends https://github.com/<repository> to a local bare repository tagged v<version>): it installs the modules
    and the files the exercises read, at that version, and no dependency (Colab's PyTorch stays)."""
    site = tmp_path / "site"
    arguments = _pip_line()
    assert arguments[:3] == ["install", "--quiet", "--no-deps"], "no dependency: never a second PyTorch"
    env = os.environ | {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{origin['SERIES_REPO_URL']}.insteadOf",
        "GIT_CONFIG_VALUE_0": f"https://github.com/{pages.GITHUB}",
        "PIP_NO_INPUT": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pip", *arguments, "--target", str(site)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert {"helpers.py", "helpers_data.py", "helpers_exercises.py", "series_setup.py"} <= {
        p.name for p in site.glob("*.py")
    }
    assert not (site / "torch").exists() and not list(site.glob("torch-*")), "no PyTorch"
    check = (
        "import series_setup, helpers_exercises\n"
        "print(series_setup.HERE, series_setup.code_version(), series_setup.is_clone(series_setup.HERE))\n"
        "print(len(helpers_exercises.solutions('05_training')))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", check],
        env=os.environ | {"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    here, version, clone, solutions = ran.stdout.split()
    assert (here, version, clone) == (str(site), VERSION, "False"), ran.stderr
    assert int(solutions) >= 1, "the worked solutions, read from the installed notebooks"


def test_the_released_cells_fetcher_uses_the_standard_library_only():
    """fetch_series.py runs before the repository is there."""
    tree = ast.parse((REPO / "notebooks" / "fetch_series.py").read_text(encoding="utf-8"))
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name.split(".")[0] for name in imported} <= sys.stdlib_module_names
    assert fetch_series.GITHUB == pages.GITHUB, "it fetches from the repository pyproject.toml names"


class _Kernel:
    """Stands in for IPython's get_ipython(): records the line magics the cell runs."""

    def __init__(self):
        self.magics = []

    def run_line_magic(self, name, line):
        self.magics.append(f"%{name} {line}")


@pytest.mark.parametrize("installed", [True, False])
def test_the_set_up_cell_installs_only_where_the_code_is_missing(installed, monkeypatch):
    """In a clone (or once installed) the cell imports; only where series_setup is missing does it run pip."""
    import importlib.util

    from IPython.core.inputtransformer2 import TransformerManager

    source = pages.setup_source("05_training")
    python = TransformerManager().transform_cell(source.split("\nimport helpers")[0])
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: found(name) if installed else None)
    kernel = _Kernel()
    exec(python, {"get_ipython": lambda: kernel})
    expected = [] if installed else [f"%pip {' '.join(_pip_line())}"]
    assert kernel.magics == expected


# ---------------------------------------------------------------------------- released notebooks: where opened


def test_setup_in_local_jupyter_finds_the_repository():
    """A checkout around the notebook is used as it is: nothing fetched, nothing cached."""
    env = {"SERIES_REPO_URL": "file:///nowhere", "SERIES_FETCH_URL": "file:///nowhere"}
    done = _setup_in(REPO / "notebooks", env | {"SERIES_CACHE": "/nonexistent/cache"})
    assert done.returncode == 0, done.stderr
    assert f"REPO={REPO}" in done.stdout and f"HELPERS={REPO / 'helpers.py'}" in done.stdout
    assert (
        f"Series code v{VERSION} from the repository around this notebook\n" in done.stdout
        and "Fetched" not in done.stdout
    )


def test_setup_in_kaggle_clones_into_the_cache(tmp_path, origin):
    working = tmp_path / "kaggle" / "working"
    working.mkdir(parents=True)
    cache = tmp_path / "cache" / NAME
    done = _setup_in(working, origin | {"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "SERIES_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    copy = cache / VERSION
    assert f"Fetched the series' code (v{VERSION}) into {copy} with git (delete it to fetch it again)" in done.stdout
    assert f"Series code v{VERSION} from {copy}\n" in done.stdout and f"HELPERS={copy / 'helpers.py'}" in done.stdout
    assert "No tag" not in done.stdout
    again = _setup_in(working, origin | {"SERIES_CACHE": str(cache)} | OFFLINE)
    assert again.returncode == 0 and "Fetched" not in again.stdout, "fetched once, then reused, offline too"
    assert f"HELPERS={copy / 'helpers.py'}" in again.stdout


def test_setup_for_a_lone_notebook_without_git_downloads_the_archive(tmp_path, origin):
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    cache = tmp_path / "cache" / NAME
    done = _setup_in(downloads, origin | {"SERIES_CACHE": str(cache)}, path=_no_git(tmp_path))
    assert done.returncode == 0, done.stderr
    address = origin["SERIES_ARCHIVE_URL"].replace("{ref}", f"refs/tags/v{VERSION}")
    assert f"into {cache / VERSION} from {address}" in done.stdout
    assert (cache / VERSION / "notebooks" / "series.py").exists()
    assert list(cache.iterdir()) == [cache / VERSION], "no unpacking folder left behind"


def test_setup_in_colab_fetches_the_series_and_imports_helpers(tmp_path, origin):
    """With a stand-in google.colab module and Colab's working folder, the whole cell runs: fetch, then import."""
    fake = tmp_path / "fake_colab" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("# stands in for Colab's module\n")
    content = tmp_path / "content"  # Colab's working folder
    content.mkdir()
    cache = tmp_path / "root" / ".cache" / NAME
    code = legacy_setup() + "\nprint('HELPERS=' + helpers.__file__, helpers.get_default_device('cpu'))\n"
    env = origin | {"PYTHONPATH": str(tmp_path / "fake_colab"), "SERIES_CACHE": str(cache)}
    done = _setup_in(content, env, code=code)
    assert done.returncode == 0, done.stderr
    copy = cache / VERSION
    assert f"HELPERS={copy / 'helpers.py'} cpu" in done.stdout and (copy / "notebooks" / "series.py").exists()


# ---------------------------------------------------------------------------- the version a notebook was stamped with


@pytest.mark.parametrize("git", [True, False], ids=["git", "archive"])
@pytest.mark.parametrize(("mine", "other"), [("1", "2"), ("2", "1")])
def test_a_lone_notebook_imports_its_own_version_when_the_cache_holds_another(
    tmp_path, versions, stamped, mine, other, git
):
    """A notebook stamped v<mine>, run alone (no repository around it) with the cache already holding v<other>,
    fetches tag v<mine> (with git, or its archive) into a folder of its own and imports it; then each
    notebook, run again offline, imports its own version from the cache."""
    cache, lone = tmp_path / "cache", tmp_path / "Drive"
    lone.mkdir()
    env, path = versions | {"SERIES_CACHE": str(cache)}, None if git else _no_git(tmp_path)
    first = _setup_in(lone, env, path=path, code=stamped(other))
    assert f"HELPERS {other} {cache / other / 'helpers.py'}" in first.stdout, first.stderr
    done = _setup_in(lone, env, path=path, code=stamped(mine))
    assert done.returncode == 0, done.stderr
    how = "with git" if git else "from " + versions["SERIES_ARCHIVE_URL"].replace("{ref}", f"refs/tags/v{mine}")
    assert f"Fetched the series' code (v{mine}) into {cache / mine} {how}" in done.stdout
    assert f"Series code v{mine} from {cache / mine}\nHELPERS {mine} {cache / mine / 'helpers.py'}\n" in done.stdout
    assert "No tag" not in done.stdout
    for version in (other, mine):
        again = _setup_in(lone, env | OFFLINE, code=stamped(version))
        assert again.returncode == 0 and "Fetched" not in again.stdout, again.stderr
        assert f"HELPERS {version} {cache / version / 'helpers.py'}" in again.stdout
    assert sorted(p.name for p in cache.iterdir()) == ["1", "2"]


@pytest.mark.parametrize("git", [True, False], ids=["git", "archive"])
def test_a_version_not_tagged_yet_fetches_the_branch_saying_so_in_one_line(tmp_path, versions, stamped, git):
    """Before a maintainer pushes tag v3, a notebook stamped 3 gets branch main, and a line that says so."""
    cache = tmp_path / "cache"
    path = None if git else _no_git(tmp_path)
    done = _setup_in(tmp_path, versions | {"SERIES_CACHE": str(cache)}, path=path, code=stamped("3"))
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.splitlines().count(
            "No tag v3 of this series' code yet (not released): fetching branch main instead"
        )
        == 1
    )
    assert f"Fetched the series' code (main) into {cache / '3'}" in done.stdout
    assert f"HELPERS main {cache / '3' / 'helpers.py'}" in done.stdout


def test_a_set_up_cell_from_before_versions_still_gets_the_branch(tmp_path, versions, monkeypatch, capsys):
    """Notebooks saved before versions call fetch_series(CACHE) from the branch: they get the branch, as before."""
    for name, value in versions.items():
        monkeypatch.setenv(name, value)
    cache = tmp_path / "cache" / NAME
    assert fetch_series.fetch_series(cache) == cache
    assert (cache / "helpers.py").read_text() == 'VERSION = "main"\n'
    assert (
        capsys.readouterr().out
        == f"Fetched the series' code (main) into {cache} with git (delete it to fetch it again)\n"
    )


# ---------------------------------------------------------------------------- faults, each in one line


def test_setup_that_cannot_download_its_fetcher_says_what_to_do_in_one_error(tmp_path):
    """No internet (Kaggle's default): the first download fails, and one error says what to do."""
    url = "file:///no/such/folder/"
    done = _setup_in(tmp_path, {"SERIES_FETCH_URL": url, "SERIES_CACHE": str(tmp_path / "cache" / "series")})
    message = _one_line_error(done)
    assert message.startswith(f"Cannot download {url}: ") and "No such file" in message
    assert message.endswith("Turn internet on (Kaggle: Settings > Internet)")


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
    assert "No tag" not in done.stdout, "a repository that does not answer is not one without the tag"


@pytest.mark.parametrize("content", ["no helpers.py", "other files", "a file"])
def test_a_cache_folder_that_is_not_a_copy_says_which_and_to_empty_it(tmp_path, versions, stamped, content):
    """A cache folder without helpers.py (an interrupted copy, say), or with other files, or a file in its place:
    not a ModuleNotFoundError, nor "check the internet connection", but the folder and what to do."""
    cache = tmp_path / "cache"
    folder = cache / "1"
    if content == "no helpers.py":
        (folder / "notebooks").mkdir(parents=True)
        (folder / "notebooks" / "series.py").write_text("# the series' marker, without helpers.py\n")
    elif content == "other files":
        folder.mkdir(parents=True)
        (folder / "notes.txt").write_text("mine")
    else:
        cache.mkdir()
        folder.write_text("mine")
    done = _setup_in(tmp_path, versions | {"SERIES_CACHE": str(cache)}, code=stamped("1"))
    assert _one_line_error(done) == (
        f"{folder} is not a copy of this series' code (it has no helpers.py), and it is in the way: delete it or "
        "empty it, or set SERIES_CACHE to another folder, then run this cell again"
    )
    assert "ModuleNotFoundError" not in done.stderr
    assert content != "other files" or (folder / "notes.txt").read_text() == "mine", "the learner's files stay"
    (shutil.rmtree if folder.is_dir() else Path.unlink)(folder)
    again = _setup_in(tmp_path, versions | {"SERIES_CACHE": str(cache)}, code=stamped("1"))
    assert f"HELPERS 1 {folder / 'helpers.py'}" in again.stdout, "the fix the message gives works"


PAGES = {"html": b"<!DOCTYPE html>\n<html><body>Sign in to the Wi-Fi</body></html>\n", "binary": b"\x89PNG\0\0"}


@pytest.mark.parametrize("page", PAGES.values(), ids=PAGES.keys())
def test_a_web_page_instead_of_the_fetcher_says_to_log_in(tmp_path, page):
    """A captive portal (or a proxy) answers with its own page: not a SyntaxError, but what to do. (Null bytes
    raise ValueError before Python 3.12, SyntaxError since.)"""
    portal = tmp_path / "portal"
    (portal / "notebooks").mkdir(parents=True)
    (portal / "notebooks" / "fetch_series.py").write_bytes(page)
    url = portal.as_uri() + "/"
    done = _setup_in(tmp_path, {"SERIES_FETCH_URL": url, "SERIES_CACHE": str(tmp_path / "cache")})
    assert _one_line_error(done) == f"{url} sent a web page, not Python: log in to the Wi-Fi, or check the connection"


def test_a_read_only_home_says_to_set_series_cache(tmp_path, versions, stamped):
    """A home that cannot be written: not a raw OSError, but the folder, and SERIES_CACHE with an example; which
    then works. (Root writes in a read-only folder: then a home that is a file fails the same way.)"""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    if os.geteuid() == 0:
        home = tmp_path / "home-that-is-a-file"
        home.write_text("")
    work = tmp_path / "work"
    work.mkdir()
    done = _setup_in(work, versions | {"HOME": str(home)}, code=stamped("1"))
    message = _one_line_error(done)
    assert message.startswith(f"Cannot write to {home / '.cache' / NAME} (")
    assert message.endswith(
        "): set SERIES_CACHE to a writable folder (run %env SERIES_CACHE=/tmp/series in a cell), "
        "then run this cell again"
    )
    writable = tmp_path / "series"
    again = _setup_in(work, versions | {"HOME": str(home), "SERIES_CACHE": str(writable)}, code=stamped("1"))
    assert f"HELPERS 1 {writable / '1' / 'helpers.py'}" in again.stdout, again.stderr
    (tmp_path / "home").chmod(0o755)


def test_a_series_cache_typed_with_a_tilde_means_the_home_folder(tmp_path, versions, stamped):
    """`%env SERIES_CACHE=~/series`, as a learner types it: the code goes to ~/series, not to a folder named `~` in
    the notebook's folder (which a later `rm -rf ~` to remove it would turn into the home folder)."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    done = _setup_in(work, versions | {"HOME": str(home), "SERIES_CACHE": "~/series"}, code=stamped("1"))
    assert f"HELPERS 1 {home / 'series' / '1' / 'helpers.py'}" in done.stdout, done.stderr
    assert f"into {home / 'series' / '1'}" in done.stdout and not (work / "~").exists()
