"""naiad_wire is a package of its own: none of its modules imports naiad, neither in its
source (every import statement, type-only ones included) nor when it runs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import naiad_wire

PACKAGE = Path(naiad_wire.__file__).parent
MODULES = sorted(f"naiad_wire.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_no_module_names_naiad_in_an_import():
    offenders = {
        path.name: sorted(n for n in imported_names(path) if n.split(".")[0] == "naiad")
        for path in PACKAGE.glob("*.py")
    }
    assert {name: found for name, found in offenders.items() if found} == {}
    assert len(MODULES) >= 8  # the scan saw the package


def test_every_module_imports_with_naiad_unimportable():
    # sys.modules[name] = None makes `import name` raise ImportError.
    script = "import sys; sys.modules['naiad'] = None\n" + "".join(f"import {m}\n" for m in MODULES)
    script += "assert not any(n == 'naiad' or n.startswith('naiad.') for n in sys.modules if sys.modules[n])\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_no_http2_library_is_needed_at_run_time():
    """HPACK's tables are naiad_wire's own (static_table.py, huffman.py): nothing imports the
    `hpack`, `h2` or `hyperframe` packages, whose tables are outside their public API (the
    tests use them, as implementations to check against)."""
    script = "import sys\nfor name in ('hpack', 'h2', 'hyperframe'): sys.modules[name] = None\n"
    script += "".join(f"import {m}\n" for m in MODULES)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
