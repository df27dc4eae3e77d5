"""The `slow`, `packaging` and `gpu` markers: registered in every pytest configuration of the
checkout (with unknown markers refused), documented in CONTRIBUTING.md, and carried by
every test that builds wheels or pip-installs, so `-m "not packaging"` leaves them all out."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKERS = {"slow", "packaging", "gpu"}


def pytest_configs() -> list[Path]:
    return [
        path
        for path in [
            ROOT / "pyproject.toml",
            *sorted(ROOT.glob("*/*/pyproject.toml")),
            ROOT / "wire" / "pyproject.toml",
        ]
        if "ini_options" in tomllib.loads(path.read_text()).get("tool", {}).get("pytest", {})
    ]


def test_every_pytest_config_registers_the_markers_and_refuses_unknown_ones():
    configs = pytest_configs()
    assert ROOT / "pyproject.toml" in configs and ROOT / "backends" / "python" / "pyproject.toml" in configs
    for path in configs:
        options = tomllib.loads(path.read_text())["tool"]["pytest"]["ini_options"]
        registered = {line.split(":", 1)[0] for line in options.get("markers", [])}
        assert registered == MARKERS, (path, registered)
        assert "--strict-markers" in options.get("addopts", ""), path


def test_contributing_says_how_to_leave_each_marker_out():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    for marker in MARKERS:
        assert f'`-m "not {marker}"`' in text, marker


def _test_dirs() -> list[Path]:
    return [
        ROOT / "tests",
        ROOT / "wire" / "tests",
        *sorted(ROOT.glob("backends/*/tests")),
        *sorted(ROOT.glob("integrations/*/tests")),
    ]


def _marks(decorators: list[ast.expr]) -> set[str]:
    """The `pytest.mark.NAME` names among `decorators` (or a module's `pytestmark`)."""
    found = set()
    for node in decorators:
        for inner in ast.walk(node):
            if (
                isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Attribute)
                and inner.value.attr == "mark"
            ):
                found.add(inner.attr)
    return found


def _builds_distributions(function: ast.FunctionDef) -> bool:
    """Starts `pip install` or the wheel-building script as a process."""
    for node in ast.walk(function):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        if node.func.attr not in {"run", "Popen", "call", "check_call", "check_output"}:
            continue
        words = [n.value for n in ast.walk(node.args[0]) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        if any(a == "pip" and b == "install" for a, b in zip(words, words[1:])):
            return True
        if any(word.endswith("build-wheels.sh") for word in words):
            return True
    return False


def test_every_test_that_builds_or_installs_distributions_is_marked_packaging():
    found = []
    for directory in _test_dirs():
        for path in directory.rglob("test_*.py"):
            tree = ast.parse(path.read_text())
            module_marks = _marks(
                [
                    n.value
                    for n in tree.body
                    if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
                ]
            )
            functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
            # Helpers of the module that build, and the tests that call one of them.
            builders = {f.name for f in functions if _builds_distributions(f)}
            for node in functions:
                calls = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
                if node.name.startswith("test") and (node.name in builders or calls & builders):
                    found.append((path.relative_to(ROOT).as_posix(), node.name))
                    assert "packaging" in module_marks | _marks(node.decorator_list), found[-1]
    # The scan sees them: the two known ones at least.
    assert {name for _, name in found} >= {
        "test_wheels_install_alone_and_serve",
        "test_a_build_without_a_c_compiler_installs_pure_python",
        "test_the_documented_backend_installs_and_serves",
    }, found
