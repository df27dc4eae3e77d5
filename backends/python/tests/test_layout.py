"""The process boundary the package shows: what runs in the model's process (`model_side`)
and the messages both processes exchange (`naiad_wire.interprocess`) import nothing of naiad, so a model's own
environment needs only numpy (as Triton's stub needs none of its server)."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import naiad_backend_python

from naiad_wire import interprocess

PACKAGE = Path(naiad_backend_python.__file__).parent

# Run in a fresh interpreter in which importing naiad (or anything below it) fails.
_PROBE = """
import importlib, sys

class NoNaiad:
    def find_spec(self, name, path=None, target=None):
        if name == "naiad" or name.startswith("naiad."):
            raise ImportError(f"the model side imported {name}")
        return None

sys.meta_path.insert(0, NoNaiad())
for name in sys.argv[1:]:
    importlib.import_module(name)
print("ok", len(sys.argv) - 1)
"""


def _modules(package: str, directory: Path) -> list[str]:
    return [package] + [f"{package}.{info.name}" for info in pkgutil.iter_modules([str(directory)])]


def test_model_side_and_ipc_import_nothing_of_naiad() -> None:
    modules = [
        *_modules("naiad_backend_python.model_side", PACKAGE / "model_side"),
        *_modules("naiad_wire.interprocess", Path(interprocess.__file__).parent),
        "triton_python_backend_utils",
    ]
    assert "naiad_backend_python.model_side.stub" in modules
    result = subprocess.run([sys.executable, "-c", _PROBE, *modules], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", str(len(modules))]


def test_the_probe_sees_an_import_of_naiad() -> None:
    # The check above could pass by never looking: the server side does import naiad.
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, "naiad_backend_python.server_side.backend"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "the model side imported naiad" in result.stderr
