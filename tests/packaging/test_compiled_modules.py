"""The modules the setup.py of the core, naiad-wire and the Python backend compile with
mypyc: in CI every one must run compiled (what an install with a C compiler gets), an
extension must never be older than the source it stands for (it imports in place of that
source, so an edit would silently not run), and a build without a C compiler must still
install, as pure Python."""

import ast
import importlib
import os
import shutil
import subprocess
import venv
from pathlib import Path

import naiad_backend_python
import pytest
from distributions import ROOT

import naiad
import naiad_wire

# (setup.py, the package it builds, that package's directory)
BUILDS = [
    (ROOT / "setup.py", "naiad", Path(naiad.__file__).parent),
    (ROOT / "wire" / "setup.py", "naiad_wire", Path(naiad_wire.__file__).parent),
    (
        ROOT / "backends" / "python" / "setup.py",
        "naiad_backend_python",
        Path(naiad_backend_python.__file__).parent,
    ),
]


def hot_modules(setup_py: Path) -> list[str]:
    tree = ast.parse(setup_py.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "HOT_MODULES":
            return sorted(name.replace("/", ".") for name in ast.literal_eval(node.value))
    raise AssertionError(f"{setup_py} has no HOT_MODULES")


@pytest.mark.parametrize(("setup_py", "package", "directory"), BUILDS, ids=[b[1] for b in BUILDS])
def test_only_hot_modules_are_compiled_and_none_is_stale(setup_py, package, directory):
    compiled = naiad_wire.compiled_modules(directory)
    assert set(compiled) <= set(hot_modules(setup_py))
    stale = []
    for name in compiled:
        source = directory.joinpath(*name.split(".")).with_suffix(".py")
        extension = next(
            p for p in source.parent.iterdir() if p.name.startswith(f"{source.stem}.") and p.suffix == ".so"
        )
        if source.stat().st_mtime > extension.stat().st_mtime:
            stale.append(name)
    assert not stale, f"{package} modules edited since they were compiled: {stale}; run bash scripts/setup.sh"


@pytest.mark.skipif(os.environ.get("CI", "").lower() != "true", reason="a checkout may be installed uncompiled")
@pytest.mark.parametrize(("setup_py", "package", "directory"), BUILDS, ids=[b[1] for b in BUILDS])
def test_ci_runs_every_hot_module_compiled(setup_py, package, directory):
    assert naiad_wire.compiled_modules(directory) == hot_modules(setup_py)
    for name in hot_modules(setup_py):
        module = importlib.import_module(f"{package}.{name}")
        assert module.__file__.endswith(".so"), module.__file__


@pytest.mark.packaging
@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("CI", "").lower() != "true" and os.environ.get("NAIAD_TEST_PACKAGING") != "1",
    reason="builds naiad-wire in a new environment (~40 s): runs in CI or with NAIAD_TEST_PACKAGING=1",
)
def test_a_build_without_a_c_compiler_installs_pure_python(tmp_path):
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    source = tmp_path / "wire"
    shutil.copytree(ROOT / "wire", source, ignore=shutil.ignore_patterns("build", "*.so", "*.egg-info"))
    # `false` as the compiler: every compilation fails, as on a machine without gcc.
    pip = subprocess.run(
        [python, "-m", "pip", "install", "-v", str(source)],
        env={**os.environ, "CC": "false"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    assert "installing the pure-Python modules" in pip.stdout + pip.stderr
    probe = "import naiad_wire, naiad_wire.http2 as h; print(naiad_wire.compiled_modules(), h.__file__)"
    found = subprocess.run([python, "-c", probe], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    assert found.startswith("[] ") and found.strip().endswith("http2.py"), found
