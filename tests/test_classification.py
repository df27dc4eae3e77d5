"""The classification extension lives in the core, so every frontend gets it."""

import asyncio

import numpy as np
import pytest
from numpy_backend import NumpyPlugin

from naiad import ErrorCode, InferenceRequest, NaiadError, RequestedOutput, Server, ServerOptions, Tensor
from naiad.classification import classify_tensor

CLASSIFY = """backend: "numpy" max_batch_size: 4
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[3]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[3] label_filename: "labels.txt"}]"""


def test_classify_tensor_orders_and_labels():
    tensor = Tensor.from_numpy("OUTPUT0", np.array([[1.0, 3.0, 2.0], [0.5, 0.5, 0.9]], np.float32))
    classes = classify_tensor(tensor, 2, ("a", "b"), batched=True)
    assert classes.datatype == "BYTES" and classes.shape == (2, 2)
    # Ties keep the lower index first; index 2 has no label.
    assert classes.data.tolist() == [[b"3.000000:1:b", b"2.000000:2"], [b"0.900000:2", b"0.500000:0:a"]]
    integers = classify_tensor(Tensor.from_numpy("O", np.array([[4, 7], [1, 9]], np.int64)), 5, None, batched=False)
    assert integers.shape == (4,) and integers.data.tolist() == [b"9:3", b"7:1", b"4:0", b"1:2"]
    with pytest.raises(NaiadError, match="numeric"):
        classify_tensor(Tensor.from_numpy("O", np.array([b"x"], object)), 1, None, batched=False)


def test_server_applies_classification(tmp_path):
    (tmp_path / "classify" / "1").mkdir(parents=True)
    (tmp_path / "classify" / "config.pbtxt").write_text(CLASSIFY)
    (tmp_path / "classify" / "labels.txt").write_text("x\ny\nz\n")

    async def go():
        async with Server(ServerOptions([str(tmp_path)], backend_plugins=[NumpyPlugin()])) as server:
            data = Tensor.from_numpy("INPUT0", np.array([[0.1, 0.7, 0.2]], np.float32))
            request = InferenceRequest("classify", [data], outputs=[RequestedOutput("OUTPUT0", {"classification": 1})])
            response = await server.infer(request)
            assert response.output("OUTPUT0").data.tolist() == [[b"0.700000:1:y"]]
            bad = InferenceRequest("classify", [data], outputs=[RequestedOutput("OUTPUT0", {"classification": "2"})])
            with pytest.raises(NaiadError) as info:
                await server.infer(bad)
            assert info.value.code is ErrorCode.INVALID_ARG and "classification" in info.value.message

    asyncio.run(go())
