"""`naiad.backend` is the one import path of backend authors: its names are exactly these,
each one resolves, and the server satisfies the `InferenceService` a model sees."""

import inspect

import naiad.backend
from naiad import Server
from naiad.backend import InferenceService

EXPECTED = {
    # the ABI and plugin discovery
    "ABI_VERSION", "Backend", "BackendContext", "ENTRY_POINT_GROUP", "InferenceService", "InstanceContext",
    "Model", "ModelContext", "ModelInstance", "ServedModel", "hookimpl",
    # core types
    "ConfigError", "ErrorCode", "GRPC_STATUS_NAME", "HTTP_STATUS", "InferenceRequest", "InferenceResponse",
    "ModelConfig", "NaiadError", "RequestedOutput", "Tensor", "TensorSpec", "model_config_pb2",
    # helpers for framework backends
    "Batch", "SignatureTensor", "apply_output_reshape", "check_model_shape", "complete_tensors",
    "datatype_to_config_type", "execute_by_name", "gpu_ids", "model_inputs", "model_outputs", "numpy_dtype",
    "run_isolating_failures",
    # custom metrics
    "CustomMetric", "CustomMetricFamily", "CustomMetricRegistry", "MetricKind",
}  # fmt: skip


def test_all_is_exact():
    assert sorted(naiad.backend.__all__) == sorted(EXPECTED)
    assert len(naiad.backend.__all__) == len(EXPECTED)  # no name twice


def test_every_name_resolves():
    assert [name for name in naiad.backend.__all__ if not hasattr(naiad.backend, name)] == []


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
