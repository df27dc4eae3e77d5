"""The committed protobuf modules are what scripts/generate_protos.py produces from the
.proto files, and they coexist with tritonclient's copies in one process."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_generated_modules_are_current():
    pytest.importorskip("grpc_tools")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_protos.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_field_numbers_match_tritonclient():
    """Triton's own generated descriptors (shipped in tritonclient) are the reference."""
    triton = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    triton_service = pytest.importorskip("tritonclient.grpc.service_pb2")
    from naiad.protos import grpc_service_pb2, model_config_pb2

    def fields(descriptor, prefix=""):
        out = {}
        for field in descriptor.fields:
            out[f"{prefix}{descriptor.name}.{field.name}"] = (field.number, field.type, field.is_repeated)
        for nested in descriptor.nested_types:
            out.update(fields(nested, f"{prefix}{descriptor.name}."))
        return out

    for ours, theirs in ((model_config_pb2, triton), (grpc_service_pb2, triton_service)):
        for name, message in theirs.DESCRIPTOR.message_types_by_name.items():
            assert fields(ours.DESCRIPTOR.message_types_by_name[name]) == fields(message), name
