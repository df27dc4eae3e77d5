"""naiad-wire's build: pyproject.toml has the metadata; this compiles the modules every
request runs through with mypyc (see mypyc_build.py)."""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mypyc_build import compiled  # noqa: E402

# Run for every request: parsing, HPACK, gRPC framing. The rest (listening, balancing
# connections between workers, draining at shutdown) runs once per connection or less.
HOT_MODULES = (
    "http1",
    "http2",
    "http2_protocol",
    "header_compression",
    "huffman",
    "grpc_framing",
    "gathered_write",
    "request_headers",
)

setup(**compiled([f"src/naiad_wire/{name}.py" for name in HOT_MODULES]))
