"""No import circle among the core's modules. The graph is read from the source (every
`import`, wherever it stands: module level, inside a function, under `if TYPE_CHECKING:`),
so a circle cannot hide behind a deferred or type-only import. An edge goes to the module
an import names (`from naiad.x import y` -> naiad.x, or naiad.x.y when y is a module); the
parent packages Python runs on the way are not edges, as each package's `__init__` is
checked as a module of its own. The generated protobuf modules are left out when, as now,
they import nothing of naiad."""

import ast
import re
import tomllib
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    named = ".".join(base + ([node.module] if node.module else []))
                else:
                    named = node.module or ""
                submodules = [f"{named}.{alias.name}" for alias in node.names if f"{named}.{alias.name}" in files]
                targets = submodules + ([named] if len(submodules) < len(node.names) else [])
            else:
                continue
            edges.update(t for t in targets if t in files and t != module)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_generated_protos_are_leaves():
    graph = import_graph(CORE)
    protos = {m for m in graph if m.startswith("naiad.protos")}
    assert protos
    assert {m: sorted(graph[m] - protos) for m in protos if graph[m] - protos} == {}


def test_no_import_circle_in_the_core():
    assert circles(import_graph(CORE)) == []


def test_a_type_only_or_deferred_import_still_closes_a_circle(tmp_path):
    package = tmp_path / "naiad"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .inner.b import B\n")
    (package / "inner" / "b.py").write_text("def f():\n    from ..c import C\n")
    (package / "c.py").write_text("from naiad import a\n")
    (package / "d.py").write_text("from .c import C\n")
    assert circles(import_graph(tmp_path)) == [["naiad.a", "naiad.c", "naiad.inner.b"]]


def test_the_type_check_names_every_module_naiad_backend_reaches():
    """mypy checks strictly only the modules pyproject.toml names, so the list must be the
    whole of what `naiad.backend` and `naiad.backend.helpers` import, directly or not
    (generated protos aside)."""
    graph = import_graph(CORE)
    reached, todo = set(), ["naiad.backend", "naiad.backend.helpers"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    config = tomllib.loads((CORE.parent / "pyproject.toml").read_text())["tool"]["mypy"]
    assert sorted(config["modules"]) == sorted(m for m in reached if not m.startswith("naiad.protos"))


def test_the_folders_form_layers():
    """Taken folder by folder (each root module on its own), the core has no circle either:
    models/ may use scheduling/, which may use backend/, never the other way round."""
    graph = import_graph(CORE)

    def unit(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if len(parts) > 2 or (CORE / "naiad" / parts[-1]).is_dir() else module

    folders: dict[str, set[str]] = {}
    for module, imported in graph.items():
        folders.setdefault(unit(module), set()).update(unit(m) for m in imported if unit(m) != unit(module))
    for imported in list(folders.values()):
        for name in imported:
            folders.setdefault(name, set())
    assert circles(folders) == []


DOC = CORE.parent / "docs" / "architecture.md"


def folder_unit(module: str) -> str:
    """A module's unit in the drawing: its folder under naiad/ (naiad.models), else itself
    (a root module, or `naiad` for the package's own __init__)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (CORE / "naiad" / parts[-1]).is_dir() else module


def drawn_layers(drawing: str, units: set[str]) -> list[set[str]]:
    """The rows of a layer drawing, top first: each line naming core units (`models/`,
    `server.py`, `__init__.py` for the package) is one row; other names on it (naiad_wire)
    are not the core's. A unit drawn nowhere belongs to the bottom row."""
    rows = []
    for line in drawing.splitlines():
        named = set()
        for name, kind in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)(/|\.py)", line):
            unit = "naiad" if f"{name}{kind}" == "__init__.py" else f"naiad.{name}"
            if unit in units:
                named.add(unit)
        if named:
            rows.append(named)
    return rows


def upward_imports(graph: dict[str, set[str]], drawing: str) -> list[str]:
    """Every import from a unit to one drawn above it, as "from -> to (module -> module)"."""
    units = {folder_unit(m) for m in graph}
    rows = drawn_layers(drawing, units)
    row_of = {unit: i for i, row in enumerate(rows) for unit in row}
    bottom = len(rows) - 1
    found = []
    for module, imported in graph.items():
        for target in imported:
            here, there = folder_unit(module), folder_unit(target)
            if here != there and row_of.get(there, bottom) < row_of.get(here, bottom):
                found.append(f"{here} -> {there} ({module} -> {target})")
    return sorted(found)


def architecture_drawing() -> str:
    """The first code block of docs/architecture.md: the layers of the core."""
    return DOC.read_text().split("```")[1]


def test_imports_go_down_the_layers_docs_architecture_draws():
    """An import goes down the rows of the drawing (or along one), never up; a root module
    drawn nowhere is in the bottom row, where it may import only that row."""
    assert upward_imports(import_graph(CORE), architecture_drawing()) == []


def test_the_drawing_places_every_folder_of_the_core():
    graph = import_graph(CORE)
    units = {folder_unit(m) for m in graph}
    drawn = set().union(*drawn_layers(architecture_drawing(), units))
    folders = {u for u in units if (CORE / Path(*u.split("."))).is_dir() and u != "naiad"}
    assert sorted(folders - drawn - {"naiad.protos"}) == []


def test_an_import_up_the_drawing_is_found(tmp_path):
    package = tmp_path / "naiad"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "part.py").write_text("def f():\n    from ..high import H\n")
    (package / "high.py").write_text("from .low.part import f\n")
    (package / "helper.py").write_text("from naiad import high\n")
    drawing = "  high.py\n    │\n  low/\n"
    assert upward_imports(import_graph(tmp_path), drawing) == [
        "naiad.helper -> naiad.high (naiad.helper -> naiad.high)",
        "naiad.low -> naiad.high (naiad.low.part -> naiad.high)",
    ]
