"""The modules' imports: they run one way, with no circle, and no module imports the notebooks' set-up.

A circle of imports breaks as soon as one of its modules is imported first; series_setup.py runs a notebook's set-up
and only the notebooks (and the series' tooling) import it. Both read from the code, since no behaviour shows them
until the wrong module is imported first."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SETUP = "series_setup"


def series_imports(folder: Path = REPO) -> dict[str, set[str]]:
    """Each module of the series (helpers*.py, series_setup.py) and the series' modules it imports."""
    paths = [*folder.glob("helpers*.py"), folder / f"{SETUP}.py"]
    names = {p.stem for p in paths if p.is_file()}
    graph = {}
    for path in paths:
        if not path.is_file():
            continue
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
        graph[path.stem] = (found & names) - {path.stem}
    return graph


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of imports in `graph` (its modules in order, the first again at the end), or [] if none."""
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str]:
        state[module] = "open"
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == "open":
                return [*path[path.index(imported) :], imported] if imported in path else [module, imported]
            if imported not in state and (found := visit(imported, [*path, imported])):
                return found
        state[module] = "done"
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module, [module])):
            return found
    return []


def test_the_modules_import_one_way():
    graph = series_imports()
    assert "helpers" in graph and graph["helpers"] <= {"helpers_data"}, "the lesson's module stands on its own"
    assert circle(graph) == []
    assert [m for m, imported in graph.items() if SETUP in imported] == [], "only the notebooks import the set-up"


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"b2"}, "b2": {"b"}}, ["b", "b2", "b"]),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_a_circle_of_imports_is_found(graph, expected):
    assert circle(graph) == expected


def test_a_module_that_imports_the_set_up_is_seen(tmp_path):
    (tmp_path / "helpers.py").write_text("import helpers_data\n")
    (tmp_path / "helpers_data.py").write_text("from series_setup import start\n")
    (tmp_path / f"{SETUP}.py").write_text("import helpers\n")
    graph = series_imports(tmp_path)
    assert graph["helpers_data"] == {SETUP} and circle(graph) == ["helpers", "helpers_data", SETUP, "helpers"]
