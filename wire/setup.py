"""naiad-wire's build: the modules every request runs through are compiled with mypyc into C
extensions, which import in place of their sources (kept beside them). The package's metadata
is in pyproject.toml; this file only adds the extensions.

Compiling needs a C compiler. Without one the build warns and installs the pure-Python
modules, which behave the same, only slower. NAIAD_WIRE_PURE=1 skips compiling on purpose.
"""

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

# Run for every request: parsing, HPACK, gRPC framing. The rest (listening, balancing
# connections between workers, draining at shutdown) runs once per connection or less.
HOT_MODULES = ("http1", "http2", "http2_protocol", "header_compression", "grpc_framing", "request_headers")


class OptionalBuildExt(build_ext):
    """Installs the pure-Python modules when the C extensions cannot be built."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - a compiler missing or failing: fall back
            for output in self.get_outputs():
                # Part of a failed build would import in place of a source and then fail.
                Path(output).unlink(missing_ok=True)
            self.warn(f"naiad-wire: compiling with mypyc failed ({exc}); installing the pure-Python modules")


def extensions() -> list:
    if os.environ.get("NAIAD_WIRE_PURE") == "1":
        return []
    from mypyc.build import mypycify

    # Compiled code checks the types it is told at run time, and the dependencies' stubs are
    # not all true (httptools says URL.query is bytes; it is None without a query), so they
    # are not read at all: what comes from them is Any, the same in every build environment.
    sources = [f"src/naiad_wire/{name}.py" for name in HOT_MODULES]
    return mypycify(
        ["--no-site-packages", "--ignore-missing-imports", "--no-warn-unused-ignores", *sources], opt_level="3"
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
