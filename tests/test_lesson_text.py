"""The lesson's text as a learner reads it: every difference from the original lesson named where the
learner meets it and listed in 02 and the README; short sentences in 01-06; terms defined where first used;
exercise cells with one blank per decision and no stored verdict that reads as a failure; 07-11 introducing what
they take from the Going further sections; and the Chinese edition's 即 kept from standing in for every colon."""

import math
import re
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))

from serieslib import pages  # noqa: E402

NOTEBOOKS = {path.stem: nbformat.read(path, as_version=4) for path in pages.notebook_paths()}
LESSON_PART = [stem for stem in NOTEBOOKS if stem < "07"]  # 01, then the lesson, 02-06
ZH = REPO / "notebooks" / "zh"


# ---------------------------------------------------------------------------- the differences from the lesson

# An item of the list: `* **Name.** What differs. <!-- cells: c02-05 c06-41 | lesson: root='data/' -->`, naming the
# cells where the learner meets the difference and what the lesson wrote there, which the text must say.
DIFFERENCE = re.compile(r"^\* \*\*.+?(?=\n\* |\n\s*\n|\Z)", re.MULTILINE | re.DOTALL)
MARK = re.compile(r"<!-- cells: (?P<cells>c\d\d-\w+(?: c\d\d-\w+)*) \| lesson: (?P<lesson>.+?) -->")


def _differences(text: str) -> list[tuple[str, list[str], str]]:
    """(the item's text, the cells it names, what the lesson wrote) for each item of a list of differences."""
    items = []
    for item in DIFFERENCE.findall(text):
        mark = MARK.search(item)
        assert mark, f"an item names no cells: {item[:80]!r}"
        items.append((" ".join(item.split()), mark["cells"].split(), mark["lesson"]))
    return items


def _where_the_learner_meets(cell_id: str, notebooks: dict) -> str:
    """The text a learner reads at a cell: a Markdown cell's own, or for a code cell the Markdown right before it."""
    nb = next((nb for stem, nb in notebooks.items() if cell_id.startswith(f"c{stem[:2]}-")), None)
    assert nb is not None, f"{cell_id} names no notebook"
    cells = nb.cells
    (index,) = [i for i, cell in enumerate(cells) if cell.id == cell_id] or [None]
    assert index is not None, f"{cell_id} is not a cell of its notebook"
    before = [cell for cell in cells[: index + 1] if cell.cell_type == "markdown"]
    return before[-1].source if before else ""


def _problems(items, notebooks) -> list[str]:
    """What is wrong with a list of differences: a cell that does not exist, or whose text does not say what the
    lesson wrote there."""
    problems = []
    for _, cells, lesson in items:
        for cell_id in cells:
            try:
                said = _where_the_learner_meets(cell_id, notebooks)
            except AssertionError as err:
                problems.append(str(err).splitlines()[0])
                continue
            if lesson not in said or "lesson" not in said:
                problems.append(f"{cell_id}: the text there does not say what the lesson writes ({lesson})")
    return problems


def _cell(stem: str, cell_id: str) -> str:
    return next(cell.source for cell in NOTEBOOKS[stem].cells if cell.id == cell_id)


def _intro(stem: str) -> str:
    return next(cell.source for cell in NOTEBOOKS[stem].cells if cell.id.endswith("-intro"))


def test_every_difference_from_the_lesson_is_named_where_the_learner_meets_it():
    items = _differences(_cell("02_data_loading", "c02-differences"))
    assert len(items) >= 9, "folder, device, seed, loaders, imports, plot settings, recaps, Jovian, %%time"
    assert _problems(items, NOTEBOOKS) == []
    named = {cell for _, cells, _ in items for cell in cells}
    recaps = {cell.id for nb in NOTEBOOKS.values() for cell in pages.tagged(nb, "recap")}
    assert recaps <= named, "each folded cell that runs the lesson's earlier code again is on the list"
    # the test can fail: a cell that does not exist, and one whose text does not say what the lesson wrote
    planted = [("x", ["c02-99"], "root='data/'"), ("y", ["c03-05"], "num_workers=4")]
    assert [p.split(":")[0] for p in _problems(planted, NOTEBOOKS)] == [
        "c02-99 is not a cell of its notebook",
        "c03-05",
    ]


def test_the_readme_lists_the_same_differences():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The original lesson", 1)[1].split("\n## ", 1)[0]
    in_02 = _differences(_cell("02_data_loading", "c02-differences"))
    assert _differences(section.split("**Credits.**")[0]) == in_02


def test_no_set_up_internals_in_the_lesson_part():
    """What a learner need not read in the lesson part: download mirrors, checksums, environment variables, the
    repository's folder, fallbacks that call the series' training code."""
    internals = re.compile(r"mirror|MD5|checksum|PyPI|HELPERS_DEVICE|REPO\b|train_lesson|relative_to", re.IGNORECASE)
    for stem in LESSON_PART:
        cells = NOTEBOOKS[stem].cells
        end = next((i for i, c in enumerate(cells) if "going-further" in c.metadata.get("tags", [])), len(cells))
        for cell in cells[:end]:
            if "setup" not in cell.metadata.get("tags", []):
                assert not internals.findall(cell.source), (stem, cell.id, internals.findall(cell.source))


# ---------------------------------------------------------------------------- sentences

ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "No.", "cf.")


def sentences(markdown: str) -> list[str]:
    """The sentences of Markdown prose: code blocks, HTML comments and a folded solution left out, each code span and
    URL one word, a link its text; a heading, a list item and a paragraph each end a sentence."""
    text = re.sub(r"```.*?```|<details>.*?</details>|<!--.*?-->", "\n\n", markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`]+`", "CODE", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"https?://\S+?(?=[.,;:)]*(?:\s|$))", "URL", text)
    found = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[*+-]|\d+\.)\s)|\n(?=#)", text):
        block = " ".join(block.split())
        for abbreviation in ABBREVIATIONS:
            block = block.replace(abbreviation, abbreviation.replace(".", "\0"))
        for sentence in re.split(r"(?<=[.!?])[)*]*\s+(?=[\"'(*]*[A-Z0-9])", block):
            if sentence := sentence.replace("\0", ".").strip():
                found.append(sentence)
    return found


def _words(sentence: str) -> int:
    return len(sentence.split())


def test_the_sentence_splitter():
    text = (
        "One sentence, e.g. MNIST, with `x.to(device). Not split` and https://x.org/a.b. Two.\n\n"
        "* A list item\n* Another. And a second one.\n\n## A heading\n```python\nx = 1. Not prose\n```"
    )
    assert sentences(text) == [
        "One sentence, e.g. MNIST, with CODE and URL.",
        "Two.",
        "* A list item",
        "* Another.",
        "And a second one.",
        "## A heading",
    ]


@pytest.mark.parametrize("stem", LESSON_PART)
def test_no_sentence_over_40_words(stem):
    long = [
        (cell.id, _words(sentence), sentence)
        for cell in NOTEBOOKS[stem].cells
        if cell.cell_type == "markdown" and "solution" not in cell.metadata.get("tags", [])
        for sentence in sentences(cell.source)
        if _words(sentence) > 40
    ]
    assert long == []


@pytest.mark.parametrize("stem", LESSON_PART)
def test_what_to_expect_in_short_sentences(stem):
    paragraph = _intro(stem).split("**What to expect.**", 1)[1].split("\n\n")[0]
    assert max(_words(sentence) for sentence in sentences(paragraph)) <= 30


# ---------------------------------------------------------------------------- terms defined where first used

# term as the text writes it -> (notebook, words of its definition, which the first cell that uses it must hold)
TERMS = {
    "seed": ("02_data_loading", "fixes the sequence"),
    "stochastic gradient descent": ("05_training", "lowers that batch's loss"),
    "`.detach()`": ("03_model", "drops that record"),
    "`state_dict()`": ("03_model", "holds its weights"),
    "`meta`": ("04_device_transfer", "holds no values"),
}


@pytest.mark.parametrize("term", TERMS)
def test_a_term_is_defined_where_a_notebook_first_uses_it(term):
    stem, definition = TERMS[term]
    first = next(
        cell
        for cell in NOTEBOOKS[stem].cells
        if cell.cell_type == "markdown" and "solution" not in cell.metadata.get("tags", [])
        and term.lower() in cell.source.lower()
    )  # fmt: skip
    assert definition in first.source, f"{stem}: {term} is first used in {first.id}, which does not define it"


# ---------------------------------------------------------------------------- exercises

# Each exercise's decisions: one ____ in its cell for each, on its own line, with a comment that says what goes there.
DECISIONS = {
    ("02_data_loading", 1): 3,  # the (batches, last) pair at each of three sizes
    ("02_data_loading", 2): 1,
    ("03_model", 1): 4,  # the count at each of four sizes
    ("03_model", 2): 3,  # the layers, the forward pass, the model made
    ("04_device_transfer", 1): 2,  # the one copy, the slice
    ("04_device_transfer", 2): 1,
    ("05_training", 1): 1,  # the run for each (size, lr)
    ("05_training", 2): 1,  # the run for each hidden size
    ("05_training", 3): 2,  # the model, its training
    ("06_plots", 1): 2,  # the schedule, the test accuracy
    ("07_error_analysis", 1): 3,  # the sure images, their count, the right ones
    ("08_checkpoints", 1): 3,  # the epochs, the load, the score
    ("09_cpu_vs_gpu", 1): 1,  # each model's time on each device
    ("10_many_gpus", 1): 3,  # the script's text, its run, the difference
    ("11_gpu_speed", 1): 3,  # the scaler, the schedule, the accuracy
}


def _learner_cell(nb, number: int):
    """The code cell that ends with exercise `number`'s check (then the hint and the solution, commented out)."""
    (cell,) = [
        c for c in nb.cells if c.cell_type == "code" and c.source.splitlines()[-3:][:1] == [f"q{number}.check()"]
    ]
    return cell


@pytest.mark.parametrize("key", DECISIONS, ids=[f"{stem}-q{n}" for stem, n in DECISIONS])
def test_an_exercise_cell_has_one_blank_per_decision(key):
    stem, number = key
    source = _learner_cell(NOTEBOOKS[stem], number).source
    assert source.count("____") == DECISIONS[key], f"{stem} q{number}: one ____ per decision"
    for line in source.splitlines():
        if "____" in line:
            assert "  # " in line.split("____", 1)[1] or line.count("____") > 1, f"say what goes there: {line}"


def test_06_exercise_names_its_first_phase_in_whole_epochs():
    """'The first half' of exercise_epochs invites exercise_epochs / 2, a float fit refuses: the text says how many."""
    nb = NOTEBOOKS["06_plots"]
    total = pages.settings(nb)["exercise_epochs"]
    (text,) = [c.source for c in nb.cells if c.cell_type == "markdown" and "`exercise_epochs` epochs in" in c.source]
    assert f"`exercise_epochs = {total}`, the first {math.ceil(total / 2)} epochs" in text


def test_every_exercise_is_in_the_table():
    import helpers_exercises

    assert set(DECISIONS) == {(stem, e.number) for stem, ex in helpers_exercises.REGISTRY.items() for e in ex}


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_no_stored_exercise_output_reads_as_a_failure(edition):
    """On a static page (GitHub, the website), a stored "Not yet" under every exercise reads as the series failing;
    a cell whose blanks are blank says so in a neutral line."""
    for stem, nb in NOTEBOOKS.items():
        if edition == "zh":
            nb = nbformat.read(ZH / f"{stem}.ipynb", as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code" or not re.search(r"^q\d\.check\(\)$", cell.source, re.MULTILINE):
                continue
            for output in cell.outputs:
                text = output.get("text", "") + output.get("data", {}).get("text/plain", "")
                assert not text.startswith(("Not yet", "还不对")), (stem, cell.id, text[:80])


# ---------------------------------------------------------------------------- 07-11 on the lesson alone

TAKEN = ("helpers.fit", "DeviceResidentLoader")  # what 07-11 use from the Going further sections of 05


@pytest.mark.parametrize("stem", [stem for stem in NOTEBOOKS if stem >= "07"])
def test_07_to_11_introduce_what_they_take_from_going_further(stem):
    """Each name is said in the prose before its first use, or in the Markdown cell right after it."""
    cells = NOTEBOOKS[stem].cells
    for name in TAKEN:
        uses = [i for i, cell in enumerate(cells) if cell.cell_type == "code" and name in cell.source]
        if not uses:
            continue
        prose = [cell.source for cell in cells[: uses[0]] if cell.cell_type == "markdown"]
        after = next((cell.source for cell in cells[uses[0] :] if cell.cell_type == "markdown"), "")
        assert any(name in text for text in prose) or name in after, f"{stem}: {name} used before it is introduced"
        assert not re.search(rf"{re.escape(name)}[`]?, which notebook 05 introduced", "\n".join(prose + [after]))


def test_an_optional_section_comes_before_the_exercise_not_after():
    for stem, nb in NOTEBOOKS.items():
        headings = [cell.source.splitlines()[0] for cell in nb.cells if cell.cell_type == "markdown" and cell.source]
        exercise = [i for i, h in enumerate(headings) if h.startswith(("## Exercise", "### Exercise"))]
        optional = [i for i, h in enumerate(headings) if h.startswith("## Optional")]
        assert not exercise or all(i < exercise[0] for i in optional), stem


# ---------------------------------------------------------------------------- the Chinese edition

JI_AS_A_COLON = re.compile(r"(?<![立随])即(?![使便可将时刻])")  # 即 alone ("that is"), not 即使, 立即, ...


def test_ji_does_not_stand_in_for_every_colon():
    """The editor counted about 100 即 used for a colon; at most about 30 in the whole edition reads naturally."""
    assert JI_AS_A_COLON.findall("即使如此，立即运行，即 X") == ["即"]
    found = sum(len(JI_AS_A_COLON.findall(path.read_text(encoding="utf-8"))) for path in ZH.glob("*.md"))
    assert found <= 30, f"{found} 即 in notebooks/zh/*.md: vary them (也就是, 写成, 用 …, a comma, or none)"


def test_speedrun_is_defined_where_09_first_uses_it():
    text = (ZH / "09_cpu_vs_gpu.md").read_text(encoding="utf-8")
    first = text.index("速通")
    assert text[first:].startswith("速通**（speedrun，"), "define 速通 where it first appears"
    assert "| speedrun | 速通 |" in (ZH / "README.md").read_text(encoding="utf-8"), "and in the glossary"


# ---------------------------------------------------------------------------- how long it takes


def _readme_times(path: Path) -> dict[str, list[int]]:
    """Each notebook's minutes in a README's table: [lesson part, in all] for 02-06, [in all] for the others."""
    rows = re.findall(r"^\| (\d\d) \|.*\| ([^|]*\d[^|]*) \|$", path.read_text(encoding="utf-8"), re.MULTILINE)
    return {number: [int(n) for n in re.findall(r"\d+", time)] for number, time in rows}


@pytest.mark.parametrize("readme", [REPO / "README.md", ZH / "README.md"], ids=["en", "zh"])
def test_the_readmes_times_are_the_measured_ones(readme):
    """The README's minutes agree, to its rounding, with `series.py times`: prose at 150 words a minute, code at 10
    lines a minute, 10 minutes an exercise (a run adds under a minute per notebook on a CPU, and is left out here)."""
    from serieslib.times import MINUTES_PER_EXERCISE, times

    stated = _readme_times(readme)
    assert sorted(stated) == [stem[:2] for stem in NOTEBOOKS], "a time for every notebook"
    for row in times():
        measured = [row["minutes"] + MINUTES_PER_EXERCISE * row["exercises"]]
        measured = [row["lesson_minutes"], *measured] if "lesson_minutes" in row else measured
        said = stated[row["notebook"][:2]]
        assert len(said) == len(measured) and all(abs(s - m) <= 4 for s, m in zip(said, measured)), (
            f"{readme.name}, {row['notebook']}: says {said} min, measured {[round(m) for m in measured]} "
            "(python notebooks/series.py times)"
        )
