#!/usr/bin/env python3
"""A model declared with `@naiad.model` against the same model as a Triton `model.py` (the
Python backend, in its stub process), both served by one `naiad serve app.py
--model-repository ...` and asked over HTTP by one tritonclient client in turn: what serving
a function in the server's process saves per request.

    .venv/bin/python bench/python_models_bench.py [--requests 2000] [--rounds 2]

Each model doubles a [1, 4] FP32 tensor with max_batch_size 8 and dynamic batching; the
answers are checked. Rounds alternate the models, so compare the two within a round.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

APP = """\
import naiad

@naiad.model(inputs={"x": ("FP32", [-1, 4])}, outputs={"y": ("FP32", [-1, 4])}, max_batch_size=8)
def double(x):
    return {"y": x * 2}
"""

CONFIG = """\
backend: "python"
max_batch_size: 8
dynamic_batching {}
input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]
"""

MODEL_PY = """\
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x * 2)]))
        return responses
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "app.py").write_text(APP)
        (root / "models" / "double_model_py" / "1").mkdir(parents=True)
        (root / "models" / "double_model_py" / "config.pbtxt").write_text(CONFIG)
        (root / "models" / "double_model_py" / "1" / "model.py").write_text(MODEL_PY)
        with ServerProcess(str(root / "app.py"), root / "models") as server:
            client = httpclient.InferenceServerClient(server.http_url)
            x = httpclient.InferInput("x", [1, 4], "FP32")
            x.set_data_from_numpy(np.ones((1, 4), np.float32))
            for model in ("double", "double_model_py"):
                assert client.infer(model, [x]).as_numpy("y").tolist() == [[2, 2, 2, 2]]
            for round_ in range(args.rounds):
                for model in ("double", "double_model_py"):
                    for _ in range(args.requests // 10):  # warm up
                        client.infer(model, [x])
                    began = time.perf_counter()
                    for _ in range(args.requests):
                        client.infer(model, [x])
                    took = (time.perf_counter() - began) / args.requests * 1e6
                    print(f"round {round_}: {model:16s} {took:7.0f} us/request (HTTP, one client, sequential)")


if __name__ == "__main__":
    main()
