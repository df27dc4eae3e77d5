"""The public packages' names are exactly these (naiad.backend's are in
tests/backend/test_backend_api.py): what docs/embedding.md and the backend and integration
import rules promise stays, and nothing leaks in by accident."""

import naiad
import naiad.config
import naiad.repository
import naiad.testing


def test_naiad():
    assert sorted(naiad.__all__) == sorted([
        "__version__", "ABI_VERSION", "Backend", "BackendContext", "ConfigError", "ErrorCode", "InferenceRequest",
        "InferenceResponse", "InstanceContext", "Model", "ModelConfig", "ModelContext", "ModelInstance", "NaiadError",
        "RequestedOutput", "Server", "ServerOptions", "Tensor", "TensorSpec", "hookimpl",
    ])  # fmt: skip


def test_config_repository_and_testing():
    assert sorted(naiad.config.__all__) == ["ConfigError", "ModelConfig", "TensorSpec", "parse_config_text", "validate_config"]
    assert sorted(naiad.repository.__all__) == ["LocalRepository", "is_remote"]
    assert sorted(naiad.testing.__all__) == ["ServerProcess", "expand_instance_groups", "free_port"]


def test_every_public_name_resolves():
    for package in (naiad, naiad.config, naiad.repository, naiad.testing):
        assert [name for name in package.__all__ if not hasattr(package, name)] == [], package.__name__
