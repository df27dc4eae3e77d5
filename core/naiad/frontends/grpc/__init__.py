"""The gRPC frontend: `inference.GRPCInferenceService` (KServe v2 with Triton's extensions),
`grpc.health.v1.Health` and server reflection, served by naiad's own HTTP/2 server (`http2`,
`rpc`) in the event loop. `naiad serve` starts it through `run`; `codec` holds the pure message translation."""

from ..options import GrpcOptions
from .server import GrpcServer, run

__all__ = ["GrpcOptions", "GrpcServer", "run"]
