"""No import circle among the core's modules. The graph is read from the source (every
`import`, wherever it stands: module level, inside a function, under `if TYPE_CHECKING:`),
so a circle cannot hide behind a deferred or type-only import. An edge goes to the module
an import names (`from naiad.x import y` -> naiad.x, or naiad.x.y when y is a module); the
parent packages Python runs on the way are not edges, as each package's `__init__` is
checked as a module of its own. The generated protobuf modules are left out when, as now,
they import nothing of naiad."""

import ast
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
