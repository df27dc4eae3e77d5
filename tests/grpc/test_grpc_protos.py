"""The committed generated modules match their .proto files, and the service the frontend
serves is the one tritonclient calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tritonclient.grpc import service_pb2 as triton_service

from naiad.protos import grpc_service_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_generated_modules_are_current():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_protos.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_service_matches_tritonclient():
    ours = grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    theirs = triton_service.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert ours.full_name == theirs.full_name == "inference.GRPCInferenceService"

    def shape(service):
        return {
            m.name: (m.input_type.full_name, m.output_type.full_name, m.client_streaming, m.server_streaming)
            for m in service.methods
        }

    assert shape(ours) == shape(theirs)
    for name, message in triton_service.DESCRIPTOR.message_types_by_name.items():
        mine = grpc_service_pb2.DESCRIPTOR.message_types_by_name[name]
        assert {(f.name, f.number, f.type) for f in mine.fields} == {
            (f.name, f.number, f.type) for f in message.fields
        }, name
