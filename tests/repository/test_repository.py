"""Model repositories through the in-process Server: version policies, several
repositories, duplicates, missing backends, ABI versions, broken models beside good ones."""

import asyncio
import subprocess
import sys

import numpy as np
import pytest
from numpy_backend import NumpyModel, NumpyPlugin

from naiad import ABI_VERSION, Backend, ErrorCode, InferenceRequest, NaiadError, Server, ServerOptions, Tensor, hookimpl
from naiad.models.backend_registry import BackendRegistry

IDENTITY = """backend: "numpy" max_batch_size: 0 {policy}
input [{{ name: "INPUT0" data_type: TYPE_INT32 dims: [-1] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [-1] }}]"""


def add_model(repo, name, versions=(1,), policy="", config=None):
    for v in versions:
        (repo / name / str(v)).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config if config is not None else IDENTITY.format(policy=policy))


def serve(repos, **kw):
    return Server(ServerOptions([str(r) for r in repos], backend_plugins=[NumpyPlugin()], **kw))


def loaded_versions(server, name):
    return server.model_metadata(name)["versions"]


@pytest.mark.parametrize(
    "policy,expected",
    [
        ("", ["3"]),
        ("version_policy: { latest: { num_versions: 2 } }", ["2", "3"]),
        ("version_policy: { all: {} }", ["1", "2", "3"]),
        ("version_policy: { specific: { versions: [1, 3] } }", ["1", "3"]),
    ],
)
def test_version_policies(tmp_path, policy, expected):
    add_model(tmp_path, "m", versions=(1, 2, 3), policy=policy)
    (tmp_path / "m" / "notaversion").mkdir()

    async def go():
        async with serve([tmp_path]) as server:
            assert loaded_versions(server, "m") == expected
            request = InferenceRequest("m", [Tensor.from_numpy("INPUT0", np.arange(3, dtype=np.int32))])
            assert (await server.infer(request)).model_version == expected[-1]
            pinned = InferenceRequest(
                "m", [Tensor.from_numpy("INPUT0", np.arange(3, dtype=np.int32))], model_version=expected[0]
            )
            assert (await server.infer(pinned)).model_version == expected[0]
            with pytest.raises(NaiadError) as info:
                await server.infer(InferenceRequest("m", pinned.inputs, model_version="7"))
            assert info.value.code is ErrorCode.NOT_FOUND

    asyncio.run(go())


def test_specific_version_without_directory_fails(tmp_path):
    add_model(tmp_path, "m", versions=(1,), policy="version_policy: { specific: { versions: [2] } }")

    async def go():
        async with serve([tmp_path]) as server:
            assert "version(s) [2] have no directory" in server.startup_failures[0]

    asyncio.run(go())


def test_several_repositories_and_duplicates(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    add_model(a, "only_a")
    add_model(b, "only_b")
    add_model(a, "twice")
    add_model(b, "twice")

    async def go():
        async with serve([a, b]) as server:
            assert server.model_ready("only_a") and server.model_ready("only_b")
            assert not server.model_ready("twice")
            rows = {r["name"]: r for r in server.repository_index()}
            assert "appears in more than one model repository" in rows["twice"]["reason"]
            assert not server.is_ready()  # strict readiness: a model failed at start-up

    asyncio.run(go())


def test_a_repository_named_twice_or_through_a_symlink_is_read_once(tmp_path):
    repository = tmp_path / "models"
    add_model(repository, "m")
    (tmp_path / "link").symlink_to(repository)

    async def go():
        async with serve([repository, repository, tmp_path / "link"]) as server:
            assert server.model_ready("m") and server.is_ready()
            assert [r["name"] for r in server.repository_index()] == ["m"]

    asyncio.run(go())


def test_broken_model_beside_good_ones(tmp_path):
    add_model(tmp_path, "good")
    add_model(tmp_path, "bad", config='backend: "numpy" input [{ name: "X" data_type: TYPE_FP32 }]')
    add_model(tmp_path, "no_backend", config=IDENTITY.format(policy="").replace('"numpy"', '"not_installed"'))

    async def go():
        async with serve([tmp_path], strict_readiness=False) as server:
            assert server.model_ready("good") and server.is_ready()
            rows = {r["name"]: r for r in server.repository_index()}
            assert rows["bad"]["state"] == "UNAVAILABLE"
            assert "model 'bad': model input 'X' must specify 'dims' for bad" in rows["bad"]["reason"]
            assert "backend 'not_installed' is not installed (installed backends: " in rows["no_backend"]["reason"]

    asyncio.run(go())


def test_missing_backend_names_the_package_to_install():
    registry = BackendRegistry(load_entry_points=False)
    for backend, package in (
        ("onnxruntime", "naiad-backend-onnx"),
        ("python", "naiad-backend-python"),
        ("pytorch", "naiad-backend-pytorch"),
        ("tensorflow", "naiad-backend-tensorflow"),
    ):
        with pytest.raises(NaiadError) as info:
            registry.get(backend)
        assert info.value.code is ErrorCode.UNAVAILABLE
        assert (
            f"backend '{backend}' is not installed (installed backends: none); install it with 'pip install {package}'"
            == info.value.message
        )


def test_backend_no_package_provides_is_the_configs_error():
    """A backend name no naiad package provides is INVALID_ARG, as Triton's "unable to find
    backend library": through the load API's config override it was a 503 (found by
    tests/security/test_fuzz.py). A known backend that is not installed stays UNAVAILABLE."""
    registry = BackendRegistry(load_entry_points=False)
    with pytest.raises(NaiadError) as info:
        registry.get("no_such_backend")
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message == (
        "backend 'no_such_backend' is not installed (installed backends: none): unable to find backend library for "
        "backend 'no_such_backend', try specifying runtime on the model configuration."
    )


def test_backend_for_another_abi_major_is_refused(tmp_path):
    class FutureBackend(Backend):
        name = "future"
        abi_version = (3, 0)

        def create_model(self, context):
            return NumpyModel(context)

    class Plugin:
        @hookimpl
        def naiad_backends(self):
            return [FutureBackend]

    add_model(tmp_path, "m", config=IDENTITY.format(policy="").replace('"numpy"', '"future"'))

    async def go():
        server = Server(ServerOptions([str(tmp_path)], backend_plugins=[Plugin()]))
        async with server:
            expected = f"built for naiad backend ABI 3.0, this server implements {ABI_VERSION[0]}.{ABI_VERSION[1]}"
            assert expected in server.startup_failures[0]

    asyncio.run(go())


def test_backend_that_declares_no_abi_version_is_refused_naming_what_to_add(tmp_path):
    """The ABI version is the backend's own literal: a class without one once inherited
    the server's, so the check could never fire."""

    class UndeclaredBackend(Backend):
        name = "undeclared"

        def create_model(self, context):
            return NumpyModel(context)

    add_model(tmp_path, "m", config=IDENTITY.format(policy="").replace('"numpy"', '"undeclared"'))

    async def go():
        async with Server(ServerOptions([str(tmp_path)], backend_plugins=[UndeclaredBackend])) as server:
            assert not server.model_ready("m")
            expected = (
                "backend 'undeclared' declares no ABI version; add "
                f"'abi_version = ({ABI_VERSION[0]}, {ABI_VERSION[1]})' to its Backend class"
            )
            assert expected in server.startup_failures[0]

    asyncio.run(go())


def test_default_model_filename_and_labels(tmp_path):
    seen = {}

    class FileModel(NumpyModel):
        def initialize(self):
            seen["file"] = self.context.model_file
            assert self.context.model_file.exists()

    class FileBackend(Backend):
        name = "filebackend"
        abi_version = (2, 0)
        default_model_filename = "weights.bin"

        def create_model(self, context):
            return FileModel(context)

    class Plugin:
        @hookimpl
        def naiad_backends(self):
            return [FileBackend]

    add_model(tmp_path, "default_name", config='backend: "filebackend" ' + IDENTITY.format(policy="")[17:])
    (tmp_path / "default_name" / "1" / "weights.bin").write_bytes(b"w")
    add_model(
        tmp_path,
        "custom_name",
        config='backend: "filebackend" default_model_filename: "custom.bin" '
        'output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [-1] label_filename: "labels.txt" }] '
        'input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [-1] }]',
    )
    (tmp_path / "custom_name" / "1" / "custom.bin").write_bytes(b"w")
    (tmp_path / "custom_name" / "labels.txt").write_text("cat\ndog\n")

    async def go():
        async with Server(ServerOptions([str(tmp_path)], backend_plugins=[Plugin()])) as server:
            assert server.startup_failures == []
            assert server.model_config("custom_name").output_by_name["OUTPUT0"].labels == ("cat", "dog")
            assert seen["file"].name in ("weights.bin", "custom.bin")

    asyncio.run(go())


def test_missing_config_with_auto_complete_disabled(tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.py").write_text("")

    async def go():
        async with serve([tmp_path], auto_complete_config=False) as server:
            assert "config.pbtxt: not found, and auto-complete is disabled" in server.startup_failures[0]

    asyncio.run(go())


def test_core_imports_no_framework():
    code = (
        "import sys, asyncio, naiad, naiad.cli\n"
        "from naiad import Server, ServerOptions\n"
        "asyncio.run(Server(ServerOptions([])).start())\n"
        "bad = [m for m in ('torch', 'tensorflow', 'onnxruntime', 'tensorrt') if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
