"""Where each helper belongs, and the rules between the modules, read from the code and the notebooks.

`MODULES` says what each module holds, in the order imports run; `HOMES` names the module of each helper a reader
might look for elsewhere. The rules: imports run down `MODULES` with no private names across and no model's method
replaced (later modules wrap the model); helpers.py holds what notebooks 01-08 use or define, and nothing of what
09-11 teach; helpers_common holds only what two later modules share, and helpers_ddp takes nothing generic from
helpers_speed; the input pipelines are one registry; the lesson's four lines are written twice only, in `fit` and in
the benchmarks' `train_epoch`, each loop starting with them in order and holding no branch; series_setup.py builds on
helpers, helpers_data and helpers_exercises, and no module imports it; and no listing in 01-08 shows 09-11. Each rule
is seen failing on a planted break."""

import ast
import importlib
import inspect
import json
import re
import sys
import textwrap
from functools import cache
from pathlib import Path

import nbformat
import pytest

import helpers
import helpers_common
import helpers_ddp
import helpers_run
import helpers_speed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "notebooks"))
from serieslib import pages  # noqa: E402

# Each module, what it holds and the notebooks it serves, in the order imports run: a module imports only those above.
MODULES = {
    "helpers_data": "the data files, fetched online or offline and verified (02, through helpers.load_mnist)",
    "helpers": "what notebooks 01-08 teach, in their order, under the lesson's names: devices, data and loaders, the "
    "model, evaluate and fit, checkpoints, plots, error analysis, DeviceResidentLoader (04-08; 09 measures it)",
    "helpers_common": "what helpers_speed and helpers_ddp both build on: Wrapped, train_epoch, take_turns, tables",
    "helpers_run": "the input pipelines, one registry (each process's share a second dimension), and train_lesson, "
    "the lesson's run in one call (06 and 07 fall back on it, 10 compares with it, the command line trains with it)",
    "helpers_speed": "speed: the benchmarks, mixed precision, TF32, torch.compile, the speedrun, the profiler (09, 11)",
    "helpers_ddp": "many processes: the process group, DDPModel, launching with torchrun or spawn, benchmark_ddp (10)",
    "helpers_cli": "the command line: python helpers_cli.py ..., torchrun ... helpers_cli.py ...",
}
CHAIN = list(MODULES)
# Where each helper belongs that a reader might look for elsewhere: its one module, which no other defines it in.
HOMES = {
    "make_loaders": "helpers",  # notebook 02's seeded loaders
    "DeviceResidentLoader": "helpers",  # 04-08 use it to keep their demos quick; 09 measures it
    "fit": "helpers",
    "Wrapped": "helpers_common",
    "train_epoch": "helpers_common",
    "epoch_times": "helpers_common",
    "markdown_table": "helpers_common",
    "PIPELINES": "helpers_run",
    "taught_loaders": "helpers_run",  # the one function that makes the lesson's loaders exactly as taught
    "ShardedSampler": "helpers_run",
    "check_processes": "helpers_run",
    "check_schedule": "helpers_run",
    "train_lesson": "helpers_run",
    "MixedPrecision": "helpers_speed",
    "ScaledOptimizer": "helpers_speed",
    "DDPModel": "helpers_ddp",
    "train_distributed": "helpers_ddp",
    "take_turns": "helpers_common",  # the benchmarks' configurations, one epoch each in turn
    "check_seed": "helpers",  # the seed's range, checked once for the lesson, the command line and the notebooks
}
# What helpers_ddp may take from helpers_speed: its speed features, and their check. What both need besides is
# helpers_common's.
SPEED_FEATURES = {"mixed_precision", "compile_model", "check_speed_features"}
# Where the lesson's four lines are written: the lesson's fit, and the bare loop that the benchmarks time.
FOUR_LINES = {"helpers.fit", "helpers_common.train_epoch"}
# The lesson's loop: `for batch in ...:`, these four statements first and in this order, and no branch in it.
THE_FOUR_LINES = ["loss = model.training_step(batch)", "loss.backward()", "optimizer.step()", "optimizer.zero_grad()"]
BRANCHES = (ast.If, ast.IfExp, ast.Match)
# The lesson's methods: a later module wraps the model (DDP, torch.compile) and never assigns to these on it.
LESSON_METHODS = {"forward", "training_step", "validation_step", "validation_epoch_end", "epoch_end"}
# The notebooks' set-up: what it builds on, of the series' modules; and no module imports it (the notebooks do).
SETUP = "series_setup"
SETUP_IMPORTS = {"helpers", "helpers_data", "helpers_exercises"}
SERIES_MODULES = {*MODULES, "helpers_exercises", SETUP}
# What notebooks 09-11 teach, and what fetches packages: none of it belongs in the lesson's module.
LATER = {"torch.distributed", "torch.amp", "torch.autocast", "GradScaler", "torch.compile", "compile", "autocast"}
PACKAGE_MANAGERS = {"pip", "subprocess", "ensurepip", "conda"}


@cache
def parsed(source: str) -> ast.Module:
    """The syntax tree of a source, parsed once however many rules read it."""
    return ast.parse(source)


@cache
def imports(source: str) -> frozenset[str]:
    """Every module a source imports, and every name it imports from one ("torch.distributed", "GradScaler")."""
    found = set()
    for node in ast.walk(parsed(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {alias.name for alias in node.names}
    return frozenset(found)


@cache
def imported_from(source: str, module: str) -> frozenset[str]:
    """The names a source takes from `module`: `from module import name` and `module.name`."""
    tree = parsed(source)
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == module for a in n.names}
    return frozenset(names | {name.split(".")[1] for name in attributes(source) if name.startswith(f"{module}.")})


@cache
def attributes(source: str) -> frozenset[str]:
    """Every dotted name a source uses, such as "torch.compile" or "helpers._accelerator"."""
    names = set()
    for node in ast.walk(parsed(source)):
        if isinstance(node, ast.Attribute):
            parts = [node.attr]
            value = node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name):
                names.add(".".join([value.id, *reversed(parts)]))
    return frozenset(names)


@cache
def defined(source: str) -> frozenset[str]:
    """The names a module defines at its top level: functions, classes and assigned names."""
    found = set()
    for node in parsed(source).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return frozenset(found)


@cache
def four_line_loops(source: str) -> frozenset[str]:
    """The functions whose `for` loop holds the lesson's four lines: training_step, backward, step, zero_grad."""
    found = set()
    for function in ast.walk(parsed(source)):
        if isinstance(function, ast.FunctionDef):
            for loop in (n for n in ast.walk(function) if isinstance(n, ast.For)):
                called = {c.func.attr for c in ast.walk(loop) if isinstance(c, ast.Call) and hasattr(c.func, "attr")}
                if {"training_step", "backward", "step", "zero_grad"} <= called:
                    found.add(function.name)
    return frozenset(found)


def _calls(node: ast.AST, method: str) -> bool:
    return any(isinstance(c, ast.Call) and getattr(c.func, "attr", None) == method for c in ast.walk(node))


def lesson_loops(function: ast.FunctionDef) -> list[ast.For]:
    """The innermost `for` loops of `function` that call `training_step`: fit's `for batch in ...:`, not its epochs'."""
    loops = [n for n in ast.walk(function) if isinstance(n, ast.For) and _calls(n, "training_step")]
    return [loop for loop in loops if not any(other is not loop and other in ast.walk(loop) for other in loops)]


def loop_breaks(sources: dict[str, str]) -> list[str]:
    """Where the four lines are written, the loop is `for batch in ...:`, starts with them in order, never branches."""
    problems = []
    for qualified in sorted(FOUR_LINES):
        module, name = qualified.split(".")
        tree = parsed(sources.get(module, ""))
        loops = [loop for f in tree.body if getattr(f, "name", None) == name for loop in lesson_loops(f)]
        if not loops:
            problems.append(f"{qualified} has no `for batch in ...:` loop of the lesson's four lines")
        for loop in loops:
            written = [ast.unparse(statement) for statement in loop.body[:4]]
            if ast.unparse(loop.target) != "batch" or written != THE_FOUR_LINES:
                problems.append(
                    f"{qualified}'s loop does not start with the lesson's four lines, in order, under "
                    f"`for batch in ...:`: it has `for {ast.unparse(loop.target)} in ...:` and {written}"
                )
            branches = [n for statement in loop.body for n in ast.walk(statement) if isinstance(n, BRANCHES)]
            problems += [
                f"{qualified}'s loop branches ({ast.unparse(branch).splitlines()[0]}): what fit adds goes around the "
                "loop, and a wrapper of the model changes how a step runs"
                for branch in branches[:1]
            ]
    return problems


def patches(source: str) -> list[str]:
    """How a source replaces a model's lesson method other than by assigning it: setattr, __setattr__, MethodType."""
    tree, found = parsed(source), []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        setter = getattr(call.func, "id", None) == "setattr" or getattr(call.func, "attr", None) == "__setattr__"
        named = [a.value for a in call.args if isinstance(a, ast.Constant) and a.value in LESSON_METHODS]
        on_self = bool(call.args) and ast.unparse(call.args[0]) == "self"  # a wrapper's own method
        if setter and named and not on_self:
            found.append(f"calls {ast.unparse(call.func)}(..., {named[0]!r}, ...)")
    bound = {name for name in attributes(source) if name.endswith("types.MethodType")}
    bound |= {
        a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "types"
        for a in n.names
        if a.name == "MethodType"
    }
    return found + [f"uses {name}" for name in sorted(bound)]


@cache
def lesson_notebooks_use() -> frozenset[str]:
    """What notebooks 01-08 (and their set-up, series_setup.py) use of helpers, and the lesson's names they define."""
    used = set()
    for path in sorted((REPO / "notebooks").glob("0[1-8]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            used |= set(re.findall(r"\bhelpers\.(\w+)", cell.source))
            if cell.cell_type == "code":
                used |= set(re.findall(r"^(?:def|class) (\w+)", cell.source, re.MULTILINE))
    setup = REPO / "series_setup.py"
    if setup.exists():
        source = setup.read_text(encoding="utf-8")
        used |= imported_from(source, "helpers")
    return frozenset(used)


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
                f"{module} imports the private {name} from {other}"
                for name in sorted(imported_from(source, other))
                if name.startswith("_")
            ]
        problems += [
            f"{module} assigns {ast.unparse(target)}: it replaces a model's method; wrap the model instead"
            for node in ast.walk(parsed(source))
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for attribute in ast.walk(target)
            if isinstance(attribute, ast.Attribute) and attribute.attr in LESSON_METHODS
            if not (isinstance(attribute.value, ast.Name) and attribute.value.id == "self")
        ]
        problems += [
            f"{module} {patch}: it replaces a model's method; wrap the model instead" for patch in patches(source)
        ]
        problems += [
            f"{module} defines {name}, which belongs in {HOMES[name]}"
            for name in sorted(defined(source) & set(HOMES))
            if HOMES[name] != module
        ]
        problems += [
            f"{module} defines {name}: the input pipelines are one registry, helpers_run.PIPELINES"
            for name in sorted(defined(source))
            if name.endswith("PIPELINES") and module != "helpers_run"
        ]
        problems += [
            f"{module}.{name} writes the lesson's four lines again: call helpers.fit or helpers_common.train_epoch"
            for name in sorted(four_line_loops(source))
            if f"{module}.{name}" not in FOUR_LINES
        ]
    problems += loop_breaks(sources) + setup_breaks(sources)
    return problems + lesson_module_breaks(sources) + later_module_breaks(sources)


def setup_breaks(sources: dict[str, str]) -> list[str]:
    """series_setup.py builds on helpers, helpers_data and helpers_exercises only; no module of the series imports it.

    The notebooks import it, and so do the series' tools (notebooks/serieslib), which write and check their cells.
    """
    taken = imports(sources.get(SETUP, "")) & (SERIES_MODULES - SETUP_IMPORTS - {SETUP})
    problems = [
        f"{SETUP} imports {name}: the notebooks' set-up builds on {', '.join(sorted(SETUP_IMPORTS))} only"
        for name in sorted(taken)
    ]
    return problems + [
        f"{module} imports {SETUP}, which only the notebooks import (it runs their set-up)"
        for module, source in sources.items()
        if module != SETUP and SETUP in imports(source)
    ]


def lesson_module_breaks(sources: dict[str, str]) -> list[str]:
    """helpers.py holds what notebooks 01-08 use or define, and nothing of what 09-11 teach or of a package manager."""
    lesson = sources.get("helpers", "")
    tree = parsed(lesson)
    own = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    problems = [
        f"helpers.{name} is used by no notebook 01-08 and by nothing else in helpers.py: it belongs with what uses it"
        for name in sorted(defined(lesson) - own - lesson_notebooks_use())
        if not name.startswith("_")
    ]
    problems += [
        f"helpers.py names {name!r}, a setting of notebooks 09-11 only: that notebook declares its settings"
        for name in sorted(later_settings())
        if name in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | strings(lesson)
    ]
    used = imports(lesson) | attributes(lesson)
    problems += [f"helpers.py uses {name}, which notebooks 09-11 teach" for name in sorted(used & LATER)]
    return problems + [
        f"helpers.py imports the package manager {name}" for name in sorted(imports(lesson) & PACKAGE_MANAGERS)
    ]


def later_module_breaks(sources: dict[str, str]) -> list[str]:
    """helpers_common holds only what two later modules share; helpers_ddp takes only speed features from speed."""
    common = sources.get("helpers_common", "")
    later = CHAIN[CHAIN.index("helpers_common") + 1 :]
    users = {
        name: [m for m in later if name in imported_from(sources.get(m, ""), "helpers_common")]
        for name in defined(common)
        if not name.startswith("_")
    }
    problems = [
        f"helpers_common.{name} is used by {used[0]} alone: it belongs there"
        if used
        else f"helpers_common.{name} is used by no later module: it belongs with what uses it"
        for name, used in users.items()
        if len(used) < 2
    ]
    return problems + [
        f"helpers_ddp imports {name} from helpers_speed, which is no speed feature: shared parts are helpers_common's"
        for name in sorted(imported_from(sources.get("helpers_ddp", ""), "helpers_speed") - SPEED_FEATURES)
    ]


@cache
def strings(source: str) -> frozenset[str]:
    """Every string constant in a source, and every key word of a call (names a table or a call might hold)."""
    tree = parsed(source)
    found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return frozenset(found | {k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if k.arg})


def _settings(stems: str) -> set[str]:
    return {
        name
        for path in sorted((REPO / "notebooks").glob(f"{stems}_*.ipynb"))
        for name in pages.settings(nbformat.read(path, as_version=4))
    }


@cache
def later_settings() -> frozenset[str]:
    """The settings that only notebooks 09-11 have, read from their set-up cells."""
    return frozenset((_settings("09") | _settings("1[01]")) - _settings("0[1-8]"))


def module_sources() -> dict[str, str]:
    """The code of every module of the series: the chain, the exercises' checks and the notebooks' set-up."""
    return {name: (REPO / f"{name}.py").read_text(encoding="utf-8") for name in [*CHAIN, "helpers_exercises", SETUP]}


def test_the_modules_keep_the_rules():
    assert rule_breaks(module_sources()) == []


def test_every_module_of_the_series_is_in_the_map():
    """A new helpers_*.py module gets its line in MODULES (what it holds, where its imports stand) before it counts."""
    found = {path.stem for path in REPO.glob("helpers*.py")} - {"helpers_exercises"}
    assert found == set(MODULES)
    assert all(hasattr(importlib.import_module(home), name) for name, home in HOMES.items()), "each where it belongs"


def test_the_exercise_checks_stand_apart_from_the_modules_they_check():
    """helpers_exercises reads the learner's objects only; no module of the chain depends on the exercises."""
    checks = imports((REPO / "helpers_exercises.py").read_text(encoding="utf-8"))
    assert not checks & set(CHAIN), f"helpers_exercises imports {sorted(checks & set(CHAIN))}"
    assert [m for m in CHAIN if "helpers_exercises" in imports(module_sources()[m])] == [], "the set-up binds them"


FOUR_LINES_AGAIN = """
def my_epoch(model, loader, optimizer):
    for batch in loader:
        loss = model.training_step(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        ("helpers", "import torch.distributed", "helpers.py uses torch.distributed"),
        ("helpers", "from torch.amp import GradScaler", "helpers.py uses GradScaler"),
        ("helpers", "model.forward = torch.compile(model.forward)", "helpers.py uses torch.compile"),
        ("helpers", "import subprocess", "helpers.py imports the package manager subprocess"),
        ("helpers_speed", "import helpers_ddp", "helpers_speed imports helpers_ddp, which comes after it"),
        ("helpers", "import helpers_speed", "helpers imports helpers_speed, which comes after it"),
        ("helpers_common", "import helpers_run", "helpers_common imports helpers_run, which comes after it"),
        ("helpers_ddp", "count = helpers._accelerator()", "helpers_ddp uses the private helpers._accelerator"),
        ("helpers_ddp", "from helpers import _check_device", "helpers_ddp imports the private _check_device"),
        ("helpers_cli", "from helpers import LESSON, _blame_the_data", "helpers_cli imports the private _blame"),
        ("helpers_ddp", "model.training_step = ddp", "helpers_ddp assigns model.training_step: it replaces"),
        ("helpers_speed", "model.forward = torch.compile(model.forward)", "helpers_speed assigns model.forward"),
        ("helpers_ddp", "model.validation_epoch_end = f", "helpers_ddp assigns model.validation_epoch_end"),
        ("helpers", "KINDS = {'profile_steps': whole(1)}", "helpers.py names 'profile_steps', a setting of notebooks"),
        # helpers.py holds what 01-08 use: section 9's command-line helpers put back are caught twice
        ("helpers", "def check_schedule(epochs, lrs):\n    pass", "helpers.check_schedule is used by no notebook"),
        ("helpers", "def check_schedule(epochs, lrs):\n    pass", "helpers defines check_schedule, which belongs in"),
        ("helpers", "PIPELINES = {'lesson': None}", "helpers defines PIPELINES, which belongs in helpers_run"),
        ("helpers", "def train_lesson():\n    pass", "helpers defines train_lesson, which belongs in helpers_run"),
        ("helpers_run", "class DeviceResidentLoader:\n    pass", "helpers_run defines DeviceResidentLoader"),
        ("helpers_speed", "class DDPModel(Wrapped):\n    pass", "helpers_speed defines DDPModel, which belongs in"),
        # one registry of pipelines, one copy of the four lines, generic parts below speed and DDP
        ("helpers_speed", "BENCH_PIPELINES = {}", "helpers_speed defines BENCH_PIPELINES: the input pipelines are one"),
        ("helpers_speed", FOUR_LINES_AGAIN, "helpers_speed.my_epoch writes the lesson's four lines again"),
        ("helpers_ddp", "from helpers_speed import epoch_times", "helpers_ddp imports epoch_times from helpers_speed"),
        ("helpers_common", "def for_speed():\n    pass", "helpers_common.for_speed is used by no later module"),
        # patching by other means than an assignment
        ("helpers_ddp", "setattr(model, 'training_step', step)", "helpers_ddp calls setattr(..., 'training_step'"),
        ("helpers_speed", "object.__setattr__(model, 'forward', f)", "helpers_speed calls object.__setattr__(..."),
        ("helpers_speed", "step = types.MethodType(compiled, model)", "helpers_speed uses types.MethodType"),
        ("helpers_ddp", "from types import MethodType", "helpers_ddp uses MethodType: it replaces"),
        # the notebooks' set-up: what it builds on, and nothing of the series imports it
        ("series_setup", "import helpers_speed", "series_setup imports helpers_speed: the notebooks' set-up builds"),
        ("series_setup", "from helpers_run import train_lesson", "series_setup imports helpers_run: the notebooks'"),
        ("helpers", "import series_setup", "helpers imports series_setup, which only the notebooks import"),
        ("helpers_exercises", "from series_setup import start", "helpers_exercises imports series_setup, which"),
    ],
)
def test_a_broken_rule_is_caught(module, line, expected):
    sources = module_sources()
    assert not any(problem.startswith(expected) for problem in rule_breaks(sources)), "caught before it was planted"
    sources[module] += f"\n{line}\n"
    assert any(problem.startswith(expected) for problem in rule_breaks(sources)), rule_breaks(sources)


@pytest.mark.parametrize(
    ("module", "written", "planted", "expected"),
    [
        (  # a step between the four lines: gradient clipping between backward and step
            "helpers",
            "                loss.backward()\n                optimizer.step()\n",
            "                loss.backward()\n                clip(model)\n                optimizer.step()\n",
            "helpers.fit's loop does not start with the lesson's four lines, in order",
        ),
        (  # the four lines in another order
            "helpers_common",
            "        optimizer.step()\n        optimizer.zero_grad()\n",
            "        optimizer.zero_grad()\n        optimizer.step()\n",
            "helpers_common.train_epoch's loop does not start with the lesson's four lines",
        ),
        (  # a branch after them, in the loop
            "helpers",
            "                images += len(batch[1])\n",
            "                images += len(batch[1])\n                if images > limit:\n                    break\n",
            "helpers.fit's loop branches (if images > limit:)",
        ),
        (  # a branch in an expression
            "helpers_common",
            "        loss_sum += loss.detach() * len(batch[1])\n",
            "        loss_sum += loss.detach() * len(batch[1]) if log else 0\n",
            "helpers_common.train_epoch's loop branches",
        ),
        (  # the loop under another name
            "helpers",
            "            for batch in first_checked(",
            "            for b in first_checked(",
            "helpers.fit's loop does not start with the lesson's four lines, in order, under `for batch in ...:`",
        ),
        (  # the loop gone from fit
            "helpers",
            "                loss = model.training_step(batch)\n",
            "                loss = model(batch)\n",
            "helpers.fit has no `for batch in ...:` loop of the lesson's four lines",
        ),
    ],
)
def test_a_broken_loop_is_caught(module, written, planted, expected):
    sources = module_sources()
    assert not any(problem.startswith(expected) for problem in rule_breaks(sources)), "caught before it was planted"
    assert sources[module].count(written) == 1, f"plant the break once: {written!r}"
    sources[module] = sources[module].replace(written, planted)
    assert any(problem.startswith(expected) for problem in rule_breaks(sources)), rule_breaks(sources)


def test_a_generic_part_that_one_module_uses_is_caught():
    sources = module_sources()
    sources["helpers_common"] += "\ndef for_speed():\n    pass\n"
    sources["helpers_speed"] += "\nfrom helpers_common import for_speed\n"
    assert "helpers_common.for_speed is used by helpers_speed alone: it belongs there" in rule_breaks(sources)


def test_the_later_notebooks_settings_are_known():
    """The rule above reads 09-11's settings from their set-up cells; it must find some to guard anything."""
    assert {"bench_epochs", "profile_steps", "nprocs", "wide_limit"} <= later_settings()


def test_the_lesson_notebooks_use_is_read_from_them():
    """helpers.py's rule reads what 01-08 use; it must find their names, the lesson's own and DeviceResidentLoader."""
    assert {"fit", "evaluate", "DeviceResidentLoader", "plot_losses", "MnistModel"} <= lesson_notebooks_use()


def _later_names() -> set[str]:
    """Names that notebooks 09-11 teach: what the modules after helpers define, and PyTorch's distributed and amp."""
    defined = {
        name
        for module in (helpers_common, helpers_run, helpers_speed, helpers_ddp)
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }
    return defined | {"all_reduce", "autocast", "GradScaler", "distributed"}


def names_in(source: str) -> set[str]:
    """Every name a listing's code uses, dotted ones also by their last part ("helpers_ddp.DDPModel", "DDPModel")."""
    words = {n.id for n in ast.walk(parsed(textwrap.dedent(source))) if isinstance(n, ast.Name)}
    words |= attributes(textwrap.dedent(source))
    return words | {word.rsplit(".", 1)[-1] for word in words}


def listings_of(cell: dict) -> list[str]:
    """The source of every object a code cell shows with `show_source(...)`, resolved in the series' modules."""
    namespace = {"helpers": helpers, "helpers_speed": helpers_speed, "helpers_ddp": helpers_ddp}
    namespace |= {"helpers_common": helpers_common, "helpers_run": helpers_run}
    shown = []
    for node in ast.walk(parsed("".join(cell["source"]))):
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
        named = names_in(source) & later
        assert not named, f"{path.name} shows code that names {sorted(named)}, from notebooks 09-11"


def test_a_listing_that_names_09_to_11_is_caught():
    assert "DeviceResidentLoader" not in _later_names(), "helpers' own: 04-08 use it"
    for shown in (helpers_speed.mixed_precision, helpers_run.train_lesson):
        assert names_in(inspect.getsource(shown)) & _later_names()


@pytest.mark.parametrize("path", sorted((REPO / "notebooks").glob("[01][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_every_listing_a_notebook_shows_is_the_code_as_it_is_now(path):
    """A listing (show_source's output) saved before its function changed shows the reader code that is gone."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code" or "show_source(" not in "".join(cell["source"]):
            continue
        saved = "".join("".join(o.get("data", {}).get("text/markdown", "")) for o in cell["outputs"])
        current = "\n\n".join(textwrap.dedent(source).rstrip() for source in listings_of(cell))
        assert saved == f"```python\n{current}\n```", f"{path.name} {cell['id']}: run it again (series.py refresh)"
