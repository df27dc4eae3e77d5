"""Triton's model loading API from a model: ACTION is `<ready|load|load_files|unload>:<model>`;
OUT is the answer, or `error: <message>`."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

DOUBLER = b"""
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 2)])
                for r in requests]
"""
DOUBLER_CONFIG = json.dumps(
    {
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}],
    }
)


def act(action, name):
    if action == "ready":
        return str(pb_utils.is_model_ready(model_name=name, model_version="1"))
    if action == "load":
        pb_utils.load_model(model_name=name)
    elif action == "load_files":
        pb_utils.load_model(model_name=name, config=DOUBLER_CONFIG, files={"file:1/model.py": DOUBLER})
    elif action == "unload":
        pb_utils.unload_model(model_name=name, unload_dependents=False)
    return "done"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            action, _, name = pb_utils.get_input_tensor_by_name(request, "ACTION").as_numpy()[0].decode().partition(":")
            try:
                text = act(action, name)
            except pb_utils.TritonModelException as exc:
                text = f"error: {exc}"
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text.encode()], dtype=object))])
            )
        return responses
