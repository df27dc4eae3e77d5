"""`naiad.backend` is the backend ABI alone and `naiad.backend.helpers` the opt-in helpers:
their names are exactly these, each one resolves, the two do not overlap, and the server
satisfies the `InferenceService` a model sees."""

import inspect

import pytest

import naiad.backend
import naiad.backend.helpers
from naiad import Server
from naiad.backend import InferenceService

ABI = {
    # the three layers, their contexts, the version, the plugin marker
    "ABI_VERSION", "Backend", "BackendContext", "ExecuteResult", "InstanceContext", "Model", "ModelContext",
    "ModelInstance", "hookimpl",
    # the server as a model sees it
    "InferenceService", "ServedModel",
    # what execute and a model's config exchange
    "InferenceRequest", "InferenceResponse", "RequestedOutput", "Tensor", "CudaPlacement", "ModelConfig", "TensorSpec",
    "ConfigError", "ErrorCode", "NaiadError",
}  # fmt: skip

HELPERS = {
    # batching
    "Batch", "Concatenate", "Destination", "RunFunction", "StackedBatch", "execute_by_name", "group_stackable",
    "run_isolating_failures",
    "split_output_tensors", "split_outputs", "stack_requests",
    # config: auto-complete, checks, tensors, datatypes
    "SignatureTensor", "apply_output_reshape", "check_model_shape", "complete_tensors", "datatype_to_config_type",
    "model_config_pb2", "model_inputs", "model_outputs", "numpy_dtype",
    # settings
    "read_bool", "read_settings", "setting", "setting_keys",
    # devices, custom metrics, error mapping
    "gpu_ids", "CustomMetric", "CustomMetricFamily", "CustomMetricRegistry", "MetricKind", "GRPC_STATUS_NAME",
    "HTTP_STATUS",
}  # fmt: skip


@pytest.mark.parametrize(("module", "expected"), [(naiad.backend, ABI), (naiad.backend.helpers, HELPERS)])
def test_all_is_exact(module, expected):
    assert sorted(module.__all__) == sorted(expected)
    assert len(module.__all__) == len(expected)  # no name twice
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_the_abi_holds_no_helper():
    assert set(naiad.backend.__all__) & set(naiad.backend.helpers.__all__) == set()


def test_server_offers_every_member_of_inference_service():
    server = Server()
    members = [name for name in vars(InferenceService) if not name.startswith("_")]
    assert "infer" in members and "custom_metrics" in members
    assert [name for name in members if not hasattr(server, name)] == []
    for name in members:
        expected = getattr(InferenceService, name)
        if inspect.isfunction(expected):
            actual = inspect.signature(getattr(Server, name))
            assert list(actual.parameters) == list(inspect.signature(expected).parameters), name
