"""The model-side API of the Python backend: what Triton's `triton_python_backend_utils`
offers a `model.py`, under naiad's own name.

A model imports it as Triton documents (``import triton_python_backend_utils as pb_utils``);
that top-level module re-exports this one. Everything here runs inside the model's process
(the stub) or, in in-process mode, inside the server; it needs only numpy and the standard
library, because a model may run in a virtual environment that has nothing else.

Custom metrics (`MetricFamily`, `Metric`) live in model_metrics.py and are re-exported here.

What reaches the server (responses, BLS calls, cancellation checks, log lines, metrics) goes
through a `Bridge` (see bridge.py), so this module is the same in both modes.
"""

from __future__ import annotations

from .dtypes import (
    TRITON_STRING_TO_NUMPY,
    deserialize_bytes_tensor,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
)
from .errors import TritonError, TritonModelException
from .flags import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
)
from .inference_request import InferenceRequest
from .inference_response import InferenceResponse, InferenceResponseSender
from .logger import Logger, LogLevel
from .model_config import (
    ModelConfig,
    get_input_config_by_name,
    get_output_config_by_name,
    using_decoupled_model_transaction_policy,
)
from .model_control import get_model_dir, is_model_ready, load_model, unload_model
from .model_metrics import COUNTER, GAUGE, HISTOGRAM, Metric, MetricFamily, MetricKind
from .tensor import PreferredMemory, Tensor, get_input_tensor_by_name, get_output_tensor_by_name

__all__ = [
    "Tensor",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "TritonError",
    "TritonModelException",
    "ModelConfig",
    "Logger",
    "LogLevel",
    "PreferredMemory",
    "get_input_tensor_by_name",
    "get_output_tensor_by_name",
    "get_input_config_by_name",
    "get_output_config_by_name",
    "triton_string_to_numpy",
    "numpy_to_triton_type",
    "triton_to_numpy_type",
    "serialize_byte_tensor",
    "deserialize_bytes_tensor",
    "using_decoupled_model_transaction_policy",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "get_model_dir",
    "load_model",
    "unload_model",
    "is_model_ready",
    "TRITON_STRING_TO_NUMPY",
    "MetricFamily",
    "Metric",
    "MetricKind",
    "COUNTER",
    "GAUGE",
    "HISTOGRAM",
]
