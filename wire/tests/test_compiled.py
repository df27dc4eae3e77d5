"""The modules setup.py compiles with mypyc: in CI they must run compiled (what an install with
a C compiler gets), and an extension must never be older than the source it stands for (it
imports in place of that source, so an edit would silently not run)."""

import ast
import importlib
import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import naiad_wire

WIRE = Path(__file__).resolve().parent.parent
PACKAGE = Path(naiad_wire.__file__).parent


def hot_modules() -> tuple[str, ...]:
    tree = ast.parse((WIRE / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "HOT_MODULES":
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no HOT_MODULES")


@pytest.mark.skipif(os.environ.get("CI", "").lower() != "true", reason="a checkout may be installed uncompiled")
def test_ci_runs_every_hot_module_compiled():
    assert naiad_wire.compiled_modules() == sorted(hot_modules())
    for name in hot_modules():
        module = importlib.import_module(f"naiad_wire.{name}")
        assert any(module.__file__.endswith(suffix) for suffix in EXTENSION_SUFFIXES), module.__file__


def test_no_extension_is_older_than_its_source():
    compiled = naiad_wire.compiled_modules()
    assert set(compiled) <= set(hot_modules())
    stale = []
    for name in compiled:
        source = PACKAGE / f"{name}.py"
        extension = next(p for p in PACKAGE.iterdir() if p.name.startswith(f"{name}.") and p.suffix == ".so")
        if source.stat().st_mtime > extension.stat().st_mtime:
            stale.append(name)
    assert not stale, f"naiad_wire modules edited since they were compiled: {stale}; run bash scripts/setup.sh"
