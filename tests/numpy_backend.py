"""A tiny backend written in numpy, registered as a plugin object, so core tests exercise
the real server path without any framework. Models pick an operation with the config
parameter `op`: `add_sub` (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1),
`identity` (OUTPUTi = INPUTi), `fail` (raises), `sleep` (touches `started_file` if set, sleeps `sleep_ms`, then identity),
`scale` (OUTPUTi = INPUTi * `factor`), `echo_parameters` (OUTPUT0 = the request's parameters as one
JSON string, BYTES [1]), `rendezvous` (identity, after every model naming the same `barrier`
with `parties` has reached it: proves that executions overlap without timing them), and for
decoupled models `repeat` (one response per element of input IN: OUT = [value],
IDX = [index], then a bare final flag) and `count_up` (`repeat` responses per request, the
i-th with OUTPUT0 = INPUT0 + i)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np

from naiad import Backend, InferenceResponse, Model, ModelInstance, Tensor, hookimpl


# Barriers of the `rendezvous` op, shared by every model of the process that names them.
_BARRIERS: dict[str, threading.Barrier] = {}
_BARRIERS_LOCK = threading.Lock()


def _barrier(name: str, parties: int) -> threading.Barrier:
    with _BARRIERS_LOCK:
        barrier = _BARRIERS.get(name)
        if barrier is None or barrier.broken:
            barrier = _BARRIERS[name] = threading.Barrier(parties)
        return barrier


class NumpyInstance(ModelInstance):
    def execute(self, requests):
        config = self.model.context.config
        op = config.parameter("op", "identity")
        if op == "fail":
            raise RuntimeError("the model failed on purpose")
        if op == "sleep":
            started = config.parameter("started_file")
            if started:  # lets a test act while the execution is surely in flight
                Path(started).touch()
            time.sleep(int(config.parameter("sleep_ms", "50")) / 1000)
        if op == "rendezvous":
            # Raises BrokenBarrierError when the other party never comes (no overlap).
            _barrier(config.parameter("barrier", "b"), int(config.parameter("parties", "2"))).wait(timeout=30)
        if op == "repeat":
            return self._repeat(requests)
        if op == "count_up":
            return self._count_up(requests, int(config.parameter("repeat", "3")))
        responses = []
        for request in requests:
            if op == "echo_parameters":
                text = json.dumps(request.parameters, sort_keys=True).encode()
                outputs = [Tensor.from_numpy("OUTPUT0", np.array([text], dtype=object))]
            elif op == "add_sub":
                a, b = request.input("INPUT0").data, request.input("INPUT1").data
                outputs = [Tensor.from_numpy("OUTPUT0", a + b), Tensor.from_numpy("OUTPUT1", a - b)]
            elif op == "scale":
                factor = float(config.parameter("factor", "2"))
                outputs = [
                    Tensor.from_numpy(t.name.replace("INPUT", "OUTPUT"), (t.data * factor).astype(t.data.dtype))
                    for t in request.inputs
                ]
            else:
                outputs = [
                    Tensor(t.name.replace("INPUT", "OUTPUT"), t.datatype, t.shape, t.data) for t in request.inputs
                ]
            responses.append(InferenceResponse(outputs=outputs))
        return responses

    def _count_up(self, requests, count):
        for request in requests:
            data = request.input("INPUT0").data
            for i in range(count):
                out = data + np.asarray(i, data.dtype)
                request.response_sender(InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT0", out)]), False)
            request.response_sender(None, True)
        return None

    def _repeat(self, requests):
        for request in requests:
            send = request.response_sender
            for index, value in enumerate(request.input("IN").data.reshape(-1)):
                send(InferenceResponse(outputs=[
                    Tensor.from_numpy("OUT", np.array([value], np.int32)),
                    Tensor.from_numpy("IDX", np.array([index], np.uint32)),
                ]), False)
            send(None, True)
        return None


class NumpyModel(Model):
    def initialize(self):
        # `allocate_mb` stands in for weights: memory a model holds until it is finalized.
        self.weights = np.ones(int(self.context.config.parameter("allocate_mb", "0")) * 2**20, np.uint8)

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
