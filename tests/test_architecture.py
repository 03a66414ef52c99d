"""The module rules, read from the code: imports run one way down the chain, the lesson's module holds nothing of
the later notebooks (not their imports, not their settings), no module reaches into another's private names or
replaces a model's methods (later modules wrap the model), and no listing in 01-08 shows 09-11."""

import ast
import inspect
import json
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

import helpers
import helpers_ddp
import helpers_speed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))
from serieslib import pages  # noqa: E402

# The lesson's methods: a later module wraps the model (DDP, torch.compile) and never assigns to these on it.
LESSON_METHODS = {"forward", "training_step", "validation_step", "validation_epoch_end", "epoch_end"}
# Each module may import only the ones before it: the lesson's module knows nothing of what composes around it.
CHAIN = ["helpers_data", "helpers", "helpers_speed", "helpers_ddp", "helpers_cli"]
# What notebooks 09-11 teach, and what fetches packages: none of it belongs in the lesson's module.
LATER = {"torch.distributed", "torch.amp", "torch.autocast", "GradScaler", "torch.compile", "compile", "autocast"}
PACKAGE_MANAGERS = {"pip", "subprocess", "ensurepip", "conda"}


def imports(source: str) -> set[str]:
    """Every module a source imports, and every name it imports from one ("torch.distributed", "GradScaler")."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {alias.name for alias in node.names}
    return found


def attributes(source: str) -> set[str]:
    """Every dotted name a source uses, such as "torch.compile" or "helpers._accelerator"."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            parts = [node.attr]
            value = node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name):
                names.add(".".join([value.id, *reversed(parts)]))
    return names


def rule_breaks(sources: dict[str, str]) -> list[str]:
    """What breaks the module rules in `sources` (module name -> its code); empty when they hold."""
    problems = []
    for module, source in sources.items():
        imported = imports(source)
        later = CHAIN[CHAIN.index(module) + 1 :] if module in CHAIN else []
        problems += [
            f"{module} imports {name}, which comes after it in {' <- '.join(CHAIN)}"
            for name in later
            if name in imported
        ]
        used = imported | attributes(source)
        for other in CHAIN:
            problems += [
                f"{module} uses the private {name}"
                for name in used
                if name.startswith(f"{other}._") and other != module
            ]
            problems += [
                f"{module} imports the private {alias.name} from {other}"
                for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom) and node.module == other
                for alias in node.names
                if alias.name.startswith("_")
            ]
    for module, source in sources.items():
        problems += [
            f"{module} assigns {ast.unparse(target)}: it replaces a model's method; wrap the model instead"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for attribute in ast.walk(target)
            if isinstance(attribute, ast.Attribute) and attribute.attr in LESSON_METHODS
            if not (isinstance(attribute.value, ast.Name) and attribute.value.id == "self")
        ]
    lesson = sources.get("helpers", "")
    problems += [
        f"helpers.py names {name!r}, a setting of notebooks 09-11 only: that notebook declares its settings"
        for name in sorted(later_settings())
        if name in {n.id for n in ast.walk(ast.parse(lesson)) if isinstance(n, ast.Name)} | strings(lesson)
    ]
    used = imports(lesson) | attributes(lesson)
    problems += [f"helpers.py uses {name}, which notebooks 09-11 teach" for name in sorted(used & LATER)]
    problems += [
        f"helpers.py imports the package manager {name}" for name in sorted(imports(lesson) & PACKAGE_MANAGERS)
    ]
    return problems


def strings(source: str) -> set[str]:
    """Every string constant in a source, and every key word of a call (names a table or a call might hold)."""
    tree = ast.parse(source)
    found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return found | {k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if k.arg}


def _settings(stems: str) -> set[str]:
    return {
        name
        for path in sorted((REPO / "notebooks").glob(f"{stems}_*.ipynb"))
        for name in pages.settings(nbformat.read(path, as_version=4))
    }


def later_settings() -> set[str]:
    """The settings that only notebooks 09-11 have, read from their set-up cells."""
    return (_settings("09") | _settings("1[01]")) - _settings("0[1-8]")


def module_sources() -> dict[str, str]:
    return {name: (REPO / f"{name}.py").read_text(encoding="utf-8") for name in CHAIN}


def test_the_modules_keep_the_rules():
    assert rule_breaks(module_sources()) == []


def test_the_exercise_checks_stand_apart_from_the_modules_they_check():
    """helpers_exercises reads the learner's objects only; no module of the chain depends on the exercises."""
    checks = imports((REPO / "helpers_exercises.py").read_text(encoding="utf-8"))
    assert not checks & set(CHAIN), f"helpers_exercises imports {sorted(checks & set(CHAIN))}"
    assert [m for m, source in module_sources().items() if "helpers_exercises" in imports(source)] == []


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        ("helpers", "import torch.distributed", "helpers.py uses torch.distributed"),
        ("helpers", "from torch.amp import GradScaler", "helpers.py uses GradScaler"),
        ("helpers", "model.forward = torch.compile(model.forward)", "helpers.py uses torch.compile"),
        ("helpers", "import subprocess", "helpers.py imports the package manager subprocess"),
        ("helpers_speed", "import helpers_ddp", "helpers_speed imports helpers_ddp, which comes after it"),
        ("helpers", "import helpers_speed", "helpers imports helpers_speed, which comes after it"),
        ("helpers_ddp", "count = helpers._accelerator()", "helpers_ddp uses the private helpers._accelerator"),
        ("helpers_ddp", "from helpers import _check_device", "helpers_ddp imports the private _check_device"),
        ("helpers_cli", "from helpers import LESSON, _blame_the_data", "helpers_cli imports the private _blame"),
        ("helpers_ddp", "model.training_step = ddp", "helpers_ddp assigns model.training_step: it replaces"),
        ("helpers_speed", "model.forward = torch.compile(model.forward)", "helpers_speed assigns model.forward"),
        ("helpers_ddp", "model.validation_epoch_end = f", "helpers_ddp assigns model.validation_epoch_end"),
        ("helpers", "KINDS = {'profile_steps': whole(1)}", "helpers.py names 'profile_steps', a setting of notebooks"),
    ],
)
def test_a_broken_rule_is_caught(module, line, expected):
    sources = module_sources()
    sources[module] += f"\n{line}\n"
    assert any(problem.startswith(expected) for problem in rule_breaks(sources)), rule_breaks(sources)


def test_the_later_notebooks_settings_are_known():
    """The rule above reads 09-11's settings from their set-up cells; it must find some to guard anything."""
    assert {"bench_epochs", "profile_steps", "nprocs", "wide_limit"} <= later_settings()


def _later_names() -> set[str]:
    """Names that notebooks 09-11 teach: what helpers_speed and helpers_ddp define, and DeviceResidentLoader."""
    defined = {
        name
        for module in (helpers_speed, helpers_ddp)
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }
    return defined | {"DeviceResidentLoader", "all_reduce", "autocast", "GradScaler", "distributed"}


def listings_of(cell: dict) -> list[str]:
    """The source of every object a code cell shows with `show_source(...)`, resolved in the series' modules."""
    namespace = {"helpers": helpers, "helpers_speed": helpers_speed, "helpers_ddp": helpers_ddp}
    shown = []
    for node in ast.walk(ast.parse("".join(cell["source"]))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "show_source":
            shown += [inspect.getsource(eval(ast.unparse(arg), namespace)) for arg in node.args]
    return shown


def listings(path: Path) -> list[str]:
    """The source of every object a notebook shows with `show_source(...)`."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        s for c in cells if c["cell_type"] == "code" and "show_source(" in "".join(c["source"]) for s in listings_of(c)
    ]


LESSON_NOTEBOOKS = sorted((REPO / "notebooks").glob("0[1-8]_*.ipynb"))


@pytest.mark.parametrize("path", LESSON_NOTEBOOKS, ids=lambda p: p.stem)
def test_the_listings_of_01_to_08_hold_nothing_from_09_to_11(path):
    later = _later_names()
    for source in listings(path):
        words = set(attributes(source)) | {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
        words |= {w.rsplit(".", 1)[-1] for w in words}
        assert not words & later, f"{path.name} shows code that names {sorted(words & later)}, from notebooks 09-11"


def test_a_listing_that_names_09_to_11_is_caught():
    source = inspect.getsource(helpers_speed.mixed_precision)
    words = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)} | attributes(source)
    words |= {w.rsplit(".", 1)[-1] for w in words}
    assert words & _later_names()


@pytest.mark.parametrize("path", sorted((REPO / "notebooks").glob("[01][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_every_listing_a_notebook_shows_is_the_code_as_it_is_now(path):
    """A listing (show_source's output) saved before its function changed shows the reader code that is gone."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code" or "show_source(" not in "".join(cell["source"]):
            continue
        saved = "".join("".join(o.get("data", {}).get("text/markdown", "")) for o in cell["outputs"])
        current = "\n\n".join(textwrap.dedent(source).rstrip() for source in listings_of(cell))
        assert saved == f"```python\n{current}\n```", f"{path.name} {cell['id']}: run it again (series.py refresh)"
