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
