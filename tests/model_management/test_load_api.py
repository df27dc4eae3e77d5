"""The load/unload API of the in-process Server: config overrides, uploaded files, path
traversal refused, explicit mode."""

import asyncio

import numpy as np
import pytest
from numpy_backend import NumpyPlugin

from naiad import ErrorCode, InferenceRequest, NaiadError, Server, ServerOptions, Tensor

CONFIG = """backend: "numpy" max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [-1] }]"""

JSON_CONFIG = {
    "backend": "numpy",
    "max_batch_size": 4,
    "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": ["-1"]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": ["-1"]}],
}


def serve(repo, **kw):
    return Server(ServerOptions([str(repo)], model_control_mode="explicit", backend_plugins=[NumpyPlugin()], **kw))


def test_explicit_mode_load_override_and_unload(tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(CONFIG)

    async def go():
        async with serve(tmp_path) as server:
            assert not server.model_ready("m")
            assert server.repository_index() == [{"name": "m"}]
            await server.load_model("m")
            assert server.model_config("m").max_batch_size == 0
            await server.load_model("m", config=JSON_CONFIG)
            assert server.model_config("m").max_batch_size == 4
            await server.unload_model("m")
            assert not server.model_ready("m")
            assert server.repository_index() == [
                {"name": "m", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
            ]
            with pytest.raises(NaiadError) as info:
                await server.load_model("missing")
            assert info.value.code is ErrorCode.INTERNAL  # Triton's status for it

    asyncio.run(go())


def test_uploaded_files_and_traversal(tmp_path):
    async def go():
        async with serve(tmp_path) as server:
            await server.load_model("uploaded", config=JSON_CONFIG, files={"1/weights.bin": b"abc"})
            data = np.arange(3, dtype=np.int32).reshape(1, 3)
            response = await server.infer(InferenceRequest("uploaded", [Tensor.from_numpy("INPUT0", data)]))
            np.testing.assert_array_equal(response.output("OUTPUT0").data, data)
            for bad in ("../evil.py", "1/../../evil.py", "/etc/passwd", "1//x"):
                with pytest.raises(NaiadError) as info:
                    await server.load_model("evil", config=JSON_CONFIG, files={bad: b"x"})
                assert info.value.code is ErrorCode.INVALID_ARG and "must be relative" in info.value.message
            assert not (tmp_path.parent / "evil.py").exists()
            with pytest.raises(NaiadError, match="without a config"):
                await server.load_model("noconfig", files={"1/a": b""})

    asyncio.run(go())


def test_load_timeout(tmp_path):
    import time

    from numpy_backend import NumpyModel

    from naiad import Backend, hookimpl

    class SlowModel(NumpyModel):
        def initialize(self):
            time.sleep(0.5)

    class SlowBackend(Backend):
        name = "slowload"
        abi_version = (2, 0)

        def create_model(self, context):
            return SlowModel(context)

    class Plugin:
        @hookimpl
        def naiad_backends(self):
            return [SlowBackend]

    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(CONFIG.replace('"numpy"', '"slowload"'))

    async def go():
        options = ServerOptions([str(tmp_path)], backend_plugins=[Plugin()], model_load_timeout_secs=0.1)
        async with Server(options) as server:
            assert "loading took longer than 0.1s" in server.startup_failures[0]
            assert not server.model_ready("m")
            await asyncio.sleep(0.6)  # the abandoned build finishes and is finalized, not served
            assert not server.model_ready("m")

    asyncio.run(go())


def test_a_cancelled_load_finalizes_what_its_thread_builds(tmp_path):
    """A load given up while its thread builds (a gRPC deadline passed) left the build to
    finish unserved: its instances were never finalized, and a build that failed was logged
    as "Task exception was never retrieved" with a traceback (found by
    tests/security/test_fuzz.py)."""
    import time

    from numpy_backend import NumpyModel

    from naiad import Backend, hookimpl

    finalized: list[str] = []

    class SlowModel(NumpyModel):
        def initialize(self):
            time.sleep(0.3)
            if self.context.config.parameter("fail") == "yes":
                raise RuntimeError("the build failed after the load was given up")

        def finalize(self):
            finalized.append(self.context.name)

    class SlowBackend(Backend):
        name = "slowload"
        abi_version = (2, 0)

        def create_model(self, context):
            return SlowModel(context)

    class Plugin:
        @hookimpl
        def naiad_backends(self):
            return [SlowBackend]

    for name, fail in (("ok", "no"), ("bad", "yes")):
        (tmp_path / name / "1").mkdir(parents=True)
        config = (
            CONFIG.replace('"numpy"', '"slowload"') + f'\nparameters {{key: "fail" value {{string_value: "{fail}"}}}}'
        )
        (tmp_path / name / "config.pbtxt").write_text(config)

    async def go():
        unretrieved: list[object] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unretrieved.append(context))
        options = ServerOptions(
            [str(tmp_path)], backend_plugins=[Plugin()], model_control_mode="explicit", load_models=[]
        )
        async with Server(options) as server:
            for name in ("ok", "bad"):
                load = asyncio.ensure_future(server.load_model(name))
                await asyncio.sleep(0.1)
                load.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await load
            await asyncio.sleep(0.6)
            assert "ok" in finalized and not server.model_ready("ok")
        import gc

        gc.collect()
        assert unretrieved == []

    asyncio.run(go())


def test_load_errors_leave_the_servers_paths_out(tmp_path, caplog):
    """Backends name files by their absolute paths ("model file not found: /models/m/1/
    model.onnx"); a load error reaches clients, in the load API's answer and the repository
    index, and names them inside the model's directory instead. The log keeps the whole text
    (found by tests/security/test_fuzz.py, switching a config override's backend)."""
    from naiad import Backend, ConfigError, hookimpl

    class PathBackend(Backend):
        name = "paths"
        abi_version = (2, 0)
        default_model_filename = "model.bin"

        def create_model(self, context):
            if context.config.parameter("kind") == "config":
                raise ConfigError(context.name, f"model file not found: {context.model_file}")
            raise RuntimeError(f"cannot open {context.model_file} in {context.path.parent}")

    class Plugin:
        @hookimpl
        def naiad_backends(self):
            return [PathBackend]

    repository = tmp_path / "repo"
    for name in ("config", "other"):
        (repository / name / "1").mkdir(parents=True)
        config = CONFIG.replace('"numpy"', '"paths"') + f'\nparameters {{key: "kind" value {{string_value: "{name}"}}}}'
        (repository / name / "config.pbtxt").write_text(config)

    async def go():
        options = ServerOptions(
            [str(repository)], backend_plugins=[Plugin()], model_control_mode="explicit", load_models=[]
        )
        async with Server(options) as server:
            with pytest.raises(NaiadError) as info:
                await server.load_model("config")
            assert info.value.code is ErrorCode.INVALID_ARG
            assert info.value.message == "model 'config': model file not found: 1/model.bin"
            with pytest.raises(NaiadError) as info:
                await server.load_model("other")
            assert info.value.message == "failed to load 'other': RuntimeError: cannot open 1/model.bin in ."
            reasons = [row.get("reason", "") for row in server.repository_index()]
            assert all(str(tmp_path) not in reason for reason in reasons) and any("1/model.bin" in r for r in reasons)
        assert str(repository / "config" / "1" / "model.bin") in caplog.text

    asyncio.run(go())
