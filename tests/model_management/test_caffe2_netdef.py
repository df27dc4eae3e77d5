"""Caffe2 NetDef models cannot be served; loading one says how to convert it to ONNX."""

import asyncio

import pytest

from naiad import ErrorCode, NaiadError, Server, ServerOptions


def _netdef_model(repo, name, config):
    version = repo / name / "1"
    version.mkdir(parents=True)
    (version / "model.netdef").write_bytes(b"predict net")
    (version / "init_model.netdef").write_bytes(b"init net")
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config)


@pytest.mark.parametrize(
    "config",
    [
        'platform: "caffe2_netdef" max_batch_size: 1 input [{name: "x" data_type: TYPE_FP32 dims: [3]}] '
        'output [{name: "y" data_type: TYPE_FP32 dims: [3]}]',
        None,  # no config: the model.netdef file name identifies the platform
    ],
    ids=["platform", "file-name"],
)
def test_caffe2_model_fails_to_load_naming_the_onnx_conversion(tmp_path, config):
    _netdef_model(tmp_path, "legacy", config)

    async def go():
        async with Server(
            ServerOptions([str(tmp_path)], model_control_mode="explicit", load_backend_entry_points=False)
        ) as server:
            with pytest.raises(NaiadError) as info:
                await server.load_model("legacy")
            rows = {row["name"]: row for row in server.repository_index()}
            return info.value, rows["legacy"]

    error, row = asyncio.run(go())
    assert error.code is ErrorCode.UNSUPPORTED
    for words in (
        "Caffe2",
        "caffe2_netdef",
        "ONNX",
        "convert-caffe2-to-onnx",
        "onnxruntime_onnx",
        "docs/backends/caffe2.md",
    ):
        assert words in error.message
    assert "pip install" not in error.message
    assert row["state"] == "UNAVAILABLE" and "ONNX" in row["reason"]
