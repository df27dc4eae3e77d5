"""naiad-backend-python's build: pyproject.toml has the metadata; this compiles the modules
every request to a Python model runs through with mypyc (see mypyc_build.py, shared with
naiad-wire and the core)."""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mypyc_build import compiled  # noqa: E402

# The server's side of every batch: its tensors placed, the model process's answer read back.
# What the model's process imports stays pure Python: it may run another interpreter, and its
# stub directory carries the package, not mypyc's shared library beside it.
# server_side/process_instance is left out too: compiled, the server crashed in the garbage
# collector while models loaded (docs/history/performance.md, nineteenth steps).
HOT_MODULES = (
    "server_side/conversions",
    "server_side/stub_connection",
)

setup(**compiled([f"src/naiad_backend_python/{name}.py" for name in HOT_MODULES]))
