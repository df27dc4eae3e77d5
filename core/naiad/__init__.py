"""naiad: an inference server that speaks Triton's interfaces."""

from .backend.abi import (
    ABI_VERSION,
    Backend,
    BackendContext,
    InstanceContext,
    Model,
    ModelContext,
    ModelInstance,
)
from .backend.hookspecs import hookimpl
from .config.model_config import ConfigError, ModelConfig, TensorSpec
from .errors import ErrorCode, NaiadError
from .inference import InferenceRequest, InferenceResponse, RequestedOutput
from .python_models import model
from .server import Server, ServerOptions
from .tensor import Tensor
from .version import __version__

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
    "model",
]
