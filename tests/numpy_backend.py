"""A tiny backend written in numpy, registered as a plugin object, so core tests exercise
the real server path without any framework. Models pick an operation with the config
parameter `op`: `add_sub` (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1),
`identity` (OUTPUTi = INPUTi), `fail` (raises), `sleep` (sleeps `sleep_ms`, then identity),
`echo_parameters` (OUTPUT0 = the request's parameters as one JSON BYTES element)."""

from __future__ import annotations

import json
import time

import numpy as np

from naiad import Backend, InferenceResponse, Model, ModelInstance, Tensor, hookimpl


class NumpyInstance(ModelInstance):
    def execute(self, requests):
        config = self.model.context.config
        op = config.parameter("op", "identity")
        if op == "fail":
            raise RuntimeError("the model failed on purpose")
        if op == "sleep":
            time.sleep(int(config.parameter("sleep_ms", "50")) / 1000)
        responses = []
        for request in requests:
            if op == "echo_parameters":
                text = json.dumps(request.parameters, sort_keys=True).encode()
                outputs = [Tensor.from_numpy("OUTPUT0", np.array([text], dtype=object))]
            elif op == "add_sub":
                a, b = request.input("INPUT0").data, request.input("INPUT1").data
                outputs = [Tensor.from_numpy("OUTPUT0", a + b), Tensor.from_numpy("OUTPUT1", a - b)]
            else:
                outputs = [
                    Tensor(t.name.replace("INPUT", "OUTPUT"), t.datatype, t.shape, t.data) for t in request.inputs
                ]
            responses.append(InferenceResponse(outputs=outputs))
        return responses


class NumpyModel(Model):
    def create_instance(self, context):
        return NumpyInstance(self, context)


class NumpyBackend(Backend):
    name = "numpy"

    def create_model(self, context):
        return NumpyModel(context)


class NumpyPlugin:
    @hookimpl
    def naiad_backends(self):
        return [NumpyBackend]
