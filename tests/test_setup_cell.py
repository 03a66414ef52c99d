"""The set-up cell, read at a glance and stamped from pyproject.toml's version and address: it installs the series'
code pinned to its tag where the code is missing (Colab, Kaggle, a notebook on its own), never touching PyTorch, and
only there."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

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
    v<SERIES_VERSION> (released), with the zip archives of tag and branch."""
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
    }


# ---------------------------------------------------------------------------- the set-up cell


def test_the_set_up_cell_is_read_at_a_glance_and_runs_nothing_downloaded_in_sight():
    for path in pages.notebook_paths():
        source = pages.setup_source(path.stem)
        code = [line for line in source.splitlines() if line.strip() and not line.startswith("#")]
        assert len(code) <= 9, path.stem  # the install (5), the imports (2), the blank, the start line
        assert "import ____" not in source and "____," not in source, "the blank is defined, not imported"
        assert "exec(" not in source and "urlopen" not in source
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
    site.mkdir()
    (site / "helpers.py").write_text("MINE = True\n")  # a learner's own module of the same name, already there
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
    top = {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")}
    assert top == {"pytorch_gpu_mnist", "helpers.py"}, "one folder of the series' own, nothing else at the top"
    assert (site / "helpers.py").read_text() == "MINE = True\n", "the learner's module untouched"
    (record,) = site.glob("pytorch_gpu_mnist-*.dist-info/RECORD")
    assert all(line.startswith(("pytorch_gpu_mnist/", "pytorch_gpu_mnist-")) for line in record.read_text().split()), (
        "pip uninstall removes the series' files alone"
    )
    assert not (site / "torch").exists() and not list(site.glob("torch-*")), "no PyTorch"

    def installed(code: str) -> subprocess.CompletedProcess:
        """`code` run by a Python that finds the series only where pip put it (no clone on the path: Colab)."""
        alone = f"import sys; sys.path = [p for p in sys.path if p != {str(REPO)!r}]\n"
        env = os.environ | {"PYTHONPATH": str(site)}
        return subprocess.run(
            [sys.executable, "-c", alone + code], env=env, capture_output=True, text=True, cwd=tmp_path
        )

    ran = installed(
        "import pytorch_gpu_mnist, series_setup, helpers_exercises\n"
        "print(series_setup.HERE, series_setup.installed()[0], series_setup.is_clone(series_setup.HERE))\n"
        "print(len(helpers_exercises.solutions('05_training')))\n"
    )
    here, version, clone, solutions = ran.stdout.split()
    assert (here, version, clone) == (str(site / "pytorch_gpu_mnist"), VERSION, "False"), ran.stderr
    assert int(solutions) >= 1, "the worked solutions, read from the installed notebooks"
    ran = installed("import pytorch_gpu_mnist, helpers, series_setup; series_setup.start('01_gpu_runtime', {})")
    assert f"The `helpers` imported here is {site / 'helpers.py'}, a module of your own" in ran.stderr


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
