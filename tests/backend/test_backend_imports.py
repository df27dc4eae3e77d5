"""Backends and integrations reach naiad only through its public packages: a backend's
code imports `naiad.backend` (the ABI) and `naiad.backend.helpers` alone; its tests and benchmarks may also start a server
(`naiad`, `naiad.testing`) and build a config (`naiad.config`); an integration embeds the
server (`naiad`, `naiad.frontends.http`, `naiad.frontends.grpc`), adds a frontend to
`naiad serve` (`naiad.frontends`) and reads repositories and configs (`naiad.repository`,
`naiad.config`). The modules behind those packages may move freely.
docs/backends/writing-a-backend.md states the rule."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BACKEND_CODE = {"naiad.backend", "naiad.backend.helpers"}
TEST_CODE = {"naiad", "naiad.config", "naiad.testing"} | BACKEND_CODE
INTEGRATION_CODE = BACKEND_CODE | {
    "naiad",
    "naiad.config",
    "naiad.repository",
    "naiad.frontends",
    "naiad.frontends.http",
    "naiad.frontends.grpc",
}
TEST_DIRS = {"tests", "bench"}


def naiad_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of a naiad module in `path`, wherever the
    statement stands (module level, a function, `if TYPE_CHECKING:`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, m) for m in modules if m == "naiad" or m.startswith("naiad.")]
    return found


def allowed_for(path: Path) -> set[str]:
    parts = path.relative_to(ROOT).parts
    in_tests = any(part in TEST_DIRS for part in parts[2:])
    if parts[0] == "integrations":
        return INTEGRATION_CODE | ({"naiad.testing"} if in_tests else set())
    return TEST_CODE if in_tests else BACKEND_CODE


def sources() -> list[Path]:
    files = [p for d in ("backends", "integrations") for p in (ROOT / d).glob("*/**/*.py")]
    files.append(ROOT / "tests" / "numpy_backend.py")  # the core tests' own backend
    return sorted(p for p in files if ".egg-info" not in str(p) and "build" not in p.relative_to(ROOT).parts)


def test_every_backend_and_integration_is_scanned():
    scanned = {p.relative_to(ROOT).parts[:2] for p in sources()}
    expected = {("backends", d.name) for d in (ROOT / "backends").iterdir() if d.is_dir()}
    expected |= {("integrations", d.name) for d in (ROOT / "integrations").iterdir() if d.is_dir()}
    assert expected <= scanned


def test_imports_only_public_packages():
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sources()
        for line, module in naiad_imports(path)
        if module not in allowed_for(path)
    ]
    assert wrong == []


def test_the_scan_sees_every_import_form(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import naiad.server\nfrom naiad.batching import Batch\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from naiad.errors import NaiadError\n"
        "def f():\n    from naiad.backend import Tensor\n"
    )
    assert naiad_imports(probe) == [
        (1, "naiad.server"),
        (2, "naiad.batching"),
        (5, "naiad.errors"),
        (7, "naiad.backend"),
    ]
