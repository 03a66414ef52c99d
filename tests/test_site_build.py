"""The website's build (website/make_site.py), without a browser: the launch buttons' ref, the series' notebooks
among strays, each page's copy of a notebook (folds, anchors, alt text), the home page for learners, and the build's
faults, each said in one line. The faults that need Sphinx run a build of a copy of the repository with
.venv-site's Python (`make site` makes it); without it they skip. `make site-test` runs this file too.
"""

import ast
import builtins
import json
import re
import shutil
import subprocess
import symtable
import sys
import venv
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
SITE_PYTHON = REPO / ".venv-site" / "bin" / "python"
sys.path.insert(0, str(REPO / "website"))
import make_site  # noqa: E402

# The IPython names a notebook's code may use without defining them.
IPYTHON_NAMES = {"display", "get_ipython", "In", "Out", "_", "__", "___"}


def git(repo: Path, *args: str) -> None:
    """Run git in `repo`, quietly, as a throwaway identity."""
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args]
    subprocess.run(command, check=True, capture_output=True)


def test_launch_ref_is_the_version_tag_when_the_repository_has_it(tmp_path):
    """launch_ref: tag v<version> once the repository has it, the default branch before, and for a copy without git."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("x\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "x")
    make_site.launch_ref.cache_clear()
    assert make_site.launch_ref(repo, "2026.12.2") == "main"
    git(repo, "tag", "v2026.12.2")
    make_site.launch_ref.cache_clear()
    assert make_site.launch_ref(repo, "2026.12.2") == "v2026.12.2"
    assert make_site.launch_ref(repo, "2026.12.3") == "main"  # another version's tag is not this one's
    assert make_site.launch_ref(tmp_path / "no-git", "2026.12.2") == "main"
    make_site.launch_ref.cache_clear()


def test_launch_buttons_and_links_use_the_one_ref(monkeypatch):
    """Colab, Kaggle, links to the repository's files and the README's own Colab addresses: all at launch_ref()."""
    monkeypatch.setattr(make_site, "launch_ref", lambda *args: "v9.9")
    urls = make_site.launch_urls(make_site.EDITIONS["zh"], "03_model")
    assert urls["colab"].endswith(f"github/{make_site.GITHUB}/blob/v9.9/notebooks/zh/03_model.ipynb")
    assert urls["kaggle"].endswith(f"{make_site.REPOSITORY}/blob/v9.9/notebooks/zh/03_model.ipynb")
    readme = (
        f"[a](https://colab.research.google.com/github/{make_site.GITHUB}/blob/main/notebooks/01_gpu_runtime.ipynb)"
    )
    assert "/blob/v9.9/notebooks/01_gpu_runtime.ipynb" in make_site.pin(readme)
    assert "/blob/v9.9/helpers.py" in make_site.rewrite_links("[h](helpers.py)", REPO, make_site.EDITIONS["en"])


def test_readme_links_to_the_published_site():
    """README.md links to the site at pyproject.toml's Documentation address, which site.yml publishes."""
    assert f"<{make_site.DOCUMENTATION}>" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "actions/deploy-pages" in (REPO / ".github" / "workflows" / "site.yml").read_text(encoding="utf-8")


def test_project_facts_come_from_pyproject():
    """The version and addresses are pyproject.toml's, the one place."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == make_site.VERSION
    assert project["urls"]["Repository"].rstrip("/") == make_site.REPOSITORY
    assert project["urls"]["Issues"] == make_site.ISSUES
    assert make_site.DOCUMENTATION.rstrip("/") == project["urls"]["Documentation"].rstrip("/")


def write_notebook(path: Path, cells: list) -> None:
    """A small notebook at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def test_a_stray_notebook_is_not_one_of_the_series(tmp_path):
    """JupyterLab's Duplicate, 03_model-Copy1.ipynb, matches NN_*.ipynb but has no Chinese twin: a stray, named."""
    notebooks = tmp_path / "notebooks"
    for name in ["03_model", "03_model-Copy1", "04_device_transfer"]:
        write_notebook(notebooks / f"{name}.ipynb", [])
    for name in ["03_model", "04_device_transfer"]:
        write_notebook(notebooks / "zh" / f"{name}.ipynb", [])
        (notebooks / "zh" / f"{name}.md").write_text("")
    (notebooks / "zh" / "04_device_transfer.md").unlink()  # no translation file: not (yet) of the series
    assert make_site.series_notebooks(notebooks) == (["03_model"], ["03_model-Copy1.ipynb", "04_device_transfer.ipynb"])


def test_the_series_is_every_committed_notebook():
    """No committed notebook is taken for a stray."""
    series, strays = make_site.series_notebooks()
    assert strays == []
    assert len(series) == len(list((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))) >= 11


def demo_notebook(settings: bool) -> list:
    """Cells of a notebook in the series' form: title and badge, (settings,) set-up, prose, a figure, a solution."""
    badge = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://x.org/nb)"
    png = __import__("base64").b64encode(b"\x89PNG\r\n\x1a\nrest").decode()
    figure = nbformat.v4.new_code_cell(
        "plt.plot(x)", outputs=[nbformat.v4.new_output("display_data", {"image/png": png})]
    )
    figure.metadata["mystnb"] = {"image": {"alt": "Line chart of the loss against the epoch"}}
    cells = [
        nbformat.v4.new_markdown_cell(f"# 03 · The demo\n{badge}"),
        nbformat.v4.new_code_cell(
            '# @title Set-up { display-mode: "form" }\nDEVICE = start()',
            outputs=[nbformat.v4.new_output("stream", text="cpu, 2 cores\n")],
        ),
        nbformat.v4.new_markdown_cell("## The loss\n\nText. The model's loss falls, epoch by epoch:"),
        figure,
        nbformat.v4.new_code_cell(
            "# @title Solution 1\nanswer = 42", outputs=[nbformat.v4.new_output("stream", text="42\n")]
        ),
    ]
    cells[1].metadata["tags"] = ["setup"]
    cells[4].metadata["tags"] = ["solution"]
    if settings:
        parameters = nbformat.v4.new_code_cell('# @title Settings { display-mode: "form" }\nseed = 42  # @param')
        parameters.metadata["tags"] = ["parameters"]
        cells.insert(1, parameters)
    for i, cell in enumerate(cells):
        cell.id = f"c03-{i:02d}"
    return cells


@pytest.mark.parametrize("settings", [False, True], ids=["set-up-cell-alone", "settings-then-set-up"])
def test_page_copy_of_a_notebook(tmp_path, settings):
    """The page's copy: no title badge; the set-up's code removed (today) or folded under its title after a folded
    settings cell (the new first cells), its output shown; a solution folded without its answer; anchors; alt text."""
    path = tmp_path / "03_demo.ipynb"
    write_notebook(path, demo_notebook(settings))
    english = nbformat.read(path, as_version=4)
    nb, anchors = make_site.page_notebook(path, make_site.EDITIONS["en"], english)
    cells = {c.id: c for c in nb.cells}
    assert "Open In Colab" not in cells["c03-00"].source
    assert anchors == [["the-demo"], ["the-loss"]]
    offset = 1 if settings else 0
    setup, figure, solution = (cells[f"c03-{i + offset:02d}"] for i in (1, 3, 4))
    if settings:
        assert "hide-input" in cells["c03-01"].metadata["tags"]
        assert cells["c03-01"].metadata["mystnb"]["code_prompt_show"] == "Settings"
        assert "hide-input" in setup.metadata["tags"] and "remove-output" not in setup.metadata["tags"]
        assert setup.metadata["mystnb"]["code_prompt_show"] == "Set-up"
    else:
        assert "remove-input" in setup.metadata["tags"]
    assert {"hide-input", "remove-output"} <= set(solution.metadata["tags"])
    if settings:  # the settings as a learner reads them, without Colab's form marks
        assert cells["c03-01"].source == "seed = 42"
    assert figure.metadata["mystnb"]["image"]["alt"] == "Line chart of the loss against the epoch"


def test_chinese_anchors_come_from_the_english_twin(tmp_path):
    """A Chinese heading gets its English twin's anchor, the same on both pages; one without a twin, its cell's id."""
    english = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 03 · The model\n## The network")])
    english.cells[0].id = "c03-00"
    chinese = [nbformat.v4.new_markdown_cell("# 03 · 模型\n## 网络结构\n## 多出的一节")]
    chinese[0].id = "c03-00"
    write_notebook(tmp_path / "03_model.ipynb", chinese)
    _, anchors = make_site.page_notebook(tmp_path / "03_model.ipynb", make_site.EDITIONS["zh"], english)
    assert anchors == [["the-model"], ["the-network"], ["c03-00-2"]]


def test_every_page_has_anchors_for_each_heading_and_the_same_in_both_editions():
    """The committed notebooks: each Chinese page's anchors are its English twin's."""
    for name in make_site.notebook_names():
        english = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
        pages = {
            lang: make_site.page_notebook(e.notebooks / f"{name}.ipynb", e, english)[1]
            for lang, e in make_site.EDITIONS.items()
        }
        assert pages["zh"] == pages["en"], name
        assert not [a for ids in pages["zh"] for a in ids if re.match(r"c\d\d-", a)], name  # none from a cell id


def test_every_figure_has_alt_text_in_its_page_language():
    """Every figure of the committed notebooks, both languages: its cell's alt text (myst-nb's mystnb.image.alt,
    written by hand and translated in zh/comments.md), in the page's language; no two figures of a page share one."""
    for lang, edition in make_site.EDITIONS.items():
        for name in make_site.notebook_names():
            nb = nbformat.read(edition.notebooks / f"{name}.ipynb", as_version=4)
            alts = []
            for cell in nb.cells:
                if any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
                    alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
                    assert len(alt) > 20, f"{lang} {name} {cell.id}: a figure without alt text: set mystnb.image.alt"
                    assert lang == "en" or re.search("[\u4e00-\u9fff]", alt), (name, cell.id, alt)
                    alts.append(alt)
            assert len(set(alts)) == len(alts), (lang, name, [a for a in alts if alts.count(a) > 1])


def test_settings_read_as_settings_on_the_web():
    """The settings cell on a page: each setting's Colab description a comment above it, no Colab form marks."""
    source = '# @markdown Change a setting.\n# @markdown The seed.\nseed = 42  # @param {type:"integer"}\n'
    source += "# @markdown The device.\ndevice = None  # @param {type:'raw'}\n"
    expected = "# Change a setting.\n# The seed.\nseed = 42\n\n# The device.\ndevice = None\n"
    assert make_site.web_settings(source) == expected


def test_every_cell_folded_in_jupyter_is_folded_under_its_title():
    """Every code cell that Jupyter shows folded (metadata.jupyter.source_hidden), tagged or not (06's c06-32), in
    every notebook of both editions: the page folds its code under its Colab title, without the `{ display-mode:
    "form" }` part, and shows its outputs (a solution's excepted)."""
    folded = 0
    for edition in make_site.EDITIONS.values():
        for name in make_site.notebook_names():
            path = edition.notebooks / f"{name}.ipynb"
            english = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
            page = make_site.page_notebook(path, edition, english)[0]
            for cell, copy in zip(nbformat.read(path, as_version=4).cells, page.cells):
                tags = copy.metadata.get("tags", [])
                if cell.cell_type != "code" or not cell.metadata.get("jupyter", {}).get("source_hidden"):
                    continue
                if "remove-cell" in tags:
                    continue
                where, title = (path.name, cell.id), make_site.TITLE.match(cell.source.partition("\n")[0])
                assert "hide-input" in tags and ("remove-output" in tags) == ("solution" in tags), where
                assert title, f"{where}: a folded cell without a # @title line"
                prompt = copy.metadata["mystnb"]["code_prompt_show"]
                assert prompt == title["title"].replace("`", "") and "display-mode" not in prompt, where
                assert "# @title" not in copy.source, where
                folded += 1
    assert folded >= 2 * 2 * len(make_site.notebook_names())  # the settings and set-up cells at least


def test_home_page_is_for_learners():
    """Neither home page holds the maintainers' sections, nor how to build the site; each keeps the notebooks table."""
    for lang, edition in make_site.EDITIONS.items():
        page, anchors = make_site.home_page(edition)
        for heading in edition.dropped:
            assert f"## {heading}" not in page and f"### {heading}" not in page
        assert "make site" not in page and "make test" not in page, lang
        assert make_site.DOCUMENTATION.rstrip("/") not in page, lang  # "read it online", on the site itself
        assert "the-notebooks" in [a for ids in anchors for a in ids]
        badges = re.findall(r"!\[([^\]]*)\]\([^)]*colab-badge", page)
        assert badges and set(badges) == {"Open In Colab" if lang == "en" else edition.words["colab"]}, badges
    assert make_site.learners_sections("# T\n## A\n### B\ntext\n## C\n", ("A",)) == [
        (1, "", "# T\n"),
        (2, "C", "## C\n"),
    ]


def test_a_file_in_place_of_a_folder_is_named(tmp_path):
    """The build's folders: a file where a folder goes is named, with what to do; an empty path is made."""
    (tmp_path / "runs").write_text("")
    with pytest.raises(make_site.SiteError, match=r"runs is a file, not a folder: delete it"):
        make_site.fresh_folder(tmp_path / "runs" / "site-build" / "en", "the site's build folder")
    make_site.fresh_folder(tmp_path / "made" / "here", "a folder")
    assert (tmp_path / "made" / "here").is_dir()


def copy_of_repository(tmp_path: Path) -> Path:
    """The files `make site` reads, in a folder of their own (no .git: launch buttons at main)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ["README.md", "pyproject.toml"]:
        shutil.copy(REPO / name, copy / name)
    shutil.copytree(REPO / "website", copy / "website", ignore=shutil.ignore_patterns("__pycache__", "axe"))
    notebooks = shutil.ignore_patterns("*.py", "serieslib", "__pycache__", ".ipynb_checkpoints")
    shutil.copytree(REPO / "notebooks", copy / "notebooks", ignore=notebooks)
    return copy


def make_site_in(copy: Path, python: Path) -> subprocess.CompletedProcess:
    """`python website/make_site.py` in the copy, with `python`."""
    return subprocess.run(
        [str(python), str(copy / "website" / "make_site.py")], cwd=copy, capture_output=True, text=True, timeout=600
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    """The one line a failed build said; fails on a traceback or more lines."""
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_without_the_site_packages_it_says_which_file_installs_them(tmp_path):
    """A Python without the site's packages (a bare one; the notebooks' .venv): one line naming
    requirements-site.txt, and nothing made."""
    copy = copy_of_repository(tmp_path)
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    for python in [bare / "bin" / "python", Path(sys.executable)]:
        if python == Path(sys.executable) and not make_site.missing_packages():
            continue  # this Python has them all: nothing to show with it
        line = one_line(make_site_in(copy, python))
        assert "requirements-site.txt" in line and "make site" in line, line
        assert not (copy / "runs").exists() and not (copy / "site").exists()


needs_site_python = pytest.mark.skipif(not SITE_PYTHON.is_file(), reason="needs .venv-site: run make site first")


@needs_site_python
def test_build_faults_are_one_line_each(tmp_path):
    """A damaged notebook, a file in place of the site's folder or of the build's folder: each stops the build in one
    line that names the notebook or the folder, before Sphinx starts."""
    copy = copy_of_repository(tmp_path)
    notebook = copy / "notebooks" / "06_plots.ipynb"
    notebook.write_text("{not json", encoding="utf-8")
    line = one_line(make_site_in(copy, SITE_PYTHON))
    assert "notebooks/06_plots.ipynb is not a readable notebook" in line and "git checkout" in line, line
    assert not (copy / "runs").exists()  # said before anything was made
    shutil.copy(REPO / "notebooks" / "06_plots.ipynb", notebook)

    (copy / "site").write_text("in the way")
    line = one_line(make_site_in(copy, SITE_PYTHON))
    assert "cannot write the site into site/" in line and "delete" in line, line
    assert not (copy / "runs").exists() and (copy / "site").read_text() == "in the way"
    (copy / "site").unlink()

    (copy / "runs").mkdir()
    (copy / "runs" / "site-build").write_text("a damaged build state")
    line = one_line(make_site_in(copy, SITE_PYTHON))
    assert "runs/site-build is a file, not a folder" in line, line


@needs_site_python
def test_a_stray_notebook_is_skipped_and_the_site_built(tmp_path):
    """JupyterLab's Duplicate of 03 in notebooks/: one line names it, the site builds without it."""
    copy = copy_of_repository(tmp_path)
    shutil.copy(copy / "notebooks" / "03_model.ipynb", copy / "notebooks" / "03_model-Copy1.ipynb")
    result = make_site_in(copy, SITE_PYTHON)
    assert result.returncode == 0, result.stderr[-3000:]
    skipped = [line for line in result.stdout.splitlines() if "03_model-Copy1" in line]
    assert skipped == [
        "make site: skipped notebooks/03_model-Copy1.ipynb, not one of the series (it has no Chinese "
        "twin in notebooks/zh/)"
    ]
    assert (copy / "site" / "zh" / "03_model.html").is_file()
    assert not list((copy / "site").rglob("*Copy1*"))


# What a page's code may use: the names its cells define or import (folded ones included), Python's and IPython's.
def _python(source: str) -> str:
    """A cell's code as Python: IPython's magics and shell lines (%pip, !nvidia-smi) become `pass`."""
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
        for line in source.splitlines()
    )


def _names(table: symtable.SymbolTable, defined: set[str], used: set[str]) -> None:
    """Collect the module-level names a table's code defines, and the global names it uses, recursively."""
    for symbol in table.get_symbols():
        name = symbol.get_name()
        if table.get_type() == "module":
            if symbol.is_assigned() or symbol.is_imported():
                defined.add(name)
            if symbol.is_referenced():
                used.add(name)
        elif symbol.is_global() and symbol.is_referenced():
            used.add(name)
        elif symbol.is_declared_global() and symbol.is_assigned():
            defined.add(name)
    for child in table.get_children():
        _names(child, defined, used)


def undefined_names(cells: list[str]) -> set[str]:
    """Names that the code of `cells` (a page's code cells, in order) uses and that none of them defines or imports,
    nor Python's builtins or IPython's."""
    defined, used = set(dir(builtins)) | IPYTHON_NAMES, set()
    for source in cells:
        _names(symtable.symtable(_python(source), "<cell>", "exec"), defined, used)
    return used - defined


def test_undefined_names_finds_a_name_no_cell_defines():
    """The analysis the site test applies to every page: definitions anywhere in the page count (a folded cell's
    too), imports count, function parameters and comprehension variables are local, magics are skipped."""
    cells = [
        "%pip install -q x\nimport helpers\nfrom series_setup import ____, start",
        "DEVICE, DATA = start('05', globals())",
        "def fit(epochs, lr):\n    return [model(x) for x in range(epochs)]\n",
        "model = helpers.MnistModel().to(DEVICE)\nfor epoch in range(2):\n    print(fit(epoch, 0.1), seed)",
    ]
    assert undefined_names(cells) == {"seed"}
    assert undefined_names([*cells, "seed = 42  # @param"]) == set()
    assert undefined_names(["print(DEVICE)"]) == {"DEVICE"}
    ast.parse(_python("if x:\n    %pip install y"))  # an indented magic stays valid Python


def test_anchors_file_is_json_of_lists():
    """conf.py reads anchors.json: each page's sections, a list of anchors each."""
    _, anchors = make_site.home_page(make_site.EDITIONS["en"])
    assert json.loads(json.dumps({"index": anchors}))["index"][0] == ["training-a-neural-network-on-a-gpu-with-pytorch"]
