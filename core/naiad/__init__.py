"""naiad: an inference server that speaks Triton's interfaces."""

__version__ = "0.1.0"

from .backend.abi import (  # noqa: E402
    ABI_VERSION,
    Backend,
    BackendContext,
    InstanceContext,
    Model,
    ModelContext,
    ModelInstance,
)
from .errors import ErrorCode, NaiadError  # noqa: E402
from .backend.hookspecs import hookimpl  # noqa: E402
from .inference import InferenceRequest, InferenceResponse, RequestedOutput  # noqa: E402
from .config.model_config import ConfigError, ModelConfig, TensorSpec  # noqa: E402
from .server import Server, ServerOptions  # noqa: E402
from .tensor import Tensor  # noqa: E402

__all__ = [
    "__version__",
    "ABI_VERSION",
    "Backend",
    "BackendContext",
    "ConfigError",
    "ErrorCode",
    "InferenceRequest",
    "InferenceResponse",
    "InstanceContext",
    "Model",
    "ModelConfig",
    "ModelContext",
    "ModelInstance",
    "NaiadError",
    "RequestedOutput",
    "Server",
    "ServerOptions",
    "Tensor",
    "TensorSpec",
    "hookimpl",
]
