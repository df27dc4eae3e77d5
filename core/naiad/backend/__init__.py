"""`naiad.backend`: the backend ABI, what a backend package implements and what it is given.

The three layers (`Backend`, `Model`, `ModelInstance`) and their contexts (the contract is
the docstring of `naiad.backend.abi`), the plugin hook marker, the server as a model sees it
(`InferenceService`), and the core types `execute` and a model's config exchange: requests,
responses, tensors, the config and the errors. Nothing else: the opt-in helpers of framework
backends (batching, auto-complete, settings, ...) are `naiad.backend.helpers`. Backends
import naiad through these two paths alone (tests/backend/test_backend_imports.py checks
it); the modules behind the names are the core's own and may move.
"""

from ..config.model_config import ConfigError, ModelConfig, TensorSpec
from ..device_placement import CudaPlacement
from ..errors import ErrorCode, NaiadError
from ..inference import InferenceRequest, InferenceResponse, RequestedOutput
from ..tensor import Tensor
from .abi import (
    ABI_VERSION,
    Backend,
    BackendContext,
    ExecuteResult,
    InstanceContext,
    Model,
    ModelContext,
    ModelInstance,
)
from .hookspecs import hookimpl
from .service import InferenceService, ServedModel

__all__ = [
    # the three layers, their contexts, the version, the plugin marker
    "ABI_VERSION",
    "Backend",
    "BackendContext",
    "ExecuteResult",
    "InstanceContext",
    "Model",
    "ModelContext",
    "ModelInstance",
    "hookimpl",
    # the server as a model sees it
    "InferenceService",
    "ServedModel",
    # what execute and a model's config exchange
    "InferenceRequest",
    "InferenceResponse",
    "RequestedOutput",
    "Tensor",
    "CudaPlacement",
    "ModelConfig",
    "TensorSpec",
    "ConfigError",
    "ErrorCode",
    "NaiadError",
]
