"""The translated editions, e.g. notebooks/zh/: built, never edited, from the English notebooks.

Code cells and outputs are the English notebook's, their comments and exercises in the reader's language
(`localize_code`). Each Markdown cell comes from notebooks/zh/NN_name.md, where a marker line
`<!-- cell c05-03 en:1a2b3c4d5e6f -->` starts the translation of cell c05-03 with a hash of the English it
translates: when that English changes, the build stops until the translation is updated. Each code comment's
translation is a row of notebooks/zh/comments.md, keyed by the English comment itself.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import io
import re
import tokenize
from pathlib import Path

import nbformat

from . import pages
from .pages import badge, nav, notebook_paths, shown, title

LANGUAGES = {"zh": "简体中文"}  # code -> name, for each translated edition
MARKER = re.compile(r"^<!-- cell (?P<id>\S+) en:(?P<hash>[0-9a-f]{12}) -->[ \t]*$", re.MULTILINE)
# Between two Chinese characters a line break shows as a stray space (before a Latin word, as the space it needs);
# next to full-width punctuation (，。：（）) a space is never wanted, whatever is on the other side.
HAN = "\u4e00-\u9fff"
FULL_WIDTH = "\u3000-\u303f\uff00-\uffef\u2018\u2019\u201c\u201d\u2026\u2014"  # with “”‘’…—, full width in Chinese
BLOCK_START = re.compile(r"\s*(?:[*+-]\s|\d+[.)]\s|#|\||>|```|$)")  # a line that starts a list item, heading, ...
LINK_END = re.compile(r"\]\([^()\s]*\)$")  # the end of a Markdown link, `](target)`, at the end of a line
EXERCISES_BINDING = re.compile(r"(= start\([^()]*globals\(\)[^()]*)\)$", re.MULTILINE)  # the set-up's start(...) line
MACHINERY = {"metrics", "solution-proof", "injected-parameters"}  # code cells that runs add, the same in every edition
CODE_BLOCK = re.compile(r"^```python\n(.*?)\n```$", re.S | re.M)  # a fenced code block in a Markdown cell
FORM = re.compile(r"\s*\{ display-mode: \"form\" \}$")  # what follows a Colab title: not the reader's text
# In printed code (10's diff of its scripts): a comment to the end of its line, and a one-line docstring.
PRINTED_CODE = (re.compile(r"(?m)(# )(.+)()$"), re.compile(r'(?m)^([-+ ]?""")(.+)(""")$'))


class TranslationError(ValueError):
    """A translation file that is missing, out of date or malformed."""


def _joins(previous: str, line: str) -> bool:
    """Whether `line` continues `previous` without the space a Markdown line break would show."""
    if BLOCK_START.match(line) or previous.lstrip().startswith(("#", "|", "```")) or not previous.strip():
        return False
    # the characters a reader sees at the join: past emphasis, a link's target, the `[` that opens a link's text
    end = LINK_END.sub("", previous.rstrip("*_")).rstrip("*_")[-1:]
    start = line.lstrip().lstrip("*_[").lstrip("*_")[:1]
    han_pair = re.match(f"[{HAN}]", end) and re.match(f"[{HAN}]", start)  # (no match on "")
    return bool(han_pair or re.match(f"[{FULL_WIDTH}]", end) or re.match(f"[{FULL_WIDTH}]", start))


def unwrap_cjk(text: str) -> str:
    """Join the lines a translator wrapped inside Chinese text (see _joins), outside code blocks."""
    lines: list[str] = []
    in_code = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and lines and _joins(lines[-1], line):
            lines[-1] += line.lstrip()
            continue
        lines.append(line)
    return "\n".join(lines)


def english_text(cell: nbformat.NotebookNode) -> str:
    """The text a translation translates: a Markdown cell without its Colab badge, which `translate` writes."""
    return "\n".join(line for line in cell.source.splitlines() if "Open In Colab" not in line)


def text_hash(text: str) -> str:
    """The short hash a translation file records for the English text of one cell."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def marker(cell: nbformat.NotebookNode) -> str:
    """The line that starts a cell's translation, with the hash of its current English text."""
    return f"<!-- cell {cell.id} en:{text_hash(english_text(cell))} -->"


def translatable(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The Markdown cells a translation file covers: all but the links to the neighbours, which are generated."""
    return [c for c in nb.cells if c.cell_type == "markdown" and "nav" not in c.metadata.get("tags", [])]


def translation_file(name: str, lang: str = "zh") -> Path:
    """Where the translation of notebook `name` (stem or file name) lives: notebooks/<lang>/<stem>.md."""
    return pages.NOTEBOOKS / lang / f"{Path(name).stem}.md"


def read_translation(path: Path) -> dict[str, tuple[str, str]]:
    """Cell id -> (hash of the English it translates, translated text), from one translation file."""
    if not path.is_file():
        raise TranslationError(f"{shown(path)} is missing: create it with a block for every Markdown cell")
    text = path.read_text(encoding="utf-8")
    marks = list(MARKER.finditer(text))
    entries: dict[str, tuple[str, str]] = {}
    for mark, following in zip(marks, [*marks[1:], None]):
        body = text[mark.end() : following.start() if following else len(text)].strip("\n").rstrip()
        if mark["id"] in entries:
            raise TranslationError(f"{shown(path)}: cell {mark['id']} is translated twice")
        if not body:
            raise TranslationError(f"{shown(path)}: cell {mark['id']} has an empty translation")
        entries[mark["id"]] = (mark["hash"], body)
    return entries


def translation_problems(english: nbformat.NotebookNode, entries: dict[str, tuple[str, str]]) -> list[str]:
    """What keeps a translation from being current: missing, stale and orphaned cells, one line each."""
    problems = []
    cells = translatable(english)
    for cell in cells:
        if cell.id not in entries:
            problems.append(f"cell {cell.id} has no translation: add a block that starts with {marker(cell)}")
        elif entries[cell.id][0] != text_hash(english_text(cell)):
            problems.append(
                f"cell {cell.id} is stale: its English text changed since it was translated. Update the "
                f"translation, then change its marker to {marker(cell)}"
            )
    known = {cell.id for cell in cells}
    problems += [
        f"cell {i} is not a Markdown cell of the English notebook any more: remove it"
        for i in entries
        if i not in known
    ]
    return problems


def comments_file(lang: str = "zh") -> Path:
    """Where the translations of the code comments live: notebooks/<lang>/comments.md, one table row each."""
    return pages.NOTEBOOKS / lang / "comments.md"


def read_comments(path: Path) -> dict[str, str]:
    """English comment -> its translation, from the rows `| English | translation |` of a comments file."""
    if not path.is_file():
        raise TranslationError(f"{shown(path)} is missing: create it with a row for every code comment")
    comments: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if not line.startswith("|") or len(cells) != 2 or set(cells[0]) <= set("-: ") or cells[0] == "English":
            continue  # prose, the header, the separator
        if not cells[1] or cells[0] in comments:
            raise TranslationError(f"{shown(path)}, line {number}: each comment needs one row with its translation")
        comments[cells[0]] = cells[1]
    return comments


def _reader_comments(cell: nbformat.NotebookNode) -> list[tokenize.TokenInfo]:
    """A code cell's comments in words (a Colab title and `# @markdown` line too, not code) and one-line docstrings."""
    if cell.cell_type != "code" or MACHINERY & set(cell.metadata.get("tags", [])):  # a run's own cells have none
        return []
    tokens, before, line, words = [], None, [""], []  # line: the last logical line's words; words: this one's
    statements = 0  # logical lines so far, a `%%writefile` line not counted
    for token in tokenize.generate_tokens(io.StringIO(cell.source).readline):
        first = before is not None and before.type == tokenize.INDENT and line[0] in ("def", "class", "async")
        first = first or (statements == 0 and token.start[1] == 0)  # a script's first statement: its docstring
        if first and token.type == tokenize.STRING and token.start[0] == token.end[0]:
            tokens.append(token)  # the first statement of a script, a function or a class, on one line
        if token.type == tokenize.NEWLINE:
            statements += words[:1] != ["%"]
            line, words = words or [""], []
        elif token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            words.append(token.string)
        before = token if token.type not in (tokenize.NL, tokenize.COMMENT) else before
        text = token.string[1:].strip()
        if token.type != tokenize.COMMENT or not text or text.startswith("@param"):  # Colab's field syntax, no words
            continue
        try:
            compile(text, "<comment>", "exec")
            is_code = "(" in text
        except SyntaxError:
            is_code = False
        if not is_code:
            tokens.append(token)
    return tokens


def _key(comment: tokenize.TokenInfo) -> str:
    """A comment as a comments file lists it: without `# ` and Colab's form options; a docstring, its text."""
    if comment.type == tokenize.STRING:
        return ast.literal_eval(comment.string)
    return FORM.sub("", comment.string[1:].strip())


def code_comments(cell: nbformat.NotebookNode) -> list[str]:
    """The translatable comments of a code cell, and its figure's alt text (myst-nb's), as keys of a comments file."""
    alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
    return [_key(token) for token in _reader_comments(cell)] + ([alt] if alt else [])


def _used_comments(notebooks: list[nbformat.NotebookNode]) -> set[str]:
    """The comments of the code cells, and of the code blocks in Markdown cells (a worked solution's)."""
    cells = [cell for nb in notebooks for cell in nb.cells]
    markdown = [cell.source for cell in cells if cell.cell_type == "markdown"]
    blocks = [nbformat.v4.new_code_cell(code) for source in markdown for code in CODE_BLOCK.findall(source)]
    return {text for cell in [*cells, *blocks] for text in code_comments(cell)}


def comment_problems(notebooks: list[nbformat.NotebookNode], comments: dict[str, str]) -> list[str]:
    """The comments of `notebooks` that have no translation, one line each."""
    file = shown(comments_file())
    missing = sorted(_used_comments(notebooks) - comments.keys())
    return [
        f"code comment or alt text {text!r} has no translation: add the row `| {text} | … |` to {file}"
        for text in missing
    ]


def unused_comments(notebooks: list[nbformat.NotebookNode], comments: dict[str, str]) -> list[str]:
    """The rows of a comments file that no comment of `notebooks` (all of them) reads any more, one line each."""
    return [
        f"{shown(comments_file())}: no code comment or alt text reads {text!r} any more: remove its row"
        for text in sorted(comments.keys() - _used_comments(notebooks))
    ]


def localize_code(cell: nbformat.NotebookNode, lang: str, comments: dict[str, str] | None = None) -> None:
    """Make a code cell speak `lang`: its comments (from `comments`), its exercises' binding and their outputs."""
    tokens = _reader_comments(cell) if comments is not None else []
    if tokens:
        lines = cell.source.split("\n")
        for token in sorted(tokens, key=lambda t: t.start, reverse=True):  # the later first: the earlier stay put
            (row, column), line = token.start, lines[token.start[0] - 1]
            if token.type == tokenize.STRING:  # a docstring: the same quotes around its translation
                opening = re.match(r"[rRuU]?(\"\"\"|'''|\"|')", token.string)
                said = opening.group() + comments[_key(token)] + opening.group(1)
                lines[row - 1] = line[:column] + said + line[token.end[1] :]
                continue
            form = FORM.search(token.string)
            lines[row - 1] = line[:column] + f"# {comments[_key(token)]}" + (form.group() if form else "")
        cell.source = "\n".join(lines)
    image = cell.metadata.get("mystnb", {}).get("image", {})
    if comments and "alt" in image:
        image["alt"] = comments[image["alt"]]
    cell.source = EXERCISES_BINDING.sub(rf'\1, lang="{lang}")', cell.source)
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and comments:  # code printed (10's diff of its scripts) as written
            for printed in PRINTED_CODE:
                output["text"] = printed.sub(lambda m: m[1] + comments.get(m[2], m[2]) + m[3], output["text"])
        translated = output.get("metadata", {}).get("helpers_exercises", {}).get(lang)
        if translated:
            output["data"] = copy.deepcopy(translated)


def translate_notebook(
    english: nbformat.NotebookNode,
    path: Path,
    entries: dict,
    titles: dict[str, str],
    lang: str = "zh",
    comments: dict[str, str] | None = None,
) -> nbformat.NotebookNode:
    """A copy of `english` (committed or executed) with its Markdown in `lang`, its code and outputs localized."""
    comments = read_comments(comments_file(lang)) if comments is None else comments
    problems = translation_problems(english, entries) + comment_problems([english], comments)
    if problems:
        raise TranslationError(f"{shown(translation_file(path.name, lang))}:\n  " + "\n  ".join(problems))
    nb = copy.deepcopy(english)
    for cell in nb.cells:
        if cell.cell_type == "code":
            localize_code(cell, lang, comments)
        elif cell.cell_type == "markdown" and "nav" in cell.metadata.get("tags", []):
            cell.source = nav(path, titles, lang)
        elif cell.cell_type == "markdown":
            text = unwrap_cjk(entries[cell.id][1])  # a no-op on text without CJK characters
            if cell is nb.cells[0]:
                first, *rest = text.splitlines()
                text = "\n".join([first, badge(f"{lang}/{path.name}"), *rest])
            cell.source = text
    nb.metadata["language"] = lang  # what a reader of the .ipynb sees it is written in
    return nb


def translated_titles(lang: str = "zh") -> dict[str, str]:
    """Every notebook's translated title (the first line of its first cell, without '# '), by file name."""
    titles = {}
    for path in notebook_paths():
        first = nbformat.read(path, as_version=4).cells[0]
        file = translation_file(path.name, lang)
        entry = read_translation(file).get(first.id) if file.is_file() else None  # its own build reports it
        titles[path.name] = entry[1].splitlines()[0].lstrip("# ").strip() if entry else title(path)
    return titles


def translate(
    names: list[str] | None = None,
    lang: str = "zh",
    check: bool = False,
    source: Path | None = None,
    target: Path | None = None,
) -> list[str]:
    """Build notebooks/<lang>/ (or `target`) from `source`; return the names changed, written unless `check`."""
    titles = translated_titles(lang)
    comments = read_comments(comments_file(lang))
    built, problems, englishes = {}, [], []
    for path in notebook_paths(names):
        english = nbformat.read((source or pages.NOTEBOOKS) / path.name, as_version=4)
        englishes.append(english)
        try:
            entries = read_translation(translation_file(path.name, lang))
            built[path.name] = translate_notebook(english, path, entries, titles, lang, comments)
        except TranslationError as err:
            problems.append(str(err))
    if not names:  # every notebook read: a row that no comment uses is stale
        problems += unused_comments(englishes, comments)
    if problems:  # every notebook's, before anything is written
        raise TranslationError("\n".join(problems))
    return _write_changed(built, target or pages.NOTEBOOKS / lang, check)


def _write_changed(built: dict[str, nbformat.NotebookNode], folder: Path, check: bool) -> list[str]:
    """Write the notebooks of `built` that differ from those in `folder` (with `check`, none); return their names."""
    changed = []
    for name, nb in built.items():
        text = nbformat.writes(nb)
        text += "" if text.endswith("\n") else "\n"  # as nbformat.write ends a file
        if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text:
            changed.append(name)
            if not check:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(text, encoding="utf-8")
    return changed
