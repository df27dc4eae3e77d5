"""naiad's build: pyproject.toml has the metadata; this compiles the core modules every
inference request runs through with mypyc (see mypyc_build.py, shared with naiad-wire)."""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mypyc_build import compiled  # noqa: E402

# The request path from the frontends' codecs to the batcher, and the statistics every
# request updates. Modules with async generators are left out (mypyc cannot compile those).
HOT_MODULES = (
    "datatypes",
    "request_validation",
    "frontends/grpc/codec",
    "frontends/grpc/field_views",
    "frontends/grpc/rpc",
    "frontends/http/codec",
    "frontends/http/direct_infer",
    "frontends/http/infer_endpoint",
    "frontends/http/json_tensors",
    "observability/latency_summary",
    "observability/statistics",
    "scheduling/batch_compatibility",
    "scheduling/batch_policy",
    "scheduling/dynamic_batcher",
    "scheduling/ensemble_scheduler",
    "scheduling/inline_execution",
    "scheduling/instance_runner",
    "scheduling/job",
    "scheduling/priority_queue",
)

setup(**compiled([f"core/naiad/{name}.py" for name in HOT_MODULES]))
