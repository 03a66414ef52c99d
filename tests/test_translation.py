"""The Chinese edition (notebooks/zh/): built from the English notebooks and the translation files, current,
with the English code and outputs, the series' conventions, and the glossary's vocabulary."""

import copy
import io
import re
import subprocess
import sys
import tokenize
import unicodedata
from decimal import Decimal
from pathlib import Path

import nbformat
import pytest
from conftest import translated_paths

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

from serieslib import pages, runs, translation  # noqa: E402

ENGLISH = pages.notebook_paths()
ZH = REPO / "notebooks" / "zh"
IDS = [p.stem for p in ENGLISH]
CJK = re.compile(r"[\u4e00-\u9fff]")
FENCE = re.compile(r"```.*?```", re.DOTALL)
CODE_SPAN = re.compile(r"`([^`]+)`")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HAN_OR_FULL_WIDTH = f"[{translation.HAN}{translation.FULL_WIDTH}]"
FULL_WIDTH = f"[{translation.FULL_WIDTH}]"


def _pair(path):
    return nbformat.read(path, as_version=4), nbformat.read(ZH / path.name, as_version=4)


def test_every_notebook_has_a_chinese_edition():
    assert [p.name for p in translated_paths("zh")] == [p.name for p in ENGLISH]
    expected = [f"{p.stem}.md" for p in ENGLISH] + ["README.md", "comments.md", "messages.md"]
    assert sorted(p.name for p in ZH.glob("*.md")) == sorted(expected)


@pytest.mark.parametrize("path", ENGLISH, ids=IDS)
def test_every_english_markdown_cell_has_a_current_translation(path):
    english = nbformat.read(path, as_version=4)
    entries = translation.read_translation(translation.translation_file(path.name))
    assert translation.translation_problems(english, entries) == []


def test_the_committed_chinese_notebooks_are_what_translate_builds():
    assert translation.translate(check=True) == [], "notebooks/zh/ is out of date: python notebooks/series.py translate"


def _code_without_comments(source: str) -> list[tuple[int, str]]:
    """The tokens of `source` a computer reads: everything but the comments and docstrings, and where each is."""
    cell = nbformat.v4.new_code_cell(source)
    docstrings = {t.start for t in translation._reader_comments(cell) if t.type == tokenize.STRING}
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(t.start[0], t.string) for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL)
            and t.start not in docstrings]  # fmt: skip


@pytest.mark.parametrize("path", ENGLISH, ids=IDS)
def test_code_cells_and_their_outputs_are_the_english_ones(path):
    english, chinese = _pair(path)
    comments = translation.read_comments(translation.comments_file("zh"))
    assert [c.cell_type for c in chinese.cells] == [c.cell_type for c in english.cells]
    assert [c.id for c in chinese.cells] == [c.id for c in english.cells]
    for en, zh in zip(english.cells, chinese.cells):
        if en.cell_type == "code":
            localized = copy.deepcopy(en)
            translation.localize_code(localized, "zh", comments)
            assert zh == localized, f"code cell {en.id} differs from the English one beyond its language"
            exercises_only = copy.deepcopy(en)
            translation.localize_code(exercises_only, "zh")  # the binding asks for Chinese; the comments stay
            code = _code_without_comments(exercises_only.source)
            assert _code_without_comments(zh.source) == code, f"code cell {en.id}: a comment's translation changed code"
            untranslated = [c for c in translation.code_comments(zh) if not CJK.search(c)]
            assert untranslated == [], f"code cell {en.id}: comments a reader reads, still in English"
        else:
            assert zh.metadata == en.metadata
            assert zh.source != en.source and CJK.search(zh.source), f"cell {en.id} is not translated"


@pytest.mark.parametrize("path", ENGLISH, ids=IDS)
def test_chinese_notebooks_follow_the_series_conventions(path):
    english, chinese = _pair(path)
    lines = chinese.cells[0].source.splitlines()
    assert lines[0].startswith(english.cells[0].source.splitlines()[0][:7]) and CJK.search(lines[0])  # "# 05 · "
    assert lines[1] == pages.badge(f"zh/{path.name}") and f"notebooks/zh/{path.name}" in lines[1]
    assert sum("Open In Colab" in line for line in lines) == 1
    intro = next(c for c in chinese.cells if c.id.endswith("-intro"))
    assert "\n\n**本篇预期结果**：" in intro.source
    assert chinese.cells[-2].source.startswith("## 本篇小结")
    (nav,) = pages.tagged(chinese, "nav")
    assert nav is chinese.cells[-1] and nav.source == pages.nav(path, translation.translated_titles("zh"), "zh")
    (setup,) = pages.tagged(chinese, "setup")
    english_setup = copy.deepcopy(pages.tagged(english, "setup")[0])
    translation.localize_code(english_setup, "zh")  # the same code; its exercises answer in Chinese
    assert _code_without_comments(setup.source) == _code_without_comments(english_setup.source)
    assert setup.source.startswith("# @title ") and CJK.search(setup.source.splitlines()[0])  # a folded cell's title
    assert chinese.metadata["kernelspec"] == english.metadata["kernelspec"] and chinese.metadata["kernelspec"]["name"]
    assert chinese.metadata["accelerator"] == "GPU" and chinese.metadata["colab"]["gpuType"] == "T4"
    assert chinese.metadata["language"] == "zh"


def test_the_links_to_neighbours_use_the_chinese_titles():
    titles = translation.translated_titles("zh")
    assert all(CJK.search(t) for t in titles.values())
    nav = pages.nav(ENGLISH[1], titles, "zh")
    assert nav == (
        f"---\n← 上一篇：[{titles[ENGLISH[0].name]}]({ENGLISH[0].name}) &nbsp;·&nbsp; "
        f"下一篇：[{titles[ENGLISH[2].name]}]({ENGLISH[2].name}) →"
    )


def _wan_yi_forms(text: str) -> set[str]:
    """The English forms of each number written with 万 or 亿: 1.38 亿 is 138,000,000, 138,000 (K) and 138 (million)."""
    forms = set()
    for digits, unit in re.findall(r"(\d+(?:\.\d+)?) ?([万亿])", text):
        value = Decimal(digits) * (10_000 if unit == "万" else 100_000_000)
        forms |= {f"{int(value):,}", *(f"{(value / k).normalize():f}" for k in (10**3, 10**6, 10**9) if value >= k)}
    return forms


def _kept_forms(text: str) -> dict[str, set[str]]:
    """What a translation must carry over unchanged: code blocks, code spans, numbers and link targets."""
    prose = FENCE.sub(" ", text)
    return {
        "code block": set(FENCE.findall(text)),
        "code": {" ".join(span.split()) for span in CODE_SPAN.findall(prose)},  # a span may wrap differently
        "number": set(NUMBER.findall(prose)) | _wan_yi_forms(prose),  # 330 万 keeps the English 3.3 (million)
        "link": set(LINK.findall(prose)),
    }


def _comments_localized(block: str, comments: dict[str, str]) -> str:
    """A fenced code block with its comments in Chinese, as the edition's code cells have them (localize_code)."""
    fence, code = block.split("\n", 1)
    cell = nbformat.v4.new_code_cell(code.removesuffix("```").rstrip("\n"))
    translation.localize_code(cell, "zh", comments)
    return f"{fence}\n{cell.source}\n```"


@pytest.mark.parametrize("path", ENGLISH, ids=IDS)
def test_translations_keep_code_numbers_and_links(path):
    """API names, code and numbers stay in their original form: each one of the English text is in the translation.
    A code block (a worked solution's) is the English one, its comments translated by the rows of comments.md."""
    assert {"138", "138,000,000", "3.3"} <= _wan_yi_forms("1.38 亿和 330 万") and "138" not in _wan_yi_forms("1.37 亿")
    english = nbformat.read(path, as_version=4)
    entries = translation.read_translation(translation.translation_file(path.name))
    comments = translation.read_comments(translation.comments_file("zh"))
    for cell in translation.translatable(english):
        translated = _kept_forms(entries[cell.id][1])
        kept = _kept_forms(translation.english_text(cell))
        kept["code block"] = {_comments_localized(block, comments) for block in kept["code block"]}
        for what, found in kept.items():
            missing = found - translated[what]
            assert not missing, f"cell {cell.id}: the translation lacks the {what}(s) {sorted(missing)}"


def _emphasis_that_does_not_render(text: str) -> list[str]:
    """Where a `*` or `**` cannot open or close emphasis by CommonMark's flanking rules, which CJK text trips.

    A closing `**` after full-width punctuation and before a character (`**注意。**然后`) stays literal in
    Jupyter, Colab and GitHub; English text rarely meets the rule, Chinese text often does.
    """

    def punctuation(char: str) -> bool:
        return unicodedata.category(char)[0] in "PS"

    found = []
    prose = CODE_SPAN.sub("x", FENCE.sub("\n\n", text))
    for paragraph in re.split(r"\n\s*\n", prose):
        paragraph = re.sub(r"(?m)^\s*[*-] ", "", paragraph)  # list markers
        is_open: dict[int, bool] = {}
        for run in re.finditer(r"\*+", paragraph):
            before = paragraph[run.start() - 1] if run.start() else " "
            after = paragraph[run.end()] if run.end() < len(paragraph) else " "
            opens = not after.isspace() and (not punctuation(after) or before.isspace() or punctuation(before))
            closes = not before.isspace() and (not punctuation(before) or after.isspace() or punctuation(after))
            width = len(run.group())
            if not (closes if is_open.get(width) else opens):
                found.append(paragraph[max(0, run.start() - 15) : run.end() + 15])
            is_open[width] = not is_open.get(width)
    return found


@pytest.mark.parametrize("path", ENGLISH, ids=IDS)
def test_emphasis_renders_in_the_chinese_text(path):
    chinese = nbformat.read(ZH / path.name, as_version=4)
    for cell in chinese.cells:
        if cell.cell_type == "markdown":
            assert _emphasis_that_does_not_render(cell.source) == [], f"cell {cell.id}: move the * or add a space"
    assert _emphasis_that_does_not_render("**注意。**然后") and not _emphasis_that_does_not_render("**注意。** 然后")


def test_no_stray_space_between_chinese_characters_wrapped_onto_two_lines():
    text = (
        "第一行的结尾\n  第二行，\nPyTorch 接着\nGPU 开头\n\n```\n代码\n代码\n```\n答案：\n* 列表\n* 下一项\n## 标题\n"
        "正文 `code`\n（括号）的\n**后端**\n以及\n[保存和加载模型](https://x.org)的教程，\n见\n[`helpers.py`](h.py)\n"
        "[链接](a.md)\n之后\n![图](a.png)\n说明"
    )
    assert translation.unwrap_cjk(text) == (
        "第一行的结尾第二行，PyTorch 接着\nGPU 开头\n\n```\n代码\n代码\n```\n答案：\n* 列表\n* 下一项\n## 标题\n"
        "正文 `code`（括号）的**后端**以及[保存和加载模型](https://x.org)的教程，见\n[`helpers.py`](h.py)\n"
        "[链接](a.md)之后\n![图](a.png)说明"
    )
    for path in translated_paths("zh"):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                assert translation.unwrap_cjk(cell.source) == cell.source, f"{path.name} {cell.id}"


def _prose(text: str) -> str:
    """Text as a reader sees its characters: no code (each span an `x`), links as their text, no `*` markers,
    and a line break inside a paragraph as the space that Markdown renders for it."""
    lines = CODE_SPAN.sub("x", FENCE.sub("\n\n", text)).split("\n")
    joined = lines[:1]
    for previous, line in zip(lines, lines[1:]):
        if translation.BLOCK_START.match(line) or not previous.strip():
            joined.append(line)
        else:
            joined[-1] += " " + line.lstrip()
    return re.sub(r"!?\[([^\]]*)\]\([^)\s]*\)", r"\1", "\n".join(joined)).replace("*", "")


def _stray_spaces(text: str) -> list[str]:
    """Spaces between Chinese characters, or beside full-width punctuation, as rendered: past bold and links.

    A bold lead-in with a space after it (`**注意。** 然后`) shows as `注意。 然后`, a wide gap in Chinese text; so does
    a line break that `unwrap_cjk` failed to join. Table rows are left alone (their cells are padded with spaces).
    """
    stray = re.compile(rf"{HAN_OR_FULL_WIDTH}[ \t]+{HAN_OR_FULL_WIDTH}|{FULL_WIDTH}[ \t]+\S|\S[ \t]+{FULL_WIDTH}")
    lines = [line for line in _prose(text).splitlines() if not line.lstrip().startswith("|")]
    return [line[max(0, m.start() - 10) : m.end() + 10] for line in lines for m in stray.finditer(line)]


def _punctuation_inside_bold(text: str) -> list[str]:
    """Bold spans that end in full-width punctuation: Chinese style puts it after the `**` (`**注意**：然后`)."""
    spans = re.finditer(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", CODE_SPAN.sub("x", FENCE.sub("\n\n", text)), re.DOTALL)
    return [m.group() for m in spans if re.search(f"{FULL_WIDTH}$", m.group(1))]


def _chinese_italics(text: str) -> list[str]:
    """Italic spans with Chinese in them: Chinese has no italics, and browsers slant the glyphs into a fake one."""
    prose = re.sub(r"(?m)^\s*[*+-] ", "", CODE_SPAN.sub("x", FENCE.sub("\n\n", text))).replace("**", "")
    spans = re.finditer(
        r"(?<!\*)\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?!\*)|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)", prose
    )
    return [m.group() for m in spans if CJK.search(m.group())]


def _chinese_markdown() -> list[tuple[str, str]]:
    """(where, text) for every Markdown cell of the Chinese notebooks, and the Chinese README."""
    cells = [
        (f"{path.name} {cell.id}", cell.source)
        for path in translated_paths("zh")
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "markdown"
    ]
    return [*cells, ("README.md", (ZH / "README.md").read_text(encoding="utf-8"))]


def test_no_stray_space_beside_chinese_text_as_rendered():
    assert _stray_spaces("**注意。** 然后") == ["注意。 然后"] and _stray_spaces("以及\n[保存](a.md)") == ["以及 保存"]
    assert (
        _stray_spaces("**注意**：然后 PyTorch 的 `x` 和 1.38 亿（见 [GPU](a.md)）：\n* 列表\n| 表格 | 单元格 |") == []
    )
    for where, text in _chinese_markdown():
        assert _stray_spaces(text) == [], f"{where}: a space that shows as a gap in Chinese text"


def test_bold_lead_ins_put_their_punctuation_after_the_bold():
    assert _punctuation_inside_bold("**注意。** 然后，**后端**（backend）") == ["**注意。**"]
    assert _punctuation_inside_bold("**注意**：然后，**rank** 是编号。**rank 0** 保存") == []
    for where, text in _chinese_markdown():
        assert _punctuation_inside_bold(text) == [], f"{where}: write **标题**：正文, the punctuation outside the bold"


def test_chinese_text_is_never_italic():
    assert _chinese_italics("它*就是*一个，_进程_，*Settings → On*，第 *i* 行\n* 列表 *项*") == [
        "*就是*",
        "_进程_",
        "*项*",
    ]
    for where, text in _chinese_markdown():
        assert _chinese_italics(text) == [], f"{where}: Chinese has no italics; use bold, or no emphasis"


def _glossary() -> list[tuple[str, list[str]]]:
    """(term, variants not to use) from the glossary table of notebooks/zh/README.md (English, 译名, 不用, 说明)."""
    text = (ZH / "README.md").read_text(encoding="utf-8").split("## 术语表", 1)[1]
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ") and "English" not in line]
    return [(term.strip(), [v.strip() for v in avoid.split("、") if v.strip()]) for _, term, avoid, _ in rows]


SEED_TERMS = (
    "运行时类型",
    "笔记本",
    "核心",
    "矩阵乘法",
)  # the only terms of the Chinese article the project began from
DISTRIBUTED_AND_GPU_TERMS = (
    "rank",
    "world size",
    "local rank",
    "all-reduce",
    "后端",
    "节点",
    "分片",
    "会合",
    "集合通信",
)
DISTRIBUTED_AND_GPU_TERMS += ("驻留", "Tensor Core", "受限于启动开销", "受限于计算", "内核", "核函数", "占比", "份额")


def test_translations_use_the_glossary():
    glossary = _glossary()
    assert len(glossary) > 40 and dict(glossary)["张量"] == [] and "批大小" in dict(glossary)["批量大小"]
    assert (
        "轮次" in dict(glossary)["轮"]
        and {"GPU 内存", "GPU 显存"} <= set(dict(glossary)["显存"])
        and {"数字", "数值", "评估", "置信度", "试运行"} <= dict(glossary).keys()
        and "内核启动" in dict(glossary)["核函数"]
    )
    for term in SEED_TERMS + DISTRIBUTED_AND_GPU_TERMS:
        assert term in dict(glossary), f"the glossary lacks {term}"
    files = [translation.translation_file(p.name) for p in ENGLISH] + [translation.comments_file("zh")]
    files.append(ZH / "messages.md")  # the modules' messages
    readme = (ZH / "README.md").read_text(encoding="utf-8").split("## 术语表", 1)[0]
    text = "\n".join([readme, *(file.read_text(encoding="utf-8") for file in files)])
    for term, avoid in glossary:
        assert term in text, f"the glossary's {term} is never used"
        for variant in avoid:
            assert variant not in text, f"use {term}, not {variant} (notebooks/zh/README.md, 术语表)"


def test_the_chinese_readme_links_every_notebook_and_the_main_readme_links_it():
    readme = (ZH / "README.md").read_text(encoding="utf-8")
    for path in ENGLISH:
        assert f"]({path.name})" in readme, f"notebooks/zh/README.md does not link {path.name}"
    assert "](../../README.md)" in readme
    assert translation.unwrap_cjk(readme) == readme, "a line break between two Chinese characters shows as a space"
    first_lines = "\n".join((REPO / "README.md").read_text(encoding="utf-8").splitlines()[:5])
    assert "(notebooks/zh/README.md)" in first_lines


def _series_with(english: nbformat.NotebookNode, path: Path, folder: Path) -> None:
    """The English series in `folder`, the notebook at `path` replaced by `english`: a source for `translate`."""
    for other in ENGLISH:
        if other == path:
            nbformat.write(english, folder / path.name)
        else:
            (folder / other.name).write_bytes(other.read_bytes())


def test_a_changed_english_cell_makes_its_translation_stale(tmp_path):
    path = ENGLISH[4]
    english = nbformat.read(path, as_version=4)
    cell = translation.translatable(english)[2]
    cell.source += "\n\nA new English sentence."
    entries = translation.read_translation(translation.translation_file(path.name))
    (problem,) = translation.translation_problems(english, entries)
    assert f"cell {cell.id} is stale" in problem and translation.marker(cell) in problem
    with pytest.raises(translation.TranslationError, match=f"cell {cell.id} is stale"):
        translation.translate_notebook(english, path, entries, translation.translated_titles("zh"))
    # the build checks every notebook before it writes any, and names the file to fix
    _series_with(english, path, tmp_path)
    stale = rf"notebooks/zh/{path.stem}\.md:\n  cell {cell.id} is stale"
    with pytest.raises(translation.TranslationError, match=stale):
        translation.translate(check=True, source=tmp_path)


def test_missing_orphaned_and_malformed_translations_are_refused(tmp_path):
    path = ENGLISH[0]
    english = nbformat.read(path, as_version=4)
    entries = translation.read_translation(translation.translation_file(path.name))
    first, second = (c.id for c in translation.translatable(english)[:2])
    fewer = {k: v for k, v in entries.items() if k != second}
    (problem,) = translation.translation_problems(english, fewer)
    assert f"cell {second} has no translation" in problem
    extra = copy.deepcopy(entries) | {"c99-99": ("0" * 12, "多余的译文")}
    assert translation.translation_problems(english, extra) == [
        "cell c99-99 is not a Markdown cell of the English notebook any more: remove it"
    ]
    file = tmp_path / "01.md"
    file.write_text(f"<!-- cell {first} en:{'a' * 12} -->\n一\n<!-- cell {first} en:{'a' * 12} -->\n二\n")
    with pytest.raises(translation.TranslationError, match="translated twice"):
        translation.read_translation(file)
    file.write_text(f"<!-- cell {first} en:{'a' * 12} -->\n\n")
    with pytest.raises(translation.TranslationError, match="empty translation"):
        translation.read_translation(file)
    with pytest.raises(translation.TranslationError, match="is missing"):
        translation.read_translation(tmp_path / "02.md")


def test_translate_check_from_the_command_line():
    done = subprocess.run(
        [sys.executable, "notebooks/series.py", "translate", "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "notebooks/zh/: 0 notebook(s) would change" in done.stdout


def test_ruff_reads_the_chinese_notebooks():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--show-files", "."], cwd=REPO, capture_output=True, text=True
    )
    shown = {Path(line.strip()).resolve() for line in done.stdout.splitlines() if line.strip().endswith(".ipynb")}
    assert {p.resolve() for p in translated_paths("zh")} <= shown


def test_a_chinese_notebook_runs_from_its_own_folder(tmp_path, data_root):
    """Opened from notebooks/zh/ in local Jupyter, the set-up cell still finds the repository and its data."""
    import papermill

    out = tmp_path / "03_model.ipynb"
    papermill.execute_notebook(
        str(ZH / "03_model.ipynb"),
        str(out),
        parameters={"device": "cpu"},
        cwd=str(ZH),
        kernel_name="python3",
        progress_bar=False,
        extra_arguments=runs.KERNEL_ARGS,
    )
    executed, committed = nbformat.read(out, as_version=4), nbformat.read(ZH / "03_model.ipynb", as_version=4)
    checked = [c for c in committed.cells if "nbval-check-output" in c.metadata.get("tags", [])]
    ran = {c.id: c for c in executed.cells}
    assert checked and all(c.outputs for c in checked)
    # what each cell said, whole: a busy kernel may send one print's text in two stream messages
    said = lambda cell: "".join(o.get("text") or o.get("data", {}).get("text/plain", "") for o in cell.outputs)  # noqa: E731
    assert [said(ran[c.id]) for c in checked] == [said(c) for c in checked]
    assert sorted(p.name for p in ZH.iterdir() if not p.name.endswith((".ipynb", ".md"))) == []  # nothing left behind


def test_the_exercises_speak_the_editions_language_and_nothing_else_in_the_code_changes():
    english = nbformat.v4.new_code_cell('DATA, (q1, q2) = start("03_model", globals(), version="1")\nq1.check()')
    said = {lang: {"text/plain": f"{lang} line"} for lang in ("en", "zh")}
    english.outputs = [
        nbformat.v4.new_output("display_data", said["en"], metadata={"helpers_exercises": said}),
        nbformat.v4.new_output("stream", name="stdout", text="printed\n"),
    ]
    chinese = copy.deepcopy(english)
    translation.localize_code(chinese, "zh")
    assert chinese.source == 'DATA, (q1, q2) = start("03_model", globals(), version="1", lang="zh")\nq1.check()'
    assert chinese.outputs[0]["data"] == {"text/plain": "zh line"} and chinese.outputs[1] == english.outputs[1]
    plain = nbformat.v4.new_code_cell("helpers.fit(model)  # globals()")
    translation.localize_code(plain, "zh")
    assert plain.source == "helpers.fit(model)  # globals()"


def test_the_comments_a_reader_reads_are_translated_and_the_code_is_not():
    source = (
        '# @title Solution 1: batch sizes { display-mode: "form" }\n'
        "text = '# not a comment'  # a string with a hash\n"
        "# Exercise 1: three sizes\n"
        "    # warm-up\n"
        "# q1.hint()\n"
        "x = 1  # hidden layer\n"
        "class Loader:\n"
        '    """Number of batches"""\n'
        "    def size(self):  # one line\n"
        "        'Its size'\n"
        "        return 'not a docstring'"
    )
    cell = nbformat.v4.new_code_cell(source)
    assert translation.code_comments(cell) == [
        "@title Solution 1: batch sizes",
        "a string with a hash",
        "Exercise 1: three sizes",
        "warm-up",
        "hidden layer",
        "Number of batches",
        "one line",
        "Its size",
    ]
    comments = {
        "@title Solution 1: batch sizes": "@title 答案 1：批量大小",
        "a string with a hash": "含有井号的字符串",
        "Exercise 1: three sizes": "练习 1：三种大小",
        "warm-up": "预热",
        "hidden layer": "隐藏层",
        "Number of batches": "批量的个数",
        "one line": "一行",
        "Its size": "它的大小",
    }
    translation.localize_code(cell, "zh", comments)
    assert cell.source == (
        '# @title 答案 1：批量大小 { display-mode: "form" }\n'
        "text = '# not a comment'  # 含有井号的字符串\n"
        "# 练习 1：三种大小\n"
        "    # 预热\n"
        "# q1.hint()\n"
        "x = 1  # 隐藏层\n"
        "class Loader:\n"
        '    """批量的个数"""\n'
        "    def size(self):  # 一行\n"
        "        '它的大小'\n"
        "        return 'not a docstring'"
    )
    setup = nbformat.v4.new_code_cell("import os  # the set-up cell", metadata={"tags": ["setup"]})
    metrics = nbformat.v4.new_code_cell("# @title Record the metrics\n", metadata={"tags": ["metrics"]})
    assert translation.code_comments(setup) == ["the set-up cell"]  # the reader's: its title shows when folded
    assert translation.code_comments(metrics) == []  # machinery a run adds
    missing = translation.comment_problems([nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])], {})
    assert len(missing) == 8
    assert "code comment or alt text 'warm-up' has no translation: add the row `| warm-up | … |`" in "\n".join(missing)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1  # hidden layer")])
    (unused,) = translation.unused_comments([notebook], {"hidden layer": "隐藏层", "output layer": "输出层"})
    assert "no code comment or alt text reads 'output layer' any more: remove its row" in unused


def test_a_scripts_docstring_and_the_code_a_cell_prints_speak_the_translation_too():
    """10 writes two scripts and prints their diff: the diff shows the comments the Chinese scripts hold."""
    source = '%%writefile train.py\n"""One process."""\n\nx = 1  # hidden layer\n"no docstring"'
    script = nbformat.v4.new_code_cell(source)
    assert translation.code_comments(script) == ["One process.", "hidden layer"]
    printed = '-x = 1  # hidden layer\n+x = 2  # hidden layer, wider\n-"""One process."""\n# hidden layers\n'
    diff = nbformat.v4.new_code_cell("print(diff)", outputs=[nbformat.v4.new_output("stream", text=printed)])
    comments = {"One process.": "一个进程。", "hidden layer": "隐藏层"}
    translation.localize_code(script, "zh", comments)
    translation.localize_code(diff, "zh", comments)
    assert script.source == '%%writefile train.py\n"""一个进程。"""\n\nx = 1  # 隐藏层\n"no docstring"'
    assert diff.outputs[0]["text"] == (  # only a whole comment or docstring that the cells hold is translated
        '-x = 1  # 隐藏层\n+x = 2  # hidden layer, wider\n-"""一个进程。"""\n# hidden layers\n'
    )


def test_a_changed_english_comment_stops_the_build_until_it_is_translated(tmp_path):
    path = ENGLISH[5]
    english = nbformat.read(path, as_version=4)
    (cell,) = [c for c in english.cells if c.id == "c06-32"]  # its folded cell's title, a comment no other cell has
    title = "@title Notebook 05's model and its history; trained again here if 05 has not run"
    assert f"# {title} {{" in cell.source
    cell.source = cell.source.replace(title, "@title Notebook 05's model")
    entries = translation.read_translation(translation.translation_file(path.name))
    with pytest.raises(translation.TranslationError, match=re.escape(repr("@title Notebook 05's model")) + " has no"):
        translation.translate_notebook(english, path, entries, translation.translated_titles("zh"))
    _series_with(english, path, tmp_path)
    with pytest.raises(
        translation.TranslationError, match=f"no code comment or alt text reads {re.escape(repr(title))} any more"
    ):
        translation.translate(check=True, source=tmp_path)


def test_the_comments_file_is_one_row_per_comment(tmp_path):
    file = tmp_path / "comments.md"
    file.write_text("# 代码注释\n\n| English | 中文 |\n|---|---|\n| a \\| b | 甲 \\| 乙 |\n| warm-up | 预热 |\n")
    assert translation.read_comments(file) == {"a | b": "甲 | 乙", "warm-up": "预热"}
    file.write_text("| English | 中文 |\n|---|---|\n| warm-up | 预热 |\n| warm-up | 热身 |\n")
    with pytest.raises(translation.TranslationError, match="line 4: each comment needs one row"):
        translation.read_comments(file)
    file.write_text("| English | 中文 |\n|---|---|\n| warm-up |  |\n")
    with pytest.raises(translation.TranslationError, match="line 3"):
        translation.read_comments(file)


def _colon_chains(text: str) -> list[str]:
    """Sentences with two or more "：" outside code: a colon after a bold lead-in, then another within the sentence."""
    lines = [line for line in _prose(text).splitlines() if not line.lstrip().startswith("|")]  # not table rows
    sentences = re.split(r"[。！？·\n]", "\n".join(lines))
    return [s.strip() for s in sentences if s.count("：") >= 2]


def _table_problems(text: str) -> list[str]:
    """Markdown tables that GitHub would not show as tables: a header without its separator, rows of other widths."""
    problems = []
    for block in re.findall(r"(?m)(?:^\|.*\n?)+", FENCE.sub("", text)):
        rows = [re.split(r"(?<!\\)\|", row.strip())[1:-1] for row in block.strip("\n").split("\n")]
        if len(rows) < 2 or not all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in rows[1]):
            problems.append(f"a table without its separator row: {block.splitlines()[0]}")
        elif any(len(row) != len(rows[0]) for row in rows):
            problems.append(f"a table whose rows do not all have {len(rows[0])} cells: {block.splitlines()[0]}")
    return problems


def test_the_editors_mechanical_patterns_are_gone():
    """What the second review of the Chinese edition found, each a pattern a test can see."""
    assert _colon_chains("**注意**：原课程只认识 CUDA：在 Mac 上选择 CPU。**注意**：`a:b` 可以。") == [
        "注意：原课程只认识 CUDA：在 Mac 上选择 CPU"
    ]
    assert _table_problems("| # | 笔记本 | 内容 | |\n|---|---|---|\n| 01 | a | b |\n") != []
    assert _table_problems("| # | 笔记本 |\n|---|---|\n| 01 | a |\n\n正文\n\n| a | b |\n|---|---|\n") == []
    assert _stray_spaces("在“进一步探索” 一节") == ["在“进一步探索” 一节"]
    for where, text in _chinese_markdown():
        assert _colon_chains(text) == [], f"{where}: one ：to a sentence; make the second ，or —— or 。"
        prose = text.split("## 术语表", 1)[0]  # the glossary itself names the forms not to use
        assert "GPU 显存" not in prose, f"{where}: 显存 is already the GPU's memory"
        assert _table_problems(text) == [], where
    comments = translation.read_comments(translation.comments_file("zh"))
    assert [c for c in comments.values() if c.count("：") >= 2] == []


def test_curly_quotes_dashes_and_ellipses_are_full_width_in_chinese_text():
    assert translation.unwrap_cjk("见“进一步探索”\n一节。原课程——\n然后……\nPyTorch 说‘是’\n的") == (
        "见“进一步探索”一节。原课程——然后……PyTorch 说‘是’的"
    )


@pytest.mark.parametrize("path", ENGLISH, ids=IDS)
def test_the_exercises_answer_in_chinese_with_one_colon_to_a_line(path):
    """A check's line starts with its label and a colon (正确：, 还不对：); the rest has none, nor a half-width ': '."""
    lines = [
        output["data"]["text/plain"]
        for cell in nbformat.read(ZH / path.name, as_version=4).cells
        for output in cell.get("outputs", [])
        if "helpers_exercises" in output.get("metadata", {}) and "setup" not in cell.metadata.get("tags", [])
    ]
    assert lines or path.stem == "01_gpu_runtime"  # 02-11 have exercises
    for line in lines:
        label, _, said = line.partition("：")
        assert label in ("正确", "还不对", "思考题", "轮到你") and "：" not in said, line
        assert not re.search(f"{CJK.pattern}[:,] ", said), line


def test_a_run_translates_what_it_added_to_the_notebooks_as_it_is(tmp_path):
    """A run's copy keeps its settings cell's translated comments; the cells it adds (papermill's settings, the
    metrics) are machinery: no comment of theirs needs a row."""
    for path in ENGLISH:
        nbformat.write(runs._prepared(path, {"device": "cpu"}, tmp_path / "run"), tmp_path / path.name)
    assert len(translation.translate(source=tmp_path, target=tmp_path / "zh")) == len(ENGLISH)
    chinese = nbformat.read(tmp_path / "zh" / ENGLISH[0].name, as_version=4)
    (added,) = [c for c in chinese.cells if "metrics" in c.metadata.get("tags", [])]
    assert added.source.startswith("# @title Record")
    (injected,) = pages.tagged(chinese, "injected-parameters")
    assert injected.source == '# Parameters\ndevice = "cpu"\n', "papermill's cell, as papermill wrote it"
    settings = pages.settings_cell(chinese)
    assert CJK.search(settings.source.splitlines()[0]) and CJK.search(settings.source.splitlines()[1])


@pytest.mark.parametrize("path", ENGLISH, ids=IDS)
def test_the_chinese_set_up_says_its_run_line_in_chinese(path):
    """The set-up's one line (the device) is the Chinese one start() showed beside the English."""
    (setup,) = [c for c in nbformat.read(ZH / path.name, as_version=4).cells if "setup" in c.metadata.get("tags", [])]
    said = [output.get("text") or output["data"]["text/plain"] for output in setup.outputs]
    assert all(line.startswith("本次运行使用的设备是 ") for line in said), said
    assert said or path.stem == "10_many_gpus", "every set-up but 10's prints its line"
