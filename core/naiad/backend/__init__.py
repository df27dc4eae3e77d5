"""`naiad.backend`: everything a backend package needs from naiad, in one import path.

The ABI (`Backend`, `Model`, `ModelInstance` and their contexts; the contract is the
docstring of `naiad.backend.abi`), the plugin hook marker, the server as a model sees it
(`InferenceService`), the core request, response, tensor, config and error types (with the HTTP status and
gRPC code a client sees for each error code), and the
opt-in helpers framework backends share: batching, config auto-complete, shape checks,
output reshapes, datatypes, devices and custom metrics. Backends import nothing else of
naiad (tests/backend/test_backend_imports.py checks it); the modules behind these names
are the core's own and may move.
"""

from ..config.model_config import ConfigError, ModelConfig, TensorSpec
from ..config.model_io import model_inputs, model_outputs
from ..datatypes import datatype_to_config_type, numpy_dtype
from ..devices import gpu_ids
from ..errors import GRPC_STATUS_NAME, HTTP_STATUS, ErrorCode, NaiadError
from ..inference import InferenceRequest, InferenceResponse, RequestedOutput
from ..observability.custom_metrics import CustomMetric, CustomMetricFamily, CustomMetricRegistry, MetricKind
from ..protos import model_config_pb2
from ..tensor import Tensor
from .abi import ABI_VERSION, Backend, BackendContext, InstanceContext, Model, ModelContext, ModelInstance
from .auto_complete import SignatureTensor, complete_tensors
from .batching import Batch, execute_by_name, run_isolating_failures
from .hookspecs import ENTRY_POINT_GROUP, hookimpl
from .output_reshape import apply_output_reshape
from .service import InferenceService, ServedModel
from .shape_check import check_model_shape

__all__ = [
    # the ABI and plugin discovery
    "ABI_VERSION",
    "Backend",
    "BackendContext",
    "ENTRY_POINT_GROUP",
    "InferenceService",
    "InstanceContext",
    "Model",
    "ModelContext",
    "ModelInstance",
    "ServedModel",
    "hookimpl",
    # core types
    "ConfigError",
    "ErrorCode",
    "GRPC_STATUS_NAME",
    "HTTP_STATUS",
    "InferenceRequest",
    "InferenceResponse",
    "ModelConfig",
    "NaiadError",
    "RequestedOutput",
    "Tensor",
    "TensorSpec",
    "model_config_pb2",
    # helpers for framework backends
    "Batch",
    "SignatureTensor",
    "apply_output_reshape",
    "check_model_shape",
    "complete_tensors",
    "datatype_to_config_type",
    "execute_by_name",
    "gpu_ids",
    "model_inputs",
    "model_outputs",
    "numpy_dtype",
    "run_isolating_failures",
    # custom metrics
    "CustomMetric",
    "CustomMetricFamily",
    "CustomMetricRegistry",
    "MetricKind",
]
