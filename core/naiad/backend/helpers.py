"""`naiad.backend.helpers`: the opt-in helpers a backend may use, apart from the ABI.

* batching: stack a batch of requests into one tensor per input and split the outputs back
  (`Batch` for the whole round trip, `group_stackable`, `stack_requests`, `split_outputs`,
  `split_output_tensors` for single steps; `execute_by_name` and `run_isolating_failures` for a whole `execute`);
* config: auto-complete (`complete_tensors`), shape checks, output reshapes, the tensors a
  model exchanges, datatypes, the generated `model_config_pb2`;
* settings: the typed `--backend-config` settings of a backend (`setting`, `read_settings`);
* devices, custom metrics, and the HTTP status and gRPC code each error code maps to.

A backend imports naiad only through `naiad.backend` and this module
(tests/backend/test_backend_imports.py); the modules behind these names may move.
"""

from ..config.model_io import model_inputs, model_outputs
from ..datatypes import datatype_to_config_type, numpy_dtype
from ..devices import gpu_ids
from ..errors import GRPC_STATUS_NAME, HTTP_STATUS
from ..observability.custom_metrics import CustomMetric, CustomMetricFamily, CustomMetricRegistry, MetricKind
from ..protos import model_config_pb2
from .auto_complete import SignatureTensor, complete_tensors
from .batching import (
    Batch,
    Concatenate,
    Destination,
    RunFunction,
    StackedBatch,
    execute_by_name,
    group_stackable,
    run_isolating_failures,
    split_output_tensors,
    split_outputs,
    stack_requests,
)
from .output_reshape import apply_output_reshape
from .settings import read_bool, read_settings, setting, setting_keys
from .shape_check import check_model_shape

__all__ = [
    # batching
    "Batch",
    "Concatenate",
    "Destination",
    "RunFunction",
    "StackedBatch",
    "execute_by_name",
    "group_stackable",
    "run_isolating_failures",
    "split_output_tensors",
    "split_outputs",
    "stack_requests",
    # config: auto-complete, checks, tensors, datatypes
    "SignatureTensor",
    "apply_output_reshape",
    "check_model_shape",
    "complete_tensors",
    "datatype_to_config_type",
    "model_config_pb2",
    "model_inputs",
    "model_outputs",
    "numpy_dtype",
    # settings
    "read_bool",
    "read_settings",
    "setting",
    "setting_keys",
    # devices, custom metrics, error mapping
    "gpu_ids",
    "CustomMetric",
    "CustomMetricFamily",
    "CustomMetricRegistry",
    "MetricKind",
    "GRPC_STATUS_NAME",
    "HTTP_STATUS",
]
