"""docs/grpc.md documents every gRPC flag `naiad serve` accepts, and every RPC."""

from __future__ import annotations

from pathlib import Path

from naiad.cli import build_parser
from naiad.protos import grpc_service_pb2

DOC = (Path(__file__).resolve().parents[2] / "docs" / "grpc.md").read_text()


def _serve_parser():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    return commands.choices["serve"]


def test_every_grpc_flag_is_documented():
    serve = _serve_parser()
    group = next(g for g in serve._action_groups if g.title == "gRPC")
    flags = [option for action in group._group_actions for option in action.option_strings]
    assert len(flags) > 10
    missing = [flag for flag in flags + ["--backend-plugin"] if f"`{flag}" not in DOC]
    assert not missing, missing


def test_every_rpc_is_documented():
    service = grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    missing = [m.name for m in service.methods if m.name not in DOC]
    assert not missing, missing


def test_every_grpc_flag_reaches_the_frontend():
    """No gRPC flag is parsed and then silently ignored: each is a field of GrpcOptions."""
    from dataclasses import fields

    from naiad.frontends.options import GrpcOptions

    serve = _serve_parser()
    group = next(g for g in serve._action_groups if g.title == "gRPC")
    flags = {f.metadata["flag"] for f in fields(GrpcOptions)}
    ignored = [a.option_strings for a in group._group_actions if not flags.intersection(a.option_strings)]
    assert not ignored, ignored
