"""The gRPC frontend: `inference.GRPCInferenceService` (KServe v2 with Triton's extensions)
and `grpc.health.v1.Health` on grpcio's asyncio server. `naiad serve` starts it through
`run`; `codec` holds the pure message translation."""

from .server import GrpcOptions, build_grpc_server, run

__all__ = ["GrpcOptions", "build_grpc_server", "run"]
