"""The public packages' names are exactly these (naiad.backend's are in
tests/backend/test_backend_api.py): what docs/embedding.md and the backend and integration
import rules promise stays, and nothing leaks in by accident."""

import naiad
import naiad.config
import naiad.frontends
import naiad.frontends.grpc
import naiad.frontends.http
import naiad.repository
import naiad.testing
import naiad_wire


def test_naiad():
    assert sorted(naiad.__all__) == sorted([
        "__version__", "ABI_VERSION", "Backend", "BackendContext", "ConfigError", "ErrorCode", "InferenceRequest",
        "InferenceResponse", "InstanceContext", "Model", "ModelConfig", "ModelContext", "ModelInstance", "NaiadError",
        "RequestedOutput", "Server", "ServerOptions", "Tensor", "TensorSpec", "hookimpl",
    ])  # fmt: skip


def test_config_repository_and_testing():
    assert sorted(naiad.config.__all__) == [
        "ConfigError",
        "ModelConfig",
        "TensorSpec",
        "parse_config_text",
        "validate_config",
    ]
    assert sorted(naiad.repository.__all__) == ["LocalRepository", "is_remote"]
    assert sorted(naiad.testing.__all__) == ["ServerProcess", "expand_instance_groups", "free_port", "gpu_ids"]


def test_frontends_an_integration_runs():
    assert sorted(naiad.frontends.__all__) == ["ENTRY_POINT_GROUP", "Frontend", "option"]
    assert sorted(naiad.frontends.http.__all__) == [
        "DEFAULT_MAX_INPUT_SIZE",
        "HttpOptions",
        "create_app",
        "generate_request",
        "run",
        "serve_uvicorn",
    ]
    assert sorted(naiad.frontends.grpc.__all__) == ["GrpcOptions", "GrpcServer", "run"]


def test_wire():
    assert naiad_wire.__all__ == ["listen", "compiled_modules"]


def test_every_public_name_resolves():
    packages = (
        naiad,
        naiad.config,
        naiad.repository,
        naiad.testing,
        naiad.frontends,
        naiad.frontends.http,
        naiad.frontends.grpc,
        naiad_wire,
    )
    for package in packages:
        assert [name for name in package.__all__ if not hasattr(package, name)] == [], package.__name__
