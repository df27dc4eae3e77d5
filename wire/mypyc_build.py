"""setup() arguments that compile a distribution's hot modules with mypyc into C extensions,
which import in place of their sources (kept beside them). Shared by naiad-wire's setup.py
and the core's (linked beside it), each with its own list of modules.

Compiling needs a C compiler. Without one the build warns and installs the pure-Python
modules, which behave the same, only slower. NAIAD_PURE_PYTHON=1 skips compiling on purpose.
"""

import os
from pathlib import Path
from typing import Any

from setuptools.command.build_ext import build_ext

PURE_PYTHON_ENV = "NAIAD_PURE_PYTHON"


class OptionalBuildExt(build_ext):
    """Installs the pure-Python modules when the C extensions cannot be built."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - a compiler missing or failing: fall back
            for output in self.get_outputs():
                # Part of a failed build would import in place of a source and then fail.
                Path(output).unlink(missing_ok=True)
            self.warn(f"compiling with mypyc failed ({exc}); installing the pure-Python modules")


def compiled(sources: list[str]) -> dict[str, Any]:
    """setup() keyword arguments that compile `sources` (paths from the setup.py directory)."""
    if os.environ.get(PURE_PYTHON_ENV) == "1":
        return {}
    from mypyc.build import mypycify

    # Compiled code checks at run time the types it is told, so the build reads only the
    # sources' own annotations, the same in every environment: no config file, and no
    # installed packages (their stubs are not all true: httptools says URL.query is bytes,
    # and it is None without a query), so what comes from a dependency is Any. Errors in
    # modules the sources import but that are not compiled are not the build's business.
    options = ["--config-file=", "--no-site-packages", "--ignore-missing-imports", "--follow-imports=silent"]
    return {"ext_modules": mypycify([*options, *sources], opt_level="3"), "cmdclass": {"build_ext": OptionalBuildExt}}
