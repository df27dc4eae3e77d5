"""On a machine without an NVIDIA GPU the backend installs and registers, and a plan
model fails to load with a message naming the missing GPU; the server keeps running."""

from __future__ import annotations

import asyncio

import pytest
from naiad_backend_tensorrt.cuda_runtime import gpu_count

from naiad import ErrorCode, NaiadError, Server, ServerOptions

pytestmark = pytest.mark.skipif(gpu_count()[0] > 0, reason="this machine has a GPU")

CONFIG = """platform: "tensorrt_plan" max_batch_size: 8
input [{name: "INPUT0" data_type: TYPE_FP32 dims: [4]}]
output [{name: "OUTPUT0" data_type: TYPE_FP32 dims: [3]}]"""


def _repo(tmp_path, config):
    version = tmp_path / "detector" / "1"
    version.mkdir(parents=True)
    (version / "model.plan").write_bytes(b"a serialized engine would be here")
    if config is not None:
        (tmp_path / "detector" / "config.pbtxt").write_text(config)
    return tmp_path


@pytest.mark.parametrize(
    "config,auto_complete",
    [(CONFIG, True), (CONFIG, False), (None, True)],
    ids=["config", "no-auto-complete", "no-config"],
)
def test_plan_model_fails_to_load_naming_the_missing_gpu(tmp_path, config, auto_complete):
    repo = _repo(tmp_path, config)

    async def go():
        options = ServerOptions([str(repo)], model_control_mode="explicit", auto_complete_config=auto_complete)
        async with Server(options) as server:
            assert "tensorrt" in server.backends.names
            with pytest.raises(NaiadError) as info:
                await server.load_model("detector")
            rows = {row["name"]: row for row in server.repository_index()}
            return info.value, rows["detector"], server.is_live()

    error, row, live = asyncio.run(go())
    assert error.code is ErrorCode.UNAVAILABLE
    assert "model 'detector'" in error.message
    assert "TensorRT plan models need an NVIDIA GPU" in error.message
    assert row["state"] == "UNAVAILABLE" and "NVIDIA GPU" in row["reason"]
    assert live
